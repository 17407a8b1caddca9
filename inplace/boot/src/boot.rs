//! What systemd-boot 252 does on the ESP at every boot: read `loader.conf` and the Type #1
//! entries, pick the default, and, for an entry with a boot counter, rename its file to the next
//! counter value *before* starting it (`+3` → `+2-1`, ... `+0-3` → `+0-4`: an entry with no tries
//! left is still started when selected). The renamed path goes to `LoaderBootCountPath`, the
//! entry id (the name *before* renaming, lowercased) to `LoaderEntrySelected`.

use crate::entry::{EntryConf, esp_relative};
use crate::esp::{Esp, EspError};
use crate::loader_conf::{LOADER_CONF_PATH, LoaderConf, LoaderConfError};
use crate::menu::{DefaultReason, LoaderVars, Menu, MenuEntry};
use crate::name::EntryName;

/// Where Type #1 entries live on the ESP.
pub const ENTRIES_DIR: &str = "loader/entries";

/// `loader/entries/NAME`.
pub fn entry_path(name: &EntryName) -> String {
    format!("{ENTRIES_DIR}/{}", name.file_name())
}

/// Every entry file on the ESP whose name parses (whether or not the loader would list it).
pub fn entry_files(esp: &dyn Esp) -> Result<Vec<(EntryName, EntryConf)>, EspError> {
    let mut out = Vec::new();
    for item in esp.list(ENTRIES_DIR)? {
        if item.is_dir {
            continue;
        }
        let Ok(name) = EntryName::parse(&item.name) else {
            continue;
        };
        let bytes = esp.read(&entry_path(&name))?;
        out.push((name, EntryConf::parse(&String::from_utf8_lossy(&bytes))));
    }
    Ok(out)
}

/// The menu the loader would show: `loader.conf` read leniently, and every entry whose name
/// parses, which names a kernel (or EFI program) for this architecture, and whose file exists.
pub fn load_menu(esp: &dyn Esp) -> Result<(Menu, Vec<LoaderConfError>), EspError> {
    let (conf, warnings) = if esp.exists(LOADER_CONF_PATH)? {
        LoaderConf::parse_lenient_bytes(&esp.read(LOADER_CONF_PATH)?)
    } else {
        (LoaderConf::default(), Vec::new())
    };
    let mut entries = Vec::new();
    for (name, conf) in entry_files(esp)? {
        if !conf.is_loadable() {
            continue;
        }
        let Some(loader) = conf.loader_path() else {
            continue;
        };
        if loader.is_empty() || !esp.exists(&loader).unwrap_or(false) {
            continue;
        }
        entries.push(MenuEntry { name, conf });
    }
    Ok((Menu::new(conf, entries), warnings))
}

/// What happened to the counter of the booted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bump {
    /// No counter: nothing renamed.
    NoCounter,
    /// Renamed to the next counter value.
    Renamed { to: EntryName },
    /// The rename failed; the loader ignores that and boots anyway.
    Failed { reason: String },
}

/// One boot decision and its effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootRecord {
    /// The entry as it was selected (before its counter was bumped).
    pub entry: MenuEntry,
    pub reason: DefaultReason,
    pub bump: Bump,
    /// `LoaderEntrySelected`: the selected entry's id (lowercased file name before the rename).
    pub loader_entry_selected: String,
    /// `LoaderBootCountPath`: `\loader\entries\NAME` after the rename, if one happened.
    pub loader_boot_count_path: Option<String>,
}

impl BootRecord {
    /// The entry's file name on the ESP after this boot's rename.
    pub fn current_name(&self) -> &EntryName {
        match &self.bump {
            Bump::Renamed { to } => to,
            _ => &self.entry.name,
        }
    }
}

/// Performs the loader's part of one boot: select, bump the counter, update the variables.
/// `Ok(None)` when there is no entry to boot (the real loader shows an empty menu).
/// A power loss during the rename is returned as an error: the machine is off, nothing booted.
pub fn boot(esp: &dyn Esp, vars: &mut LoaderVars) -> Result<Option<BootRecord>, EspError> {
    let (menu, _warnings) = load_menu(esp)?;
    let Some((entry, reason)) = menu.default_entry(vars) else {
        vars.entry_oneshot = None;
        return Ok(None);
    };
    let entry = entry.clone();
    let id = entry.id();

    let bump = match entry.name.after_boot_attempt() {
        None => Bump::NoCounter,
        Some(next) => match esp.rename(&entry_path(&entry.name), &entry_path(&next)) {
            Ok(()) => Bump::Renamed { to: next },
            Err(e) if e.is_power_lost() => return Err(e),
            Err(e) => Bump::Failed {
                reason: e.to_string(),
            },
        },
    };
    let loader_boot_count_path = match &bump {
        Bump::Renamed { to } => Some(format!("\\loader\\entries\\{}", to.file_name())),
        _ => None,
    };

    // LoaderEntryOneShot is consumed by reading it; LoaderEntryLastBooted follows @saved.
    let oneshot = vars.entry_oneshot.take().map(|s| s.to_ascii_lowercase());
    let efivar_default = vars.entry_default.as_deref().map(str::to_ascii_lowercase);
    let uses_saved = efivar_default.as_deref() == Some("@saved")
        || (efivar_default.is_none() && menu.conf().uses_saved());
    if oneshot.as_deref() != Some(id.as_str()) {
        vars.entry_last_booted = if uses_saved { Some(id.clone()) } else { None };
    }

    Ok(Some(BootRecord {
        entry,
        reason,
        bump,
        loader_entry_selected: id,
        loader_boot_count_path,
    }))
}

/// The ESP path named by a `LoaderBootCountPath` value (`\loader\entries\x.conf` → `loader/entries/x.conf`).
pub fn boot_count_path_to_esp(value: &str) -> String {
    esp_relative(value)
}
