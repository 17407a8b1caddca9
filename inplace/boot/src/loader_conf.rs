//! `loader/loader.conf`: the `default` entry pattern and the menu `timeout`, read as systemd-boot
//! 252 reads them (lenient: bad lines are ignored) or strictly for files we write ourselves.

use std::fmt;

use crate::lines::key_values;

/// Where `loader.conf` lives on the ESP.
pub const LOADER_CONF_PATH: &str = "loader/loader.conf";

/// The menu timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    Seconds(u32),
    MenuForce,
    MenuHidden,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Seconds(s) => write!(f, "{s}"),
            Self::MenuForce => f.write_str("menu-force"),
            Self::MenuHidden => f.write_str("menu-hidden"),
        }
    }
}

/// The settings of `loader.conf` this model uses; other lines are kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoaderConf {
    /// A glob matched against entry ids (lowercased file names, counter included), or `@saved`.
    pub default: Option<String>,
    pub timeout: Option<Timeout>,
    pub other: Vec<(String, String)>,
}

/// A `loader.conf` line the loader would ignore.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoaderConfError {
    #[error(
        "parse loader.conf line {line}: invalid timeout {value:?} (seconds, menu-force or menu-hidden)"
    )]
    Timeout { line: usize, value: String },
    #[error("parse loader.conf line {line}: unsupported special entry {value:?} (only @saved)")]
    Special { line: usize, value: String },
    #[error("read loader.conf: contents are not UTF-8")]
    NotText,
}

impl LoaderConf {
    /// Parses strictly: any line the loader would ignore is an error.
    pub fn parse(text: &str) -> Result<Self, LoaderConfError> {
        let (conf, mut errors) = Self::parse_inner(text);
        match errors.drain(..).next() {
            Some(e) => Err(e),
            None => Ok(conf),
        }
    }

    /// Parses as the loader does: bad `timeout`/`default` lines are ignored; also returns them.
    pub fn parse_lenient(text: &str) -> (Self, Vec<LoaderConfError>) {
        Self::parse_inner(text)
    }

    /// Lenient parse of raw bytes (non-UTF-8 bytes are replaced, never fatal: the loader boots anyway).
    pub fn parse_lenient_bytes(bytes: &[u8]) -> (Self, Vec<LoaderConfError>) {
        let text = String::from_utf8_lossy(bytes);
        let (conf, mut errors) = Self::parse_inner(&text);
        if std::str::from_utf8(bytes).is_err() {
            errors.push(LoaderConfError::NotText);
        }
        (conf, errors)
    }

    fn parse_inner(text: &str) -> (Self, Vec<LoaderConfError>) {
        let mut conf = Self::default();
        let mut errors = Vec::new();
        for kv in key_values(text) {
            match kv.key {
                "timeout" => match kv.value {
                    "menu-force" => conf.timeout = Some(Timeout::MenuForce),
                    "menu-hidden" => conf.timeout = Some(Timeout::MenuHidden),
                    v => match v.parse::<u32>() {
                        Ok(s) if v.bytes().all(|b| b.is_ascii_digit()) => {
                            conf.timeout = Some(Timeout::Seconds(s))
                        }
                        _ => errors.push(LoaderConfError::Timeout {
                            line: kv.line,
                            value: v.to_owned(),
                        }),
                    },
                },
                "default" => {
                    if kv.value.starts_with('@') && !kv.value.eq_ignore_ascii_case("@saved") {
                        errors.push(LoaderConfError::Special {
                            line: kv.line,
                            value: kv.value.to_owned(),
                        });
                    } else {
                        conf.default = Some(kv.value.to_owned());
                    }
                }
                other => conf.other.push((other.to_owned(), kv.value.to_owned())),
            }
        }
        (conf, errors)
    }

    /// Canonical text.
    pub fn format(&self) -> String {
        let mut out = String::new();
        if let Some(d) = &self.default {
            out.push_str(&format!("default {d}\n"));
        }
        if let Some(t) = &self.timeout {
            out.push_str(&format!("timeout {t}\n"));
        }
        for (k, v) in &self.other {
            out.push_str(&format!("{k} {v}\n"));
        }
        out
    }

    /// The `default` pattern as the loader matches it (lowercased), unless it is `@saved`.
    pub(crate) fn default_pattern(&self) -> Option<String> {
        self.default
            .as_deref()
            .map(str::to_ascii_lowercase)
            .filter(|d| d != "@saved")
    }

    /// Whether `default @saved` is set.
    pub(crate) fn uses_saved(&self) -> bool {
        self.default
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("@saved"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let conf = LoaderConf {
            default: Some("rackproof-*".into()),
            timeout: Some(Timeout::Seconds(0)),
            other: vec![("editor".into(), "no".into())],
        };
        assert_eq!(LoaderConf::parse(&conf.format()).unwrap(), conf);
        for t in [Timeout::MenuForce, Timeout::MenuHidden] {
            let c = LoaderConf {
                timeout: Some(t),
                ..LoaderConf::default()
            };
            assert_eq!(LoaderConf::parse(&c.format()).unwrap(), c);
        }
    }

    #[test]
    fn bad_lines_are_errors_strictly_and_ignored_leniently() {
        let text = "timeout soon\ndefault @foo\ndefault os-1.conf\n";
        let err = LoaderConf::parse(text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "parse loader.conf line 1: invalid timeout \"soon\" (seconds, menu-force or menu-hidden)"
        );
        let (conf, errors) = LoaderConf::parse_lenient(text);
        assert_eq!(errors.len(), 2);
        assert_eq!(conf.default.as_deref(), Some("os-1.conf"));
        assert_eq!(conf.timeout, None);
    }

    #[test]
    fn saved_and_case_folding() {
        let conf = LoaderConf::parse("default @SAVED\n").unwrap();
        assert!(conf.uses_saved());
        assert_eq!(conf.default_pattern(), None);
        let conf = LoaderConf::parse("default OS-*\n").unwrap();
        assert_eq!(conf.default_pattern().as_deref(), Some("os-*"));
    }
}
