//! Where the OSC's files (and synced tokens) are written: the node's root filesystem, or a map.
//!
//! Files are replaced atomically (temporary name, fsync, rename), like the state store. Paths
//! must be absolute and free of `..`, so an OSC cannot write relative to the agent's working
//! directory. The memory backend records what a simulated machine's disk would hold.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::store::{StoreError, write_atomic};

/// A failed file write.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path is not absolute or contains `..`.
    #[error("refusing to write {0}: the path must be absolute without '..'")]
    InvalidPath(String),
    /// Creating the parent directory failed.
    #[error("failed to create directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing failed.
    #[error("failed to write file {path}")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
}

/// A place to write node files.
#[async_trait::async_trait]
pub trait FileSink: Send + Sync + std::fmt::Debug {
    /// Replaces the file at absolute `path` with `data`.
    async fn write(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FileError>;
}

fn check(path: &str) -> Result<(), FileError> {
    let p = Path::new(path);
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(FileError::InvalidPath(path.to_owned()));
    }
    Ok(())
}

/// Writes under a root directory (`/` on a node; a temporary directory in tests).
#[derive(Debug, Clone)]
pub struct RootFiles {
    root: PathBuf,
}

impl RootFiles {
    /// Files land at `root` joined with their absolute path.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

#[async_trait::async_trait]
impl FileSink for RootFiles {
    async fn write(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FileError> {
        check(path)?;
        let target = self.root.join(path.trim_start_matches('/'));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|source| FileError::CreateDir {
                path: parent.to_owned(),
                source,
            })?;
        }
        write_atomic(&target, data, Some(mode)).map_err(|source| FileError::Write {
            path: path.to_owned(),
            source,
        })?;
        Ok(())
    }
}

/// Content and mode of a file in [`MemoryFiles`].
type StoredFile = (Vec<u8>, u32);

/// Keeps files in memory; clones share them.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles {
    files: Arc<Mutex<BTreeMap<String, StoredFile>>>,
    /// Every write fails while set (a disk that refuses writes).
    refusing: Arc<std::sync::atomic::AtomicBool>,
}

impl MemoryFiles {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// The content of `path`, if written.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.files
            .lock()
            .expect("files lock")
            .get(path)
            .map(|(data, _)| data.clone())
    }

    /// Makes every write fail (as a full or read-only disk does) until called with `false`.
    pub fn refuse_writes(&self, refusing: bool) {
        self.refusing
            .store(refusing, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every path written.
    pub fn paths(&self) -> Vec<String> {
        self.files
            .lock()
            .expect("files lock")
            .keys()
            .cloned()
            .collect()
    }
}

#[async_trait::async_trait]
impl FileSink for MemoryFiles {
    async fn write(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FileError> {
        check(path)?;
        if self.refusing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(FileError::Write {
                path: path.to_owned(),
                source: StoreError::Io {
                    action: "write",
                    path: path.into(),
                    source: std::io::Error::other("the disk refuses writes"),
                },
            });
        }
        self.files
            .lock()
            .expect("files lock")
            .insert(path.to_owned(), (data.to_vec(), mode));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn root_files_write_below_the_root_with_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let files = RootFiles::new(dir.path());
        files
            .write("/etc/kubernetes/kubelet.conf", b"x", 0o600)
            .await
            .unwrap();
        let target = dir.path().join("etc/kubernetes/kubelet.conf");
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(matches!(
            files.write("relative", b"x", 0o644).await,
            Err(FileError::InvalidPath(_))
        ));
        assert!(matches!(
            files.write("/etc/../../x", b"x", 0o644).await,
            Err(FileError::InvalidPath(_))
        ));
    }

    #[tokio::test]
    async fn memory_files_are_shared() {
        let files = MemoryFiles::new();
        files.clone().write("/a", b"1", 0o644).await.unwrap();
        assert_eq!(files.get("/a"), Some(b"1".to_vec()));
        assert_eq!(files.paths(), vec!["/a".to_owned()]);
    }
}
