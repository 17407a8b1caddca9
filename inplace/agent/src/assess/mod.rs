//! Boot assessment: which entry booted, blessing it once the update is confirmed, marking a
//! failed version's entry bad.
//!
//! One trait, [`BootAssessor`], with the `esp` backend [`EspAssessor`]: an ESP (a mounted
//! directory on real nodes and in QEMU guests, `inplace_boot::MemEsp` on simulated machines)
//! plus a [`booted::BootedEntrySource`] (efivarfs / kernel command line, or the simulation's
//! record of its last boot). All boot-counting rules (names, renames, order) come from
//! `inplace-boot`; this module only decides *when* to apply them:
//!
//! - bless the booted entry after the agent confirmed that the running version is the attempted
//!   one (`NAME+L-D.conf` → `NAME.conf`), so the loader keeps booting it;
//! - after a rollback, mark the attempted version's entry bad if it still has tries left (it
//!   normally has none), so no later boot tries it again.
//!
//! A simulated machine that models boot counting some other way can implement the trait itself.

pub mod booted;

use std::sync::Arc;

use inplace_boot::{EntryName, Esp};

use booted::BootedEntrySource;

/// A failed assessment step.
#[derive(Debug, thiserror::Error)]
pub enum AssessError {
    /// Reading the loader's variables failed.
    #[error("failed to learn the booted entry")]
    Booted(#[source] booted::BootedError),
    /// The ESP operation failed.
    #[error("failed to update boot entries on the ESP")]
    Esp(#[source] inplace_boot::UpdateError),
    /// No entry on the ESP matches what the loader reported.
    #[error("the booted entry is unknown (the loader reported {hint:?})")]
    UnknownBooted {
        /// What the loader reported.
        hint: booted::LoaderHint,
    },
}

/// Boot assessment backend.
pub trait BootAssessor: Send + Sync + std::fmt::Debug {
    /// The booted entry's file name now, if known.
    fn booted(&self) -> Result<Option<String>, AssessError>;
    /// Blesses the booted entry; returns its new file name.
    fn bless_booted(&self) -> Result<String, AssessError>;
    /// Marks the entry of `version` bad if it is still on trial; returns its name if it exists.
    fn reject_version(&self, version: &str) -> Result<Option<String>, AssessError>;
}

/// The `esp` backend.
#[derive(Debug, Clone)]
pub struct EspAssessor {
    esp: Arc<dyn Esp>,
    booted: Arc<dyn BootedEntrySource>,
    entry_prefix: String,
}

impl EspAssessor {
    /// Entries on `esp` named `{entry_prefix}-{version}`; the booted one from `booted`.
    pub fn new(esp: Arc<dyn Esp>, booted: Arc<dyn BootedEntrySource>, entry_prefix: &str) -> Self {
        Self {
            esp,
            booted,
            entry_prefix: entry_prefix.to_owned(),
        }
    }

    fn booted_name(&self) -> Result<Option<EntryName>, AssessError> {
        let hint = self.booted.hint().map_err(AssessError::Booted)?;
        inplace_boot::booted_entry(
            self.esp.as_ref(),
            hint.boot_count_path.as_deref(),
            hint.entry_selected.as_deref(),
        )
        .map_err(AssessError::Esp)
    }
}

impl BootAssessor for EspAssessor {
    fn booted(&self) -> Result<Option<String>, AssessError> {
        Ok(self.booted_name()?.map(|n| n.file_name().to_owned()))
    }

    fn bless_booted(&self) -> Result<String, AssessError> {
        let Some(name) = self.booted_name()? else {
            let hint = self.booted.hint().map_err(AssessError::Booted)?;
            return Err(AssessError::UnknownBooted { hint });
        };
        let blessed = inplace_boot::bless(self.esp.as_ref(), &name).map_err(AssessError::Esp)?;
        Ok(blessed.file_name().to_owned())
    }

    fn reject_version(&self, version: &str) -> Result<Option<String>, AssessError> {
        let stem = format!("{}-{version}", self.entry_prefix);
        let entries =
            inplace_boot::entry_files(self.esp.as_ref()).map_err(|e| AssessError::Esp(e.into()))?;
        let Some((name, _)) = entries
            .into_iter()
            .find(|(n, _)| n.stem().eq_ignore_ascii_case(&stem))
        else {
            return Ok(None);
        };
        if !name.is_in_trial() {
            return Ok(Some(name.file_name().to_owned()));
        }
        let bad = inplace_boot::mark_bad(self.esp.as_ref(), &name).map_err(AssessError::Esp)?;
        Ok(Some(bad.file_name().to_owned()))
    }
}
