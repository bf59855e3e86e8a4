//! Slurm's configuration syntax, as its own parser reads it.
//!
//! The files are read the way Slurm's own parser (src/common/parse_config.c) reads them, so that
//! no key Slurm would see is missed: a physical line ends at a NUL byte; an unescaped `#` starts a
//! comment; an odd run of `\` ending a line continues it on the next; then `\x` stands for `x`;
//! a line holds `Key=Value` pairs (`Key op= Value`, op one of `+-*/`, blanks allowed around `=`),
//! a value is `"quoted"` (when a blank or the end follows the closing quote) or runs to the next
//! blank; `Include FILE` at the start of a line reads another file. Where this reader is unsure it
//! errs towards seeing more: any whitespace, Unicode included, ends an unquoted value, and text
//! that is no key=value is reported as an unknown key.

/// One `Key=Value` of a line as Slurm's parser splits it, or (garbage) text it cannot read.
#[derive(Debug, PartialEq, Eq)]
pub struct Pair<'a> {
    pub key: &'a str,
    /// `""`, or the operator of `Key+=Value` and the like.
    pub op: &'a str,
    pub value: &'a str,
    pub garbage: bool,
}

impl Pair<'_> {
    /// What two pairs must share to be the same setting: key without case, operator, value.
    pub fn identity(&self) -> String {
        let mut s = String::with_capacity(self.key.len() + self.op.len() + self.value.len() + 3);
        s.push(if self.garbage { '!' } else { '=' });
        s.push_str(&self.key.to_ascii_lowercase());
        s.push('\0');
        s.push_str(self.op);
        s.push('\0');
        s.push_str(self.value);
        s
    }
}

/// One line as Slurm's parser sees it: continuation joined, comments and escapes stripped.
pub struct Line {
    /// 1-based number of its first physical line.
    pub number: usize,
    pub text: String,
}

/// TEXT's lines as `_get_next_line` of parse_config.c makes them.
pub fn logical_lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start = 0;
    let mut open = false;
    for (i, physical) in text.split('\n').enumerate() {
        if !open {
            start = i + 1;
        }
        // Slurm reads lines as C strings: nothing after a NUL counts.
        let physical = physical.split('\0').next().unwrap_or("");
        let physical = strip_comment(physical);
        match continued(physical) {
            Some(kept) => {
                buf.push_str(kept);
                open = true;
            }
            None => {
                buf.push_str(physical);
                out.push(Line {
                    number: start,
                    text: strip_escapes(&buf),
                });
                buf.clear();
                open = false;
            }
        }
    }
    if open {
        out.push(Line {
            number: start,
            text: strip_escapes(&buf),
        });
    }
    out
}

/// LINE up to its first `#` that an even number of `\` precedes.
fn strip_comment(line: &str) -> &str {
    let mut backslashes = 0;
    for (i, b) in line.bytes().enumerate() {
        match b {
            b'#' if backslashes % 2 == 0 => return &line[..i],
            b'\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line
}

/// When LINE ends (blanks aside) in an odd run of `\`, what stays of it: all before the last `\`.
fn continued(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut end = b.len();
    while end > 0 && is_c_space(b[end - 1]) {
        end -= 1;
    }
    let mut run = 0;
    while run < end && b[end - 1 - run] == b'\\' {
        run += 1;
    }
    (run % 2 == 1).then(|| &line[..end - 1])
}

/// LINE with each `\` dropped and the character after it kept.
fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The length of the whitespace character at byte I of S (any Unicode whitespace), or 0.
fn space_at(s: &str, i: usize) -> usize {
    match s.as_bytes().get(i) {
        Some(&b) if b.is_ascii() => usize::from(is_c_space(b)),
        Some(_) => s[i..]
            .chars()
            .next()
            .filter(|c| c.is_whitespace())
            .map_or(0, char::len_utf8),
        None => 0,
    }
}

fn skip_space(s: &str, mut i: usize) -> usize {
    loop {
        match space_at(s, i) {
            0 => return i,
            n => i += n,
        }
    }
}

/// The first whitespace at or after byte I of S, or its end.
fn next_space(s: &str, mut i: usize) -> usize {
    while i < s.len() && space_at(s, i) == 0 {
        i += s[i..].chars().next().map_or(1, char::len_utf8);
    }
    i
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// The pairs of one logical line, in order, as `s_p_parse_line` and `_keyvalue_regex` read them.
pub fn pairs(line: &str) -> Vec<Pair<'_>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    const INCLUDE: &[u8] = b"include";
    if b.len() > INCLUDE.len()
        && b[..INCLUDE.len()].eq_ignore_ascii_case(INCLUDE)
        && is_c_space(b[INCLUDE.len()])
    {
        let start = skip_space(line, INCLUDE.len());
        i = next_space(line, start);
        out.push(Pair {
            key: &line[..INCLUDE.len()],
            op: "",
            value: &line[start..i],
            garbage: false,
        });
    }
    loop {
        i = skip_space(line, i);
        if i >= b.len() {
            return out;
        }
        let key_start = i;
        while i < b.len() && is_key_byte(b[i]) {
            i += 1;
        }
        let key_end = i;
        let mut j = skip_space(line, i);
        let mut op = "";
        if j + 1 < b.len() && b"+-*/".contains(&b[j]) && b[j + 1] == b'=' {
            op = &line[j..j + 1];
            j += 1;
        }
        if key_end > key_start && b.get(j) == Some(&b'=') {
            let (value, next) = value_at(line, skip_space(line, j + 1));
            out.push(Pair {
                key: &line[key_start..key_end],
                op,
                value,
                garbage: false,
            });
            i = next;
        } else {
            // Not key=value: Slurm stops here with a parse error; report the word as unknown.
            let end = next_space(line, key_start);
            out.push(Pair {
                key: &line[key_start..end],
                op: "",
                value: "",
                garbage: true,
            });
            i = end;
        }
    }
}

/// The value starting at byte I of LINE, and where it ends.
fn value_at(line: &str, i: usize) -> (&str, usize) {
    let b = line.as_bytes();
    if b.get(i) == Some(&b'"')
        && let Some(q) = line[i + 1..].find('"')
    {
        let close = i + 1 + q;
        // Only a C-locale blank ends a quoted value for certain; otherwise read it unquoted,
        // which splits it into more words, never fewer.
        if b.get(close + 1).is_none_or(|&c| is_c_space(c)) {
            return (&line[i + 1..close], close + 1);
        }
    }
    let end = next_space(line, i);
    (&line[i..end], end)
}
