//! The OS images a simulated machine can boot: builds of a version, each with a behaviour. A
//! slot's kernel file on the ESP names its version and how that build boots
//! (`rackproof-sim-kernel VERSION BEHAVIOUR`), so what boots is decided by the bytes on the ESP,
//! as on a real machine: a fixed build installed over a broken one boots, and a torn kernel file
//! panics. The catalog holds the build of each version a lab starts with.

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
    /// The build of `version` that boots like `behaviour` (its kernel file says both).
    pub fn build(version: &str, behaviour: &Behaviour) -> Self {
        let token = behaviour_token(behaviour);
        Self {
            version: version.to_owned(),
            kernel: format!("{KERNEL_MAGIC}{version} {token}\n").into_bytes(),
            initrd: format!("rackproof-sim-initrd {version} {token}\n").into_bytes(),
        }
    }

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

    /// The slot artifact of a version's build in the catalog.
    pub fn artifact(&self, version: &str) -> Option<SlotArtifact> {
        self.images
            .get(version)
            .map(|image| SlotArtifact::build(version, &image.behaviour))
    }
}

/// A behaviour as a kernel file spells it (one word; the version it reports after `reports:`).
fn behaviour_token(behaviour: &Behaviour) -> String {
    match behaviour {
        Behaviour::Boots => "boots".to_owned(),
        Behaviour::PanicsAtBoot => "panics".to_owned(),
        Behaviour::HangsAtBoot => "hangs".to_owned(),
        Behaviour::AgentNeverReports => "never-reports".to_owned(),
        Behaviour::ReportsVersion(version) => format!("reports:{version}"),
    }
}

/// The version and behaviour a kernel file names, if it is an intact sim kernel.
pub(crate) fn kernel_build(bytes: &[u8]) -> Option<(String, Behaviour)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let line = text.strip_prefix(KERNEL_MAGIC)?.strip_suffix('\n')?;
    let (version, token) = line.split_once(' ')?;
    let behaviour = match token {
        "boots" => Behaviour::Boots,
        "panics" => Behaviour::PanicsAtBoot,
        "hangs" => Behaviour::HangsAtBoot,
        "never-reports" => Behaviour::AgentNeverReports,
        other => Behaviour::ReportsVersion(other.strip_prefix("reports:")?.to_owned()),
    };
    let plain = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    let reported_plain = match &behaviour {
        Behaviour::ReportsVersion(v) => plain(v),
        _ => true,
    };
    (plain(version) && reported_plain).then(|| (version.to_owned(), behaviour))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_name_their_version_and_build_and_torn_ones_do_not() {
        let catalog = Catalog::new().with("1.0.0", Behaviour::Boots);
        let a = catalog.artifact("1.0.0").unwrap();
        assert_eq!(
            kernel_build(&a.kernel),
            Some(("1.0.0".to_owned(), Behaviour::Boots))
        );
        for torn in 1..a.kernel.len() {
            assert_eq!(kernel_build(&a.kernel[..torn]), None, "{torn} bytes");
        }
        assert!(catalog.artifact("9").is_none());
        assert_eq!(a.stem(), "rackproof-1.0.0");
    }

    #[test]
    fn every_behaviour_survives_the_kernel_file() {
        for behaviour in [
            Behaviour::Boots,
            Behaviour::PanicsAtBoot,
            Behaviour::HangsAtBoot,
            Behaviour::AgentNeverReports,
            Behaviour::ReportsVersion("1.0.0".into()),
        ] {
            let build = SlotArtifact::build("1.1.0", &behaviour);
            assert_eq!(
                kernel_build(&build.kernel),
                Some(("1.1.0".to_owned(), behaviour))
            );
        }
        assert_ne!(
            SlotArtifact::build("1.1.0", &Behaviour::Boots).kernel,
            SlotArtifact::build("1.1.0", &Behaviour::PanicsAtBoot).kernel,
            "two builds that boot differently differ in their bytes"
        );
    }
}
