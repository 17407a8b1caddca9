//! Which boot entry the machine booted: systemd-boot's EFI variables, the kernel command line, or
//! what the simulation says.
//!
//! systemd-boot 252 exports, under its vendor GUID `4a67b082-0a4c-41cf-b6c7-440b29bb8c4f`,
//! `LoaderBootCountPath` (the counted entry file it booted, after bumping its counter) and
//! `LoaderEntrySelected` (the entry id). A source yields these raw [`LoaderHint`]s; resolving them
//! against the entries on the ESP is `inplace_boot::booted_entry`'s job (same name, else same stem).
//!
//! The kernel command line backend reads `rackproof.entry=STEM`, which the OS-update command
//! writes into the options of every entry it installs, for machines without efivarfs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The vendor GUID of systemd-boot's loader variables.
pub const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
/// The kernel command-line parameter naming the booted entry's stem.
pub const CMDLINE_PARAMETER: &str = "rackproof.entry";

/// What the firmware (or kernel command line) says about the booted entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoaderHint {
    /// `LoaderBootCountPath`, e.g. `\loader\entries\os-2+2-1.conf`.
    pub boot_count_path: Option<String>,
    /// `LoaderEntrySelected`, e.g. `os-2+3.conf` (or `STEM.conf` from the command line).
    pub entry_selected: Option<String>,
}

impl LoaderHint {
    /// Whether the hint says nothing.
    pub fn is_empty(&self) -> bool {
        self.boot_count_path.is_none() && self.entry_selected.is_none()
    }
}

/// A failure reading the booted entry.
#[derive(Debug, thiserror::Error)]
pub enum BootedError {
    /// A variable or file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The variable's content is malformed.
    #[error("failed to decode {path}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: inplace_boot::UpdateError,
    },
}

/// A source of [`LoaderHint`]s.
pub trait BootedEntrySource: Send + Sync + std::fmt::Debug {
    /// What this boot's loader reported.
    fn hint(&self) -> Result<LoaderHint, BootedError>;
}

/// Reads systemd-boot's variables from efivarfs (default `/sys/firmware/efi/efivars`).
#[derive(Debug, Clone)]
pub struct Efivars {
    dir: PathBuf,
}

impl Efivars {
    /// Variables under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `/sys/firmware/efi/efivars`.
    pub fn system() -> Self {
        Self::new("/sys/firmware/efi/efivars")
    }

    fn read(&self, name: &str) -> Result<Option<String>, BootedError> {
        let path = self.dir.join(format!("{name}-{LOADER_GUID}"));
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(BootedError::Read { path, source }),
        };
        let value = inplace_boot::update::decode_efivarfs_string(name, &bytes)
            .map_err(|source| BootedError::Malformed { path, source })?;
        Ok(Some(value).filter(|v| !v.is_empty()))
    }
}

impl BootedEntrySource for Efivars {
    fn hint(&self) -> Result<LoaderHint, BootedError> {
        Ok(LoaderHint {
            boot_count_path: self.read("LoaderBootCountPath")?,
            entry_selected: self.read("LoaderEntrySelected")?,
        })
    }
}

/// Reads `rackproof.entry=` from a kernel command line file (default `/proc/cmdline`).
#[derive(Debug, Clone)]
pub struct KernelCmdline {
    path: PathBuf,
}

impl KernelCmdline {
    /// The command line in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `/proc/cmdline`.
    pub fn system() -> Self {
        Self::new("/proc/cmdline")
    }
}

impl BootedEntrySource for KernelCmdline {
    fn hint(&self) -> Result<LoaderHint, BootedError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| BootedError::Read {
            path: self.path.clone(),
            source,
        })?;
        let prefix = format!("{CMDLINE_PARAMETER}=");
        let stem = text
            .split_ascii_whitespace()
            .filter_map(|w| w.strip_prefix(&prefix))
            .next_back()
            .filter(|s| !s.is_empty());
        Ok(LoaderHint {
            boot_count_path: None,
            entry_selected: stem.map(|s| format!("{s}.conf")),
        })
    }
}

/// efivarfs when it says something, else the kernel command line (the real nodes' default).
#[derive(Debug, Clone)]
pub struct FirstOf {
    efivars: Efivars,
    cmdline: KernelCmdline,
}

impl FirstOf {
    /// Given sources.
    pub fn new(efivars: Efivars, cmdline: KernelCmdline) -> Self {
        Self { efivars, cmdline }
    }

    /// `/sys/firmware/efi/efivars`, then `/proc/cmdline`.
    pub fn system() -> Self {
        Self::new(Efivars::system(), KernelCmdline::system())
    }
}

impl BootedEntrySource for FirstOf {
    fn hint(&self) -> Result<LoaderHint, BootedError> {
        match self.efivars.hint() {
            Ok(hint) if !hint.is_empty() => Ok(hint),
            _ => self.cmdline.hint(),
        }
    }
}

/// A hint set by the simulation after each simulated boot (clones share it).
#[derive(Debug, Clone, Default)]
pub struct FixedBooted {
    hint: Arc<Mutex<LoaderHint>>,
}

impl FixedBooted {
    /// Starts with `hint`.
    pub fn new(hint: LoaderHint) -> Self {
        Self {
            hint: Arc::new(Mutex::new(hint)),
        }
    }

    /// The machine booted with these loader variables.
    pub fn set(&self, hint: LoaderHint) {
        *self.hint.lock().expect("booted lock") = hint;
    }
}

impl BootedEntrySource for FixedBooted {
    fn hint(&self) -> Result<LoaderHint, BootedError> {
        Ok(self.hint.lock().expect("booted lock").clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inplace_boot::update::encode_efivarfs_string;

    #[test]
    fn efivars_are_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let vars = Efivars::new(dir.path());
        assert!(vars.hint().unwrap().is_empty());
        std::fs::write(
            dir.path()
                .join(format!("LoaderEntrySelected-{LOADER_GUID}")),
            encode_efivarfs_string("os-2+3.conf"),
        )
        .unwrap();
        std::fs::write(
            dir.path()
                .join(format!("LoaderBootCountPath-{LOADER_GUID}")),
            encode_efivarfs_string("\\loader\\entries\\os-2+2-1.conf"),
        )
        .unwrap();
        let hint = vars.hint().unwrap();
        assert_eq!(hint.entry_selected.as_deref(), Some("os-2+3.conf"));
        assert_eq!(
            hint.boot_count_path.as_deref(),
            Some("\\loader\\entries\\os-2+2-1.conf")
        );
        std::fs::write(
            dir.path()
                .join(format!("LoaderBootCountPath-{LOADER_GUID}")),
            [7, 0, 0, 0, 0x41],
        )
        .unwrap();
        assert!(matches!(vars.hint(), Err(BootedError::Malformed { .. })));
    }

    #[test]
    fn the_command_line_names_the_stem_and_is_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cmdline");
        std::fs::write(
            &path,
            "console=ttyS0 rackproof.entry=rackproof-1.2.0 quiet\n",
        )
        .unwrap();
        let both = FirstOf::new(
            Efivars::new(dir.path().join("none")),
            KernelCmdline::new(&path),
        );
        assert_eq!(
            both.hint().unwrap().entry_selected.as_deref(),
            Some("rackproof-1.2.0.conf")
        );
        std::fs::write(&path, "console=ttyS0\n").unwrap();
        assert!(KernelCmdline::new(&path).hint().unwrap().is_empty());
    }
}
