//! Text from outside shown to people: Slurm users pick job names, comments and drain reasons, a
//! git server writes its own error messages, and cluster.yaml's values are quoted in
//! diagnostics. Any of them may carry control characters that move a terminal's cursor, rewrite
//! its title, erase what was printed or, with bidirectional overrides, show text in another
//! order than it reads: in logs, the status, Events and CI output they are escaped (`\u{1b}`).

use std::borrow::Cow;

/// S with every control character and bidirectional formatting character escaped.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match unsafe_char(c) {
            true => out.extend(c.escape_unicode()),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// TEXT as one cell of a Markdown table: on one line, its pipes escaped (the generated
/// reference pages).
pub fn table_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// As `escaped`, owned (for fields filled from the wire).
pub fn clean(s: String) -> String {
    match escaped(&s) {
        Cow::Borrowed(_) => s,
        Cow::Owned(o) => o,
    }
}

fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_and_bidi_overrides_are_escaped_and_plain_text_kept() {
        assert_eq!(escaped("gpu-0: Resources"), "gpu-0: Resources");
        assert!(matches!(escaped("ümlaut ok"), Cow::Borrowed(_)));
        assert_eq!(
            escaped("\u{1b}]0;pwned\u{7}\u{1b}[2Jx"),
            "\\u{1b}]0;pwned\\u{7}\\u{1b}[2Jx"
        );
        assert_eq!(escaped("a\nb\r\tc"), "a\\u{a}b\\u{d}\\u{9}c");
        assert_eq!(escaped("exe.\u{202e}txt"), "exe.\\u{202e}txt");
        assert_eq!(escaped("\u{9b}31m"), "\\u{9b}31m");
    }
}
