//! Colour for people at a terminal, as terraform and `kubectl diff` colour a plan: additions
//! green, removals red, updates yellow, replacements magenta, hunk headers cyan, warnings bold
//! yellow. Only when stdout is a terminal and `NO_COLOR` is unset (`CLICOLOR_FORCE=1` forces
//! it, `TERM=dumb` turns it off): files, pipes and CI logs get the plain text, byte for byte.

use std::io::IsTerminal;

/// Whether to colour stdout: ENV reads a variable, TTY says whether stdout is a terminal.
pub fn wanted(env: impl Fn(&str) -> Option<String>, tty: bool) -> bool {
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    if env("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    tty && env("TERM").as_deref() != Some("dumb")
}

/// Whether this process's stdout gets colour.
pub fn stdout() -> bool {
    wanted(|k| std::env::var(k).ok(), std::io::stdout().is_terminal())
}

const RESET: &str = "\x1b[0m";

/// A plan as `format::text` writes it, coloured line by line from its signs.
pub fn plan(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let body = line.trim_start();
        let code = if line.starts_with("-/+ ") {
            Some("\x1b[35m")
        } else if line.starts_with("+ ") || (line.starts_with("    +") && !body.starts_with("+++"))
        {
            Some("\x1b[32m")
        } else if line.starts_with("- ") || (line.starts_with("    -") && !body.starts_with("---"))
        {
            Some("\x1b[31m")
        } else if line.starts_with("~ ") {
            Some("\x1b[33m")
        } else if body.starts_with("@@") {
            Some("\x1b[36m")
        } else if body.starts_with("! ") || body.starts_with("REFUSED") {
            Some("\x1b[1;33m")
        } else {
            None
        };
        match code {
            Some(c) => {
                let (text, nl) = match line.strip_suffix('\n') {
                    Some(t) => (t, "\n"),
                    None => (line, ""),
                };
                out.push_str(c);
                out.push_str(text);
                out.push_str(RESET);
                out.push_str(nl);
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn colour_only_at_a_terminal_and_never_with_no_color() {
        assert!(wanted(env(&[]), true));
        assert!(!wanted(env(&[]), false), "a pipe or a file");
        assert!(!wanted(env(&[("NO_COLOR", "1")]), true));
        assert!(
            wanted(env(&[("NO_COLOR", "")]), true),
            "NO_COLOR empty counts as unset"
        );
        assert!(!wanted(env(&[("TERM", "dumb")]), true));
        assert!(wanted(env(&[("CLICOLOR_FORCE", "1")]), false));
        assert!(!wanted(
            env(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]),
            false
        ));
    }

    #[test]
    fn signs_are_coloured_and_the_text_is_kept() {
        let text = "Plan: 1 to create\n\n+ create ConfigMap a\n    @@ -0,0 +1 @@\n    +x: 1\n~ update StatefulSet b\n    -image: 1\n-/+ replace Service c\n- delete Pod d\n  ! a warning\nplain";
        let c = plan(text);
        assert!(c.contains("\x1b[32m+ create ConfigMap a\x1b[0m\n"));
        assert!(c.contains("\x1b[36m    @@ -0,0 +1 @@\x1b[0m\n"));
        assert!(c.contains("\x1b[32m    +x: 1\x1b[0m\n"));
        assert!(c.contains("\x1b[33m~ update StatefulSet b\x1b[0m\n"));
        assert!(c.contains("\x1b[31m    -image: 1\x1b[0m\n"));
        assert!(c.contains("\x1b[35m-/+ replace Service c\x1b[0m\n"));
        assert!(c.contains("\x1b[31m- delete Pod d\x1b[0m\n"));
        assert!(c.contains("\x1b[1;33m  ! a warning\x1b[0m\n"));
        assert!(c.ends_with("\nplain"));
        let stripped = c
            .replace(RESET, "")
            .replace("\x1b[32m", "")
            .replace("\x1b[36m", "")
            .replace("\x1b[33m", "")
            .replace("\x1b[31m", "")
            .replace("\x1b[35m", "")
            .replace("\x1b[1;33m", "");
        assert_eq!(stripped, text);
    }
}
