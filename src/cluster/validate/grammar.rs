//! The grammar of values slurmops writes into Slurm's files. slurm.conf is `Key=Value` words
//! separated by spaces, one line per setting, `#` starting a comment: a value from cluster.yaml
//! with a space, a line break or a `#` would add settings git never named (a
//! `PrologSlurmctld=` on the controller, say) or cut the line. Such values are refused, not
//! quoted.

/// What is wrong with VALUE as one slurm.conf word, if anything.
pub fn word_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("a value must not be empty: Slurm would read what follows on the line as its value")
    } else if value.contains(['\n', '\r']) {
        Some("a value must be on one line")
    } else if value.chars().any(char::is_control) {
        Some("a value must not hold control characters")
    } else if value.chars().any(char::is_whitespace) {
        Some("a value must not hold spaces: Slurm would read what follows as another setting")
    } else if value.contains('#') {
        Some("a value must not hold '#': Slurm would read the rest of the line as a comment")
    } else if value.contains('\\') {
        Some(
            "a value must not hold '\\': Slurm would join the next line to it, or unescape what follows",
        )
    } else if value.contains('"') {
        Some(
            "a value must not hold '\"': Slurm would read what follows, settings included, as one quoted value",
        )
    } else {
        None
    }
}

/// Whether S is a plain SQL name (a MariaDB database or user): letters, digits and `_`, at
/// most 64.
pub fn is_sql_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether S is a Slurm time limit: `UNLIMITED`/`INFINITE`, or minutes, `MM:SS`, `HH:MM:SS`,
/// `D-HH`, `D-HH:MM` or `D-HH:MM:SS`.
pub fn is_time_limit(s: &str) -> bool {
    if ["UNLIMITED", "INFINITE"]
        .iter()
        .any(|w| w.eq_ignore_ascii_case(s))
    {
        return true;
    }
    let number = |x: &str| !x.is_empty() && x.len() <= 9 && x.bytes().all(|b| b.is_ascii_digit());
    let (days, clock) = match s.split_once('-') {
        Some((d, rest)) => (Some(d), rest),
        None => (None, s),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    days.is_none_or(number) && parts.len() <= 3 && parts.iter().all(|p| number(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_time_limits_are_recognised() {
        for ok in [
            "UNLIMITED",
            "infinite",
            "30",
            "30:00",
            "1:00:00",
            "7-00:00:00",
            "1-12",
            "2-6:30",
        ] {
            assert!(is_time_limit(ok), "{ok}");
        }
        for bad in [
            "",
            "1:00:00 AllowAccounts=root",
            "1:00:00\nPrologSlurmctld=/x",
            "1h",
            "-1",
            "1::",
            "1:2:3:4",
            "a-1",
        ] {
            assert!(!is_time_limit(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_empty_word_or_one_with_a_space_a_break_a_hash_a_backslash_or_a_quote_is_refused() {
        assert_eq!(word_problem("priority/multifactor"), None);
        assert!(is_sql_name("slurm_acct_db") && !is_sql_name("a'b") && !is_sql_name(""));
        for bad in [
            "a b", "a\nb", "a\rb", "a\tb", "a#b", "a\u{7}b", "", "a\\", "a\"b",
        ] {
            assert!(word_problem(bad).is_some(), "{bad:?}");
        }
    }
}
