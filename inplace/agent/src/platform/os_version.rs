//! The running OS version: `/etc/os-release` on a real node, a given value on a simulated one.
//!
//! Choice: `IMAGE_VERSION` wins over `VERSION_ID` (os-release(5) defines `IMAGE_VERSION` for
//! image-based systems such as our A/B slots; `VERSION_ID` is the distribution's). Values may be
//! quoted with `"` or `'`; backslash escapes are honoured for `"`, `\`, `$` and `` ` ``.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Failure to learn the running OS version.
#[derive(Debug, thiserror::Error)]
pub enum OsVersionError {
    /// The os-release file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Neither `IMAGE_VERSION` nor `VERSION_ID` is set.
    #[error("{path} sets neither IMAGE_VERSION nor VERSION_ID")]
    Missing {
        /// The file.
        path: PathBuf,
    },
}

/// Where the running OS version comes from.
pub trait OsVersionSource: Send + Sync + std::fmt::Debug {
    /// The version of the OS that is running now.
    fn running_version(&self) -> Result<String, OsVersionError>;
}

/// Reads an os-release file (default `/etc/os-release`).
#[derive(Debug, Clone)]
pub struct OsRelease {
    path: PathBuf,
}

impl OsRelease {
    /// Reads `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `/etc/os-release`.
    pub fn system() -> Self {
        Self::new("/etc/os-release")
    }
}

impl OsVersionSource for OsRelease {
    fn running_version(&self) -> Result<String, OsVersionError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| OsVersionError::Read {
            path: self.path.clone(),
            source,
        })?;
        version_from_os_release(&text).ok_or_else(|| OsVersionError::Missing {
            path: self.path.clone(),
        })
    }
}

/// The version in os-release text: `IMAGE_VERSION`, else `VERSION_ID`.
pub fn version_from_os_release(text: &str) -> Option<String> {
    let mut image_version = None;
    let mut version_id = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = unquote(value.trim());
        if value.is_empty() {
            continue;
        }
        match key.trim() {
            "IMAGE_VERSION" => image_version = Some(value),
            "VERSION_ID" => version_id = Some(value),
            _ => {}
        }
    }
    image_version.or(version_id)
}

fn unquote(value: &str) -> String {
    let bytes = value.as_bytes();
    if bytes.len() >= 2 && bytes[0] == b'\'' && bytes[bytes.len() - 1] == b'\'' {
        return value[1..value.len() - 1].to_owned();
    }
    if bytes.len() >= 2 && bytes[0] == b'"' && bytes[bytes.len() - 1] == b'"' {
        let mut out = String::new();
        let mut chars = value[1..value.len() - 1].chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some(n @ ('"' | '\\' | '$' | '`')) => out.push(n),
                    Some(n) => {
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        return out;
    }
    value.to_owned()
}

/// A version set from outside (simulated machines); clones share the value.
#[derive(Debug, Clone)]
pub struct FixedOsVersion {
    version: Arc<Mutex<String>>,
}

impl FixedOsVersion {
    /// Starts at `version`.
    pub fn new(version: impl Into<String>) -> Self {
        Self {
            version: Arc::new(Mutex::new(version.into())),
        }
    }

    /// Changes the version (the simulated machine booted another slot).
    pub fn set(&self, version: impl Into<String>) {
        *self.version.lock().expect("os version lock") = version.into();
    }
}

impl OsVersionSource for FixedOsVersion {
    fn running_version(&self) -> Result<String, OsVersionError> {
        Ok(self.version.lock().expect("os version lock").clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_version_wins_and_quotes_are_removed() {
        let text = "NAME=\"Rackproof\"\nVERSION_ID=12\n# IMAGE_VERSION=commented\nIMAGE_VERSION=\"1.2.\\\"3\"\n";
        assert_eq!(version_from_os_release(text).as_deref(), Some("1.2.\"3"));
        assert_eq!(
            version_from_os_release("VERSION_ID='12.4'\n").as_deref(),
            Some("12.4")
        );
        assert_eq!(version_from_os_release("NAME=x\nIMAGE_VERSION=\n"), None);
    }

    #[test]
    fn the_file_source_reports_missing_files_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("os-release");
        assert!(matches!(
            OsRelease::new(&path).running_version(),
            Err(OsVersionError::Read { .. })
        ));
        std::fs::write(&path, "NAME=x\n").unwrap();
        let err = OsRelease::new(&path).running_version().unwrap_err();
        assert!(
            err.to_string()
                .contains("neither IMAGE_VERSION nor VERSION_ID"),
            "{err}"
        );
        std::fs::write(&path, "IMAGE_VERSION=2.0.0\n").unwrap();
        assert_eq!(OsRelease::new(&path).running_version().unwrap(), "2.0.0");
    }

    #[test]
    fn the_fixed_source_follows_set() {
        let source = FixedOsVersion::new("1");
        let clone = source.clone();
        clone.set("2");
        assert_eq!(source.running_version().unwrap(), "2");
    }
}
