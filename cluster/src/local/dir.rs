//! The control plane's private directory (mode 0700, named after its owner for the next run's
//! sweep) and writing files into it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Error;

pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

pub(super) fn create_dir(path: &Path) -> Result<(), Error> {
    std::fs::create_dir(path).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

/// The control plane's directory: removed on drop unless kept (after a failed startup), and
/// swept by the next run when this process is killed outright.
#[derive(Debug)]
pub(super) struct PrivateDir {
    path: PathBuf,
    keep: bool,
}

impl PrivateDir {
    pub(super) fn create() -> Result<Self, Error> {
        let path =
            std::env::temp_dir().join(format!("rackproof-local-{}", uuid::Uuid::new_v4().simple()));
        create_dir(&path)?;
        let dir = Self { path, keep: false };
        std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| Error::Write {
                path: dir.path.clone(),
                source,
            },
        )?;
        // Names this process, so a run killed outright leaves no certificates or tokens behind
        // for long: the next run's sweep (`rackproof_reap::sweep_dirs`) removes the directory.
        rackproof_reap::own_dir(&dir.path).map_err(|source| Error::Write {
            path: dir.path.join(rackproof_reap::OWNER_FILE),
            source,
        })?;
        Ok(dir)
    }

    /// Keeps the directory when this is dropped (a failed startup's logs are in it).
    pub(super) fn keep(&mut self) {
        self.keep = true;
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn remove(mut self) -> Result<(), Error> {
        self.keep = true;
        std::fs::remove_dir_all(&self.path).map_err(|source| Error::Write {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ignored = std::fs::remove_dir_all(&self.path);
        }
    }
}
