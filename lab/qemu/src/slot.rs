//! Slot artifacts built by `images/build-slot` (kernel, initrd, signed `manifest.json`) and
//! installing one as a boot entry on any ESP, the way `rackproof-agent os-update` does: stem
//! `rackproof-VERSION`, title `Rackproof VERSION`, `version` and `sort-key rackproof` lines, the
//! manifest's options plus `rackproof.entry=STEM`, written with `inplace_boot::install_entry`.

use std::path::{Path, PathBuf};

use inplace_boot::{EntryConf, EntryName, Esp, NewEntry};

/// The entry-name prefix the agent uses by default (`--entry-prefix`).
pub const ENTRY_PREFIX: &str = "rackproof";

/// What failed while reading or installing a slot.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error("read slot file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parse slot manifest {path}: {problem}")]
    Manifest { path: PathBuf, problem: String },
    #[error("install slot {version} on the ESP")]
    Install {
        version: String,
        #[source]
        source: inplace_boot::UpdateError,
    },
}

/// A slot directory: `vmlinuz`, `initrd.img`, `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub dir: PathBuf,
    /// The manifest's version (the entry's version; what os-release says unless it is a rollback variant).
    pub version: String,
    pub linux: String,
    pub initrd: Option<String>,
    pub options: String,
}

impl Slot {
    /// Reads `dir/manifest.json` (only the fields needed to install; the agent verifies signatures).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, SlotError> {
        let dir = dir.into();
        let path = dir.join("manifest.json");
        let bytes = std::fs::read(&path).map_err(|source| SlotError::Read {
            path: path.clone(),
            source,
        })?;
        let bad = |problem: &str| SlotError::Manifest {
            path: path.clone(),
            problem: problem.to_owned(),
        };
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
        let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        let version = text(&json["version"]).ok_or_else(|| bad("no version"))?;
        let linux = text(&json["boot"]["linux"]).ok_or_else(|| bad("no boot.linux"))?;
        let initrd = text(&json["boot"]["initrd"]);
        let options = text(&json["boot"]["options"]).unwrap_or_default();
        Ok(Self {
            dir,
            version,
            linux,
            initrd,
            options,
        })
    }

    /// The entry stem the agent would install this slot under.
    pub fn stem(&self) -> String {
        format!("{ENTRY_PREFIX}-{}", self.version)
    }

    fn read(&self, name: &str) -> Result<Vec<u8>, SlotError> {
        let path = self.dir.join(name);
        std::fs::read(&path).map_err(|source| SlotError::Read { path, source })
    }

    /// The entry contents the agent writes for this slot (without `linux`/`initrd`, which
    /// `install_entry` fills in).
    pub fn entry_conf(&self) -> EntryConf {
        let mut options = self.options.trim().to_owned();
        if !options.is_empty() {
            options.push(' ');
        }
        options.push_str(&format!("rackproof.entry={}", self.stem()));
        EntryConf {
            title: Some(format!("Rackproof {}", self.version)),
            version: Some(self.version.clone()),
            sort_key: Some(ENTRY_PREFIX.to_owned()),
            options: vec![options],
            ..EntryConf::default()
        }
    }

    /// Installs the slot on `esp` as `STEM+TRIES.conf` (or blessed, `STEM.conf`, with
    /// `tries == None`). With `corrupt`, the initrd written is garbage of the same size, so the
    /// entry always fails at boot.
    pub fn install(
        &self,
        esp: &dyn Esp,
        tries: Option<u32>,
        corrupt: bool,
    ) -> Result<EntryName, SlotError> {
        let kernel = self.read(&self.linux)?;
        let mut initrd = match &self.initrd {
            Some(name) => Some(self.read(name)?),
            None => None,
        };
        if corrupt && let Some(bytes) = initrd.as_mut() {
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i % 251) as u8 ^ 0x5a;
            }
        }
        let stem = self.stem();
        let install = |e| SlotError::Install {
            version: self.version.clone(),
            source: e,
        };
        let new = NewEntry {
            stem: &stem,
            conf: self.entry_conf(),
            kernel: &kernel,
            initrd: initrd.as_deref(),
            tries: tries.unwrap_or(inplace_boot::DEFAULT_TRIES),
        };
        let name = inplace_boot::install_entry(esp, &new, None).map_err(install)?;
        match tries {
            Some(_) => Ok(name),
            None => inplace_boot::bless(esp, &name).map_err(install),
        }
    }
}

/// The slot directory of `version` (and variant) under an images directory.
pub fn slot_dir(images: &Path, name: &str) -> PathBuf {
    images.join("slots").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(dir: &Path) -> Slot {
        std::fs::write(dir.join("vmlinuz"), b"kernel").unwrap();
        std::fs::write(dir.join("initrd.img"), b"initrd").unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"format":"rackproof-slot/v1","version":"1.2.0","files":[],"boot":{"linux":"vmlinuz","initrd":"initrd.img","options":"console=ttyS0"},"signature":""}"#,
        )
        .unwrap();
        Slot::open(dir).unwrap()
    }

    #[test]
    fn installs_like_the_agent_and_blesses_when_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let slot = slot(tmp.path());
        let esp = inplace_boot::MemEsp::new(1 << 20);
        let name = slot.install(&esp, Some(3), false).unwrap();
        assert_eq!(name.file_name(), "rackproof-1.2.0+3.conf");
        let conf =
            String::from_utf8(esp.read("loader/entries/rackproof-1.2.0+3.conf").unwrap()).unwrap();
        assert_eq!(
            conf,
            "title Rackproof 1.2.0\nversion 1.2.0\nsort-key rackproof\nlinux /rackproof/rackproof-1.2.0.linux\n\
             initrd /rackproof/rackproof-1.2.0.initrd\noptions console=ttyS0 rackproof.entry=rackproof-1.2.0\n"
        );
        let blessed = slot.install(&esp, None, true).unwrap();
        assert_eq!(blessed.file_name(), "rackproof-1.2.0.conf");
        assert_ne!(
            esp.read("rackproof/rackproof-1.2.0.initrd").unwrap(),
            b"initrd"
        );
    }

    #[test]
    fn a_missing_manifest_names_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Slot::open(tmp.path()).unwrap_err().to_string();
        assert!(
            err.starts_with("read slot file ") && err.ends_with("manifest.json"),
            "{err}"
        );
    }
}
