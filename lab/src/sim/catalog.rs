//! The OS images a simulated machine can boot: one per version, each with a behaviour. A slot's
//! kernel file on the ESP names its version (`rackproof-sim-kernel VERSION`), so what boots is
//! decided by the bytes on the ESP, as on a real machine: a torn kernel file panics.

use std::collections::BTreeMap;

use inplace_boot::{DEFAULT_TRIES, EntryConf, NewEntry};

const KERNEL_MAGIC: &str = "rackproof-sim-kernel ";

/// What an image does when booted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Boots, reports its version, starts the agent.
    Boots,
    /// The kernel panics; the machine reboots (and boot counting falls back).
    PanicsAtBoot,
    /// Hangs during boot: no reboot, no fallback, a total failure.
    HangsAtBoot,
    /// Boots and reports its version, but the agent never starts.
    AgentNeverReports,
    /// Boots, but reports (and runs as) this other version: a silent rollback.
    ReportsVersion(String),
}

/// One OS image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsImage {
    pub version: String,
    pub behaviour: Behaviour,
}

/// The images known to a simulated lab, by version.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    images: BTreeMap<String, OsImage>,
}

/// A slot artifact: what the OS-update command installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotArtifact {
    pub version: String,
    pub kernel: Vec<u8>,
    pub initrd: Vec<u8>,
}

impl SlotArtifact {
    /// The entry stem this artifact installs as: `rackproof-VERSION`.
    pub fn stem(&self) -> String {
        entry_stem(&self.version)
    }

    /// The entry contents for this artifact (title, version, options; paths are filled in by
    /// the install).
    pub fn entry_conf(&self) -> EntryConf {
        EntryConf {
            title: Some(format!("Rackproof OS {}", self.version)),
            version: Some(self.version.clone()),
            options: vec!["console=ttyS0".to_owned(), "panic=10".to_owned()],
            ..EntryConf::default()
        }
    }

    /// A [`NewEntry`] for `stem` (see [`SlotArtifact::stem`]) with the default three tries.
    pub fn new_entry<'a>(&'a self, stem: &'a str) -> NewEntry<'a> {
        NewEntry {
            stem,
            conf: self.entry_conf(),
            kernel: &self.kernel,
            initrd: Some(&self.initrd),
            tries: DEFAULT_TRIES,
        }
    }
}

/// The entry stem for a version.
pub fn entry_stem(version: &str) -> String {
    format!("rackproof-{version}")
}

impl Catalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) an image.
    pub fn with(mut self, version: &str, behaviour: Behaviour) -> Self {
        self.images.insert(
            version.to_owned(),
            OsImage {
                version: version.to_owned(),
                behaviour,
            },
        );
        self
    }

    pub fn image(&self, version: &str) -> Option<&OsImage> {
        self.images.get(version)
    }

    /// The slot artifact for a version in the catalog.
    pub fn artifact(&self, version: &str) -> Option<SlotArtifact> {
        self.images.get(version).map(|_| SlotArtifact {
            version: version.to_owned(),
            kernel: format!("{KERNEL_MAGIC}{version}\n").into_bytes(),
            initrd: format!("rackproof-sim-initrd {version}\n").into_bytes(),
        })
    }
}

/// The version a kernel file names, if it is an intact sim kernel.
pub(crate) fn kernel_version(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let version = text.strip_prefix(KERNEL_MAGIC)?.strip_suffix('\n')?;
    (!version.is_empty() && !version.contains(char::is_whitespace)).then(|| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_name_their_version_and_torn_ones_do_not() {
        let catalog = Catalog::new().with("1.0.0", Behaviour::Boots);
        let a = catalog.artifact("1.0.0").unwrap();
        assert_eq!(kernel_version(&a.kernel).as_deref(), Some("1.0.0"));
        assert_eq!(kernel_version(&a.kernel[..a.kernel.len() / 2]), None);
        assert!(catalog.artifact("9").is_none());
        assert_eq!(a.stem(), "rackproof-1.0.0");
    }
}
