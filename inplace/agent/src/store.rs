//! Persistent key/value storage that survives agent restarts and reboots.
//!
//! The agent keeps its progress (last-applied OSC, the computed changes and how far they got, the
//! OS-update attempt) under a few keys. Two implementations:
//!
//! - [`DirStore`]: one file per key in a directory on the node's persistent state partition.
//!   A write goes to `KEY.tmp`, is fsynced, renamed over `KEY` and the directory is fsynced, so a
//!   power cut leaves either the old or the new value, never a torn one.
//! - [`MemoryStore`]: a shared map; a simulated machine keeps one across agent restarts (clones
//!   share the data), the way a disk outlives the process.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Failure to read or write persistent state.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O error on a file of the state directory.
    #[error("failed to {action} state file {path}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A key that is not a plain file name.
    #[error("invalid state key {0:?}")]
    InvalidKey(String),
}

/// Durable storage of small values by key.
#[async_trait::async_trait]
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// The value under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Stores `value` under `key` atomically and durably.
    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;
    /// Removes `key` (absent is fine).
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
}

fn check_key(key: &str) -> Result<(), StoreError> {
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !key.starts_with('.')
        && !key.ends_with(".tmp");
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidKey(key.to_owned()))
    }
}

/// A directory of files written atomically (see the module docs).
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// Uses `dir`, creating it if needed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            action: "create",
            path: dir.clone(),
            source,
        })?;
        Ok(Self { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Writes `data` to `path` atomically: temporary file, fsync, rename, fsync of the renamed file
/// and of the directory. With `mode`, the temporary file gets that mode before any byte is
/// written, so a secret is never readable by others, not even while it is written or when a
/// crash leaves the temporary file behind. `None` leaves permissions to the filesystem: the
/// state partition is FAT, where the mount's `fmask`/`dmask` decide them (the images mount it
/// 0600/0700) and a chmod is refused.
pub fn write_atomic(path: &Path, data: &[u8], mode: Option<u32>) -> Result<(), StoreError> {
    fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.to_owned();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::File::create(&tmp).map_err(io("create", &tmp))?;
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io("chmod", &tmp))?;
    }
    file.write_all(data).map_err(io("write", &tmp))?;
    file.sync_all().map_err(io("fsync", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io("rename into place", path))?;
    // On FAT (the lab images' state partition) the renamed file's directory entry is written
    // from its inode, not by the directory's flush: without this, a power cut leaves the file
    // empty (found by a real power cut in QEMU).
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io("fsync after rename", path))?;
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("fsync directory of", path))?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl StateStore for DirStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        let path = self.dir.join(key);
        match std::fs::read(&path) {
            Ok(data) => Ok(Some(data)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Io {
                action: "read",
                path,
                source,
            }),
        }
    }

    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        write_atomic(&self.dir.join(key), value, None)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(key)?;
        let path = self.dir.join(key);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Io {
                action: "remove",
                path,
                source,
            }),
        }
    }
}

/// An in-memory store; clones share the same data.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    data: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything stored (for assertions).
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.data.lock().expect("memory store lock").clone()
    }
}

#[async_trait::async_trait]
impl StateStore for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        Ok(self
            .data
            .lock()
            .expect("memory store lock")
            .get(key)
            .cloned())
    }

    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        self.data
            .lock()
            .expect("memory store lock")
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(key)?;
        self.data.lock().expect("memory store lock").remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_readable_by_others_not_even_when_its_write_fails() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory where the file should go: the rename fails and the temporary
        // file stays behind, as after a crash between the write and the rename.
        let target = dir.path().join("token");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("occupied"), b"").unwrap();
        write_atomic(&target, b"secret", Some(0o600)).unwrap_err();
        let left = std::fs::metadata(dir.path().join("token.tmp")).unwrap();
        assert_eq!(
            left.permissions().mode() & 0o777,
            0o600,
            "the secret was written into a file others can read"
        );

        let file = dir.path().join("key");
        write_atomic(&file, b"secret", Some(0o600)).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    async fn exercise(store: &dyn StateStore) {
        assert_eq!(store.get("state.json").await.unwrap(), None);
        store.put("state.json", b"one").await.unwrap();
        store.put("state.json", b"two").await.unwrap();
        assert_eq!(
            store.get("state.json").await.unwrap(),
            Some(b"two".to_vec())
        );
        store.delete("state.json").await.unwrap();
        store.delete("state.json").await.unwrap();
        assert_eq!(store.get("state.json").await.unwrap(), None);
        assert!(matches!(
            store.put("../escape", b"x").await,
            Err(StoreError::InvalidKey(_))
        ));
        assert!(matches!(
            store.get("a.tmp").await,
            Err(StoreError::InvalidKey(_))
        ));
    }

    #[tokio::test]
    async fn the_directory_store_replaces_values_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::open(dir.path().join("state")).unwrap();
        exercise(&store).await;
        store.put("k", b"v").await.unwrap();
        let names: Vec<_> = std::fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("k")]);
        let again = DirStore::open(store.dir()).unwrap();
        assert_eq!(again.get("k").await.unwrap(), Some(b"v".to_vec()));
    }

    #[tokio::test]
    async fn the_memory_store_is_shared_between_clones() {
        let store = MemoryStore::new();
        exercise(&store).await;
        let clone = store.clone();
        clone.put("k", b"v").await.unwrap();
        assert_eq!(store.get("k").await.unwrap(), Some(b"v".to_vec()));
        assert_eq!(store.snapshot().len(), 1);
    }
}
