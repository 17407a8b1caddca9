//! The host programs and firmware a QEMU node needs, found or reported with the command that
//! installs them (Debian bookworm packages).

use std::path::{Path, PathBuf};

/// Installs everything a QEMU node needs. Bookworm's `qemu-system-x86` removes a newer
/// `qemu-utils`, hence the second command.
pub const INSTALL: &str =
    "apt-get install -y qemu-system-x86 ovmf mtools && apt-get install -y qemu-utils";

/// OVMF code (read-only) for the 4M flash layout; the 2M code with the 4M vars hangs.
pub const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
/// OVMF variable store template, copied per node.
pub const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/// A missing prerequisite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} not found at {path}; install it: {INSTALL}")]
pub struct MissingPrerequisite {
    pub what: &'static str,
    pub path: String,
}

/// Paths of the host pieces of a QEMU node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prerequisites {
    pub qemu: PathBuf,
    pub ovmf_code: PathBuf,
    pub ovmf_vars: PathBuf,
}

impl Prerequisites {
    /// Finds `qemu-system-x86_64` on `PATH`, the OVMF files and mtools.
    pub fn find() -> Result<Self, MissingPrerequisite> {
        let qemu = on_path("qemu-system-x86_64").ok_or(MissingPrerequisite {
            what: "qemu-system-x86_64",
            path: "PATH".into(),
        })?;
        on_path("mcopy").ok_or(MissingPrerequisite {
            what: "mtools (mcopy)",
            path: "PATH".into(),
        })?;
        for (what, path) in [("OVMF code", OVMF_CODE), ("OVMF vars", OVMF_VARS)] {
            if !Path::new(path).is_file() {
                return Err(MissingPrerequisite {
                    what,
                    path: path.into(),
                });
            }
        }
        Ok(Self {
            qemu,
            ovmf_code: OVMF_CODE.into(),
            ovmf_vars: OVMF_VARS.into(),
        })
    }
}

/// The first `name` in `PATH`.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_pieces_name_the_install_command() {
        let err = MissingPrerequisite {
            what: "OVMF code",
            path: OVMF_CODE.into(),
        }
        .to_string();
        assert!(
            err.contains("apt-get install -y qemu-system-x86 ovmf"),
            "{err}"
        );
        assert!(on_path("definitely-not-a-program-rackproof").is_none());
        assert!(on_path("sh").is_some());
    }
}
