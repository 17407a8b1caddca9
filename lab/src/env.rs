//! The process environment as a value: the lab reads credentials references and directories
//! (`RACKPROOF_LOCK_DIR`, `RACKPROOF_CACHE`, `HOME`) through an [`Env`], so tests hand in their own
//! variables instead of changing the process's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where environment variables come from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `None`: the process environment; `Some`: exactly these variables.
    fixed: Option<BTreeMap<String, OsString>>,
}

/// A directory the environment does not say how to find.
#[derive(Debug, thiserror::Error)]
#[error("cannot find a directory for {what}: set {vars}")]
pub struct NoDirectory {
    pub what: &'static str,
    pub vars: &'static str,
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self { fixed: None }
    }

    /// Exactly these variables, nothing from the process.
    pub fn fixed<K: Into<String>, V: Into<OsString>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            fixed: Some(
                vars.into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// The same environment with `name` set to `value` (a fixed environment only grows; the
    /// process environment is copied first).
    pub fn with(self, name: &str, value: impl Into<OsString>) -> Self {
        let mut vars = match self.fixed {
            Some(vars) => vars,
            None => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
                .collect(),
        };
        vars.insert(name.to_owned(), value.into());
        Self { fixed: Some(vars) }
    }

    /// The value of `name`, if set (possibly empty, possibly not UTF-8).
    pub fn var_os(&self, name: &str) -> Option<OsString> {
        match &self.fixed {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var_os(name),
        }
    }

    /// The value of `name` when it is set and not empty.
    fn non_empty(&self, name: &str) -> Option<OsString> {
        self.var_os(name).filter(|v| !v.is_empty())
    }

    /// `$RACKPROOF_CACHE`, else `$HOME/.cache/rackproof`.
    pub fn cache_dir(&self) -> Result<PathBuf, NoDirectory> {
        if let Some(dir) = self.non_empty("RACKPROOF_CACHE") {
            return Ok(PathBuf::from(dir));
        }
        match self.non_empty("HOME") {
            Some(home) => Ok(Path::new(&home).join(".cache/rackproof")),
            None => Err(NoDirectory {
                what: "the rackproof cache",
                vars: "RACKPROOF_CACHE or HOME",
            }),
        }
    }

    /// Where node reservations are kept: `$RACKPROOF_LOCK_DIR`, else `locks` in the cache dir.
    pub fn lock_dir(&self) -> Result<PathBuf, NoDirectory> {
        if let Some(dir) = self.non_empty("RACKPROOF_LOCK_DIR") {
            return Ok(PathBuf::from(dir));
        }
        self.cache_dir()
            .map(|c| c.join("locks"))
            .map_err(|_| NoDirectory {
                what: "node reservations",
                vars: "RACKPROOF_LOCK_DIR, RACKPROOF_CACHE or HOME",
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_dir_prefers_its_variable_then_the_cache() {
        let env = Env::fixed([("RACKPROOF_LOCK_DIR", "/l"), ("RACKPROOF_CACHE", "/c")]);
        assert_eq!(env.lock_dir().unwrap(), PathBuf::from("/l"));
        let env = Env::fixed([("RACKPROOF_CACHE", "/c"), ("HOME", "/h")]);
        assert_eq!(env.lock_dir().unwrap(), PathBuf::from("/c/locks"));
        let env = Env::fixed([("HOME", "/h"), ("RACKPROOF_LOCK_DIR", "")]);
        assert_eq!(
            env.lock_dir().unwrap(),
            PathBuf::from("/h/.cache/rackproof/locks")
        );
        let err = Env::fixed::<&str, &str>([])
            .lock_dir()
            .unwrap_err()
            .to_string();
        assert!(err.contains("RACKPROOF_LOCK_DIR"), "{err}");
    }
}
