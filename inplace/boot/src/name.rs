//! Type #1 entry file names and their boot counters: `NAME+LEFT-DONE.conf`, `NAME+LEFT.conf`,
//! `NAME.conf`, parsed exactly as systemd-boot 252's `config_entry_parse_tries` does.

use std::fmt;

/// The suffix every Type #1 entry file carries.
pub const CONF_SUFFIX: &str = ".conf";

/// The largest counter value systemd-boot accepts (`INT_MAX`); larger ones mean "no counter".
const COUNTER_MAX: u64 = i32::MAX as u64;

/// A boot counter: tries left, and tries done (absent in `NAME+LEFT.conf`, which means 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counter {
    pub left: u32,
    pub done: Option<u32>,
}

/// The file name of a boot loader entry in `loader/entries/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryName {
    file_name: String,
    /// Length of the part before the counter's digits (including the `+`), if there is a counter.
    prefix_len: usize,
    stem: String,
    counter: Option<Counter>,
}

/// A string that is not an entry file name, or a stem that can't make one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("parse entry file name {name:?}: {reason}")]
    NotAnEntry { name: String, reason: &'static str },
    #[error("use {stem:?} as an entry name: {reason}")]
    BadStem { stem: String, reason: &'static str },
}

impl EntryName {
    /// Parses a file name in `loader/entries/` as systemd-boot does. Files systemd-boot skips
    /// (hidden, `auto-*`, not ending in `.conf`) are errors.
    pub fn parse(file_name: &str) -> Result<Self, NameError> {
        let not = |reason| NameError::NotAnEntry {
            name: file_name.to_owned(),
            reason,
        };
        if file_name.is_empty() || file_name.contains(['/', '\\']) {
            return Err(not("not a plain file name"));
        }
        if file_name.starts_with('.') {
            return Err(not("hidden files are skipped by the loader"));
        }
        if file_name.starts_with("auto-") {
            return Err(not("names starting with auto- are skipped by the loader"));
        }
        let lower = file_name.to_ascii_lowercase();
        if !lower.ends_with(CONF_SUFFIX) || file_name.len() < CONF_SUFFIX.len() {
            return Err(not("does not end in .conf"));
        }
        let plain_stem = file_name[..file_name.len() - CONF_SUFFIX.len()].to_owned();
        match parse_counter(file_name) {
            Some((prefix_len, counter)) => Ok(Self {
                file_name: file_name.to_owned(),
                prefix_len,
                stem: file_name[..prefix_len - 1].to_owned(),
                counter: Some(counter),
            }),
            None => Ok(Self {
                file_name: file_name.to_owned(),
                prefix_len: 0,
                stem: plain_stem,
                counter: None,
            }),
        }
    }

    /// A new name from a stem and an optional counter (`tries_done` written only when given).
    pub fn new(stem: &str, counter: Option<Counter>) -> Result<Self, NameError> {
        validate_stem(stem)?;
        if let Some(c) = counter
            && (u64::from(c.left) > COUNTER_MAX
                || c.done.is_some_and(|d| u64::from(d) > COUNTER_MAX))
        {
            return Err(NameError::BadStem {
                stem: stem.to_owned(),
                reason: "counter out of range",
            });
        }
        let file_name = match counter {
            None => format!("{stem}{CONF_SUFFIX}"),
            Some(Counter { left, done: None }) => format!("{stem}+{left}{CONF_SUFFIX}"),
            Some(Counter {
                left,
                done: Some(done),
            }) => format!("{stem}+{left}-{done}{CONF_SUFFIX}"),
        };
        Self::parse(&file_name)
    }

    /// A fresh entry to be tried `tries` times: `STEM+TRIES.conf`.
    pub fn with_tries(stem: &str, tries: u32) -> Result<Self, NameError> {
        Self::new(
            stem,
            Some(Counter {
                left: tries,
                done: None,
            }),
        )
    }

    /// The file name as it is on the ESP.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The name without counter and suffix: what stays the same across renames.
    pub fn stem(&self) -> &str {
        &self.stem
    }

    /// The entry id systemd-boot uses for `default` patterns and `LoaderEntrySelected`: the file
    /// name (counter and suffix included), lowercased.
    pub fn id(&self) -> String {
        self.file_name.to_ascii_lowercase()
    }

    pub fn counter(&self) -> Option<Counter> {
        self.counter
    }

    /// Tries left, or `None` for an entry without counter.
    pub fn tries_left(&self) -> Option<u32> {
        self.counter.map(|c| c.left)
    }

    /// Tries done (0 when the counter omits it), or `None` for an entry without counter.
    pub fn tries_done(&self) -> Option<u32> {
        self.counter.map(|c| c.done.unwrap_or(0))
    }

    /// Good: no counter (blessed, or never counted).
    pub fn is_blessed(&self) -> bool {
        self.counter.is_none()
    }

    /// Bad: a counter with no tries left. The loader sorts it last, but still boots it if selected.
    pub fn is_bad(&self) -> bool {
        self.tries_left() == Some(0)
    }

    /// Still being assessed: a counter with tries left.
    pub fn is_in_trial(&self) -> bool {
        self.tries_left().is_some_and(|l| l > 0)
    }

    /// The name the loader renames the file to before booting it: `LEFT-1` (not below 0) and
    /// `DONE+1`. `None` for an entry without counter (the loader leaves it alone).
    pub fn after_boot_attempt(&self) -> Option<EntryName> {
        let c = self.counter?;
        let left = c.left.saturating_sub(1);
        let done = (u64::from(c.done.unwrap_or(0)) + 1).min(COUNTER_MAX) as u32;
        let file_name = format!(
            "{}{left}-{done}{CONF_SUFFIX}",
            &self.file_name[..self.prefix_len]
        );
        Some(Self {
            file_name,
            prefix_len: self.prefix_len,
            stem: self.stem.clone(),
            counter: Some(Counter {
                left,
                done: Some(done),
            }),
        })
    }

    /// The name after blessing: the counter removed.
    pub fn blessed(&self) -> EntryName {
        if self.counter.is_none() {
            return self.clone();
        }
        Self {
            file_name: format!("{}{CONF_SUFFIX}", self.stem),
            prefix_len: 0,
            stem: self.stem.clone(),
            counter: None,
        }
    }

    /// The name after marking the entry bad (`systemd-bless-boot bad`): no tries left, tries done
    /// kept. `None` for an entry without counter, which can't be marked bad.
    pub fn marked_bad(&self) -> Option<EntryName> {
        let c = self.counter?;
        let done = c.done.unwrap_or(0);
        Some(Self {
            file_name: format!(
                "{}0-{done}{CONF_SUFFIX}",
                &self.file_name[..self.prefix_len]
            ),
            prefix_len: self.prefix_len,
            stem: self.stem.clone(),
            counter: Some(Counter {
                left: 0,
                done: Some(done),
            }),
        })
    }
}

impl fmt::Display for EntryName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file_name)
    }
}

/// `(prefix length including '+', counter)` when the name ends in `+LEFT[-DONE].conf` exactly.
fn parse_counter(file_name: &str) -> Option<(usize, Counter)> {
    let plus = file_name.rfind('+')?;
    let rest = &file_name[plus + 1..];
    let (left, rest) = parse_number(rest)?;
    let (done, rest) = match rest.strip_prefix('-') {
        Some(after) => {
            let (done, rest) = parse_number(after)?;
            (Some(done), rest)
        }
        None => (None, rest),
    };
    // The C code compares the tail with ".conf" case-sensitively.
    if rest != CONF_SUFFIX {
        return None;
    }
    Some((plus + 1, Counter { left, done }))
}

fn parse_number(s: &str) -> Option<(u32, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let mut value: u64 = 0;
    for b in s[..digits].bytes() {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if value > COUNTER_MAX {
        return None;
    }
    Some((value as u32, &s[digits..]))
}

/// Stems we create: short, portable on FAT, and unambiguous for the counter parser.
fn validate_stem(stem: &str) -> Result<(), NameError> {
    let bad = |reason| {
        Err(NameError::BadStem {
            stem: stem.to_owned(),
            reason,
        })
    };
    if stem.is_empty() || stem.len() > 200 {
        return bad("must be 1 to 200 characters");
    }
    if stem.starts_with('.') || stem.starts_with("auto-") {
        return bad("must not start with '.' or 'auto-'");
    }
    if !stem
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~' | b'^'))
    {
        return bad("only letters, digits and . _ - ~ ^ are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        let a = EntryName::parse("os-2+3-1.conf").unwrap();
        assert_eq!(
            (a.stem(), a.tries_left(), a.tries_done()),
            ("os-2", Some(3), Some(1))
        );
        let b = EntryName::parse("os-2+3.conf").unwrap();
        assert_eq!(
            (b.stem(), b.tries_left(), b.tries_done()),
            ("os-2", Some(3), Some(0))
        );
        assert_eq!(
            b.counter(),
            Some(Counter {
                left: 3,
                done: None
            })
        );
        let c = EntryName::parse("os-1.conf").unwrap();
        assert_eq!(
            (c.stem(), c.tries_left(), c.is_blessed()),
            ("os-1", None, true)
        );
    }

    #[test]
    fn malformed_counters_are_part_of_the_name() {
        for name in [
            "os+x.conf",
            "os+3-.conf",
            "os+3-1x.conf",
            "os+3.CONF",
            "os+99999999999.conf",
            "os+3+.conf",
        ] {
            let n = EntryName::parse(name).unwrap();
            assert!(n.is_blessed(), "{name} has no counter");
        }
        // The last '+' counts.
        let n = EntryName::parse("a+b+2-0.conf").unwrap();
        assert_eq!((n.stem(), n.tries_left()), ("a+b", Some(2)));
    }

    #[test]
    fn non_entries_are_rejected() {
        for name in [
            ".os.conf.tmp",
            "auto-windows.conf",
            "os.txt",
            "",
            "a/b.conf",
            "conf",
        ] {
            assert!(EntryName::parse(name).is_err(), "{name}");
        }
        let err = EntryName::parse("os.txt").unwrap_err().to_string();
        assert_eq!(
            err,
            "parse entry file name \"os.txt\": does not end in .conf"
        );
    }

    #[test]
    fn boot_attempts_count_down_and_stop_at_zero() {
        let mut n = EntryName::with_tries("os-2", 3).unwrap();
        let mut seen = vec![n.file_name().to_owned()];
        for _ in 0..4 {
            n = n.after_boot_attempt().unwrap();
            seen.push(n.file_name().to_owned());
        }
        assert_eq!(
            seen,
            [
                "os-2+3.conf",
                "os-2+2-1.conf",
                "os-2+1-2.conf",
                "os-2+0-3.conf",
                "os-2+0-4.conf"
            ]
        );
        assert!(n.is_bad());
        assert!(
            EntryName::parse("os-1.conf")
                .unwrap()
                .after_boot_attempt()
                .is_none()
        );
    }

    #[test]
    fn bless_and_mark_bad() {
        let n = EntryName::parse("os-2+1-2.conf").unwrap();
        assert_eq!(n.blessed().file_name(), "os-2.conf");
        assert_eq!(n.marked_bad().unwrap().file_name(), "os-2+0-2.conf");
        assert_eq!(
            EntryName::parse("os-2+2.conf")
                .unwrap()
                .marked_bad()
                .unwrap()
                .file_name(),
            "os-2+0-0.conf"
        );
        assert!(
            EntryName::parse("os-2.conf")
                .unwrap()
                .marked_bad()
                .is_none()
        );
        assert!(n.is_in_trial() && !n.is_bad());
    }

    #[test]
    fn ids_are_lowercase_file_names() {
        assert_eq!(EntryName::parse("OS-2+3.conf").unwrap().id(), "os-2+3.conf");
    }

    #[test]
    fn stems_are_validated() {
        assert!(EntryName::with_tries("rackproof-1.2.3", 3).is_ok());
        for stem in ["", "a b", "a+b", ".x", "auto-x", "a/b"] {
            assert!(EntryName::with_tries(stem, 3).is_err(), "{stem}");
        }
    }
}
