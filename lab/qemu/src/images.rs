//! The node OS images `ci/build-images` produces, located by running it (a warm build takes
//! seconds: everything is cached under `$RACKPROOF_CACHE/images/KEY`).
//!
//! Layout of an images directory (`images/README.md`):
//!
//! ```text
//! slots/VERSION/{vmlinuz,initrd.img,manifest.json}        good slot
//! slots/VERSION-panic/ -hang/ -silent/ -rollback/          broken variants of VERSION
//! disks/VERSION.raw                                        GPT disk, VERSION installed and blessed
//! disks/VERSION-corrupt.raw                                the same with the slot's initrd corrupted
//! keys/slot.key, keys/slot.pub                             the manifests' ed25519 key pair
//! keys/ssh_host_ed25519_key                                dropbear's host key, in every slot
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::slot::{Slot, SlotError};

/// The version `ci/build-images` installs on its disks by default.
pub const BASE_VERSION: &str = "1.0.0";
/// The version it builds as the update target by default.
pub const NEW_VERSION: &str = "1.1.0";

/// Building or finding images failed.
#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error("run {script}")]
    Spawn {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{script} failed ({status}); run it by hand to see why: {stderr}")]
    Failed {
        script: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("{script} printed no images= line")]
    NoOutput { script: PathBuf },
    #[error("image {path} is missing; run {script}")]
    Missing { path: PathBuf, script: PathBuf },
    #[error(transparent)]
    Slot(#[from] SlotError),
}

/// A built images directory.
#[derive(Debug, Clone)]
pub struct Images {
    dir: PathBuf,
    script: PathBuf,
}

impl Images {
    /// Runs `ci/build-images` of the workspace at `repo` and returns what it built (the default
    /// versions, [`BASE_VERSION`] and [`NEW_VERSION`]).
    pub fn build(repo: &Path) -> Result<Self, ImagesError> {
        Self::build_versions(repo, BASE_VERSION, NEW_VERSION)
    }

    /// Runs `ci/build-images BASE NEW`: disks with `base` installed, slots (and the broken
    /// variants) of `new`.
    pub fn build_versions(repo: &Path, base: &str, new: &str) -> Result<Self, ImagesError> {
        let script = repo.join("ci/build-images");
        let out = Command::new(&script)
            .args([base, new])
            .current_dir(repo)
            .output()
            .map_err(|source| ImagesError::Spawn {
                script: script.clone(),
                source,
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(ImagesError::Failed {
                script,
                status: out.status.to_string(),
                stderr: tail.join("\n"),
            });
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = stdout
            .lines()
            .find_map(|l| l.strip_prefix("images="))
            .ok_or_else(|| ImagesError::NoOutput {
                script: script.clone(),
            })?;
        Ok(Self {
            dir: PathBuf::from(dir),
            script,
        })
    }

    /// The images directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn existing(&self, path: PathBuf) -> Result<PathBuf, ImagesError> {
        if path.exists() {
            Ok(path)
        } else {
            Err(ImagesError::Missing {
                path,
                script: self.script.clone(),
            })
        }
    }

    /// A slot by directory name (`1.1.0`, `1.1.0-panic`, ...).
    pub fn slot(&self, name: &str) -> Result<Slot, ImagesError> {
        let dir = self.existing(crate::slot::slot_dir(&self.dir, name))?;
        Ok(Slot::open(dir)?)
    }

    /// A disk by name (`1.0.0`, `1.0.0-corrupt`).
    pub fn disk(&self, name: &str) -> Result<PathBuf, ImagesError> {
        self.existing(self.dir.join("disks").join(format!("{name}.raw")))
    }

    /// dropbear's host key file (dropbear format), the one every slot of this build presents;
    /// `rackproof_ssh::dropbear_host_key_pin` turns it into a pin.
    pub fn ssh_host_key(&self) -> Result<PathBuf, ImagesError> {
        self.existing(self.dir.join("keys/ssh_host_ed25519_key"))
    }

    /// The public key the manifests are signed with (PEM).
    pub fn public_key(&self) -> Result<PathBuf, ImagesError> {
        self.existing(self.dir.join("keys/slot.pub"))
    }
}
