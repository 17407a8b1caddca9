//! Storage of an EFI system partition: the few file operations the loader model and the OS-update
//! command need, with durable, atomic replacement built from them.
//!
//! Paths are ESP-relative with `/` separators (`loader/entries/os-2+3.conf`).
//! [`DirEsp`] is a mounted ESP (or any directory); [`crate::MemEsp`] is in memory, for simulated
//! machines and for proving atomicity with injected power cuts.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One name in a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub size: u64,
    pub is_dir: bool,
}

/// A failed ESP operation.
#[derive(Debug, thiserror::Error)]
pub enum EspError {
    #[error("{op} {path}: not found")]
    NotFound { op: &'static str, path: String },
    #[error("{op} {path}: invalid ESP path: {reason}")]
    InvalidPath {
        op: &'static str,
        path: String,
        reason: &'static str,
    },
    #[error("{op} {path}: needs {needed} bytes, {free} free on the ESP")]
    NoSpace {
        op: &'static str,
        path: String,
        needed: u64,
        free: u64,
    },
    #[error("{op} {path}: power lost")]
    PowerLost { op: &'static str, path: String },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl EspError {
    /// Whether this is an injected (or real) power loss: the machine is off now.
    pub fn is_power_lost(&self) -> bool {
        matches!(self, Self::PowerLost { .. })
    }
}

/// File operations on an ESP. Implementations are shared between tasks (`&self`).
pub trait Esp: Send + Sync + fmt::Debug {
    /// Names directly inside `dir` (`""` for the root); an absent directory lists as empty.
    fn list(&self, dir: &str) -> Result<Vec<DirEntry>, EspError>;
    /// A whole file.
    fn read(&self, path: &str) -> Result<Vec<u8>, EspError>;
    /// Whether a file exists.
    fn exists(&self, path: &str) -> Result<bool, EspError>;
    /// Creates or truncates `path` (and its parent directories), writes `data` and flushes it to
    /// stable storage. Not atomic: a power cut can leave a torn file. Use [`Esp::write_atomic`].
    fn write_file(&self, path: &str, data: &[u8]) -> Result<(), EspError>;
    /// Renames `from` to `to` (replacing `to`) atomically and durably.
    fn rename(&self, from: &str, to: &str) -> Result<(), EspError>;
    /// Removes a file; removing an absent file succeeds.
    fn remove(&self, path: &str) -> Result<(), EspError>;
    /// Bytes free for new files.
    fn free_space(&self) -> Result<u64, EspError>;

    /// Replaces `path` with `data` so that, whatever happens, `path` holds either the old or the
    /// new contents: write to a hidden temporary name next to it, flush, rename over `path`.
    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<(), EspError> {
        let tmp = temp_name(path);
        self.write_file(&tmp, data)?;
        self.rename(&tmp, path)
    }
}

/// The temporary name [`Esp::write_atomic`] uses for `path`: hidden, and not ending in `.conf`,
/// so the loader never lists it.
pub fn temp_name(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/.{file}.tmp"),
        None => format!(".{path}.tmp"),
    }
}

/// Whether a file name is one of [`temp_name`]'s.
pub fn is_temp_name(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.ends_with(".tmp")
}

/// Checks an ESP-relative path: not absolute, no empty, `.` or `..` components.
pub(crate) fn check_path(op: &'static str, path: &str, allow_root: bool) -> Result<(), EspError> {
    let invalid = |reason| {
        Err(EspError::InvalidPath {
            op,
            path: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() {
        return if allow_root { Ok(()) } else { invalid("empty") };
    }
    if path.starts_with('/') || path.contains('\\') {
        return invalid("must be relative with / separators");
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return invalid("empty, . or .. component");
    }
    Ok(())
}

/// An ESP mounted as a directory (or any directory standing in for one).
#[derive(Debug, Clone)]
pub struct DirEsp {
    root: PathBuf,
}

impl DirEsp {
    /// An ESP rooted at `root`, which must be a directory.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, EspError> {
        let root = root.into();
        let shown = root.display().to_string();
        match std::fs::metadata(&root) {
            Ok(m) if m.is_dir() => Ok(Self { root }),
            Ok(_) => Err(EspError::InvalidPath {
                op: "open ESP",
                path: shown,
                reason: "not a directory",
            }),
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                Err(EspError::NotFound {
                    op: "open ESP",
                    path: shown,
                })
            }
            Err(source) => Err(EspError::Io {
                op: "open ESP",
                path: shown,
                source,
            }),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn full(&self, op: &'static str, path: &str, allow_root: bool) -> Result<PathBuf, EspError> {
        check_path(op, path, allow_root)?;
        Ok(if path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(path)
        })
    }

    fn io<'a>(op: &'static str, path: &'a str) -> impl FnOnce(std::io::Error) -> EspError + 'a {
        move |source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                EspError::NotFound {
                    op,
                    path: path.to_owned(),
                }
            } else {
                EspError::Io {
                    op,
                    path: path.to_owned(),
                    source,
                }
            }
        }
    }

    fn sync_dir(&self, op: &'static str, path: &str, dir: &Path) -> Result<(), EspError> {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(Self::io(op, path))
    }
}

impl Esp for DirEsp {
    fn list(&self, dir: &str) -> Result<Vec<DirEntry>, EspError> {
        let full = self.full("list", dir, true)?;
        let read = match std::fs::read_dir(&full) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::io("list", dir)(e)),
        };
        let mut out = Vec::new();
        for item in read {
            let item = item.map_err(Self::io("list", dir))?;
            let meta = item.metadata().map_err(Self::io("list", dir))?;
            let Ok(name) = item.file_name().into_string() else {
                continue;
            };
            out.push(DirEntry {
                name,
                size: if meta.is_dir() { 0 } else { meta.len() },
                is_dir: meta.is_dir(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, EspError> {
        let full = self.full("read", path, false)?;
        std::fs::read(full).map_err(Self::io("read", path))
    }

    fn exists(&self, path: &str) -> Result<bool, EspError> {
        let full = self.full("stat", path, false)?;
        match std::fs::metadata(full) {
            Ok(m) => Ok(m.is_file()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::io("stat", path)(e)),
        }
    }

    fn write_file(&self, path: &str, data: &[u8]) -> Result<(), EspError> {
        let full = self.full("write", path, false)?;
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(Self::io("create directory for", path))?;
        }
        let mut file = std::fs::File::create(&full).map_err(Self::io("write", path))?;
        file.write_all(data).map_err(Self::io("write", path))?;
        file.sync_all().map_err(Self::io("flush", path))
    }

    fn rename(&self, from: &str, to: &str) -> Result<(), EspError> {
        let source = self.full("rename", from, false)?;
        let target = self.full("rename", to, false)?;
        let shown = format!("{from} to {to}");
        std::fs::rename(&source, &target).map_err(Self::io("rename", &shown))?;
        // On FAT the renamed file's directory entry (start cluster, size) is written from its
        // inode, which the directory's flush does not write: until the file itself is flushed,
        // a power cut leaves an entry of size 0 (seen in QEMU with a real cut).
        std::fs::File::open(&target)
            .and_then(|f| f.sync_all())
            .map_err(Self::io("flush after rename", &shown))?;
        if let Some(parent) = target.parent() {
            self.sync_dir("flush directory after rename", &shown, parent)?;
        }
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<(), EspError> {
        let full = self.full("remove", path, false)?;
        match std::fs::remove_file(&full) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Self::io("remove", path)(e)),
        }
        if let Some(parent) = full.parent() {
            self.sync_dir("flush directory after removing", path, parent)?;
        }
        Ok(())
    }

    fn free_space(&self) -> Result<u64, EspError> {
        let shown = self.root.display().to_string();
        let stat = rustix::fs::statvfs(&self.root).map_err(|e| EspError::Io {
            op: "measure free space of",
            path: shown,
            source: e.into(),
        })?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_esp_basic_operations() {
        let dir = tempfile::tempdir().unwrap();
        let esp = DirEsp::new(dir.path()).unwrap();
        esp.write_atomic("loader/entries/os-1.conf", b"title a\n")
            .unwrap();
        assert_eq!(esp.read("loader/entries/os-1.conf").unwrap(), b"title a\n");
        let names: Vec<_> = esp
            .list("loader/entries")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["os-1.conf"], "no temporary file left behind");
        esp.rename("loader/entries/os-1.conf", "loader/entries/os-2.conf")
            .unwrap();
        assert!(!esp.exists("loader/entries/os-1.conf").unwrap());
        assert!(esp.exists("loader/entries/os-2.conf").unwrap());
        esp.remove("loader/entries/os-2.conf").unwrap();
        esp.remove("loader/entries/os-2.conf").unwrap();
        assert!(esp.list("nowhere").unwrap().is_empty());
        assert!(esp.free_space().unwrap() > 0);
        assert!(matches!(
            esp.read("missing"),
            Err(EspError::NotFound { .. })
        ));
    }

    #[test]
    fn paths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let esp = DirEsp::new(dir.path()).unwrap();
        for bad in ["/etc/passwd", "../x", "a//b", "a/./b", "a\\b", ""] {
            assert!(
                matches!(esp.write_file(bad, b"x"), Err(EspError::InvalidPath { .. })),
                "{bad}"
            );
        }
        let err = DirEsp::new(dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().starts_with("open ESP "), "{err}");
    }

    #[test]
    fn temp_names_are_hidden() {
        assert_eq!(
            temp_name("loader/entries/os.conf"),
            "loader/entries/.os.conf.tmp"
        );
        assert_eq!(temp_name("x"), ".x.tmp");
        assert!(is_temp_name(".os.conf.tmp"));
    }
}
