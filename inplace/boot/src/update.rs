//! What the node agent does to the ESP: install a new entry atomically with a `+N` counter, make
//! room by removing entries that are neither booted nor the last good one, bless or mark the
//! booted entry, and find out which entry was booted.
//!
//! Guarantees (each step is a durable write, rename or removal):
//! 1. `install_entry` writes the kernel and initrd first (temporary name, flush, rename), the entry
//!    file last; a power cut at any point leaves the previous entries untouched and bootable, plus
//!    at most some unreferenced files that `collect_garbage` removes. Re-running it converges.
//! 2. `make_room` never removes the booted entry nor the first good (blessed) entry in boot order.
//! 3. `bless` and `mark_bad` are single renames, and succeed when already done.

use crate::boot::{ENTRIES_DIR, entry_files, entry_path};
use crate::entry::EntryConf;
use crate::esp::{Esp, EspError, is_temp_name};
use crate::loader_conf::{LOADER_CONF_PATH, LoaderConf};
use crate::menu::{Menu, MenuEntry};
use crate::name::{EntryName, NameError};

/// Where installed kernels and initrds live on the ESP.
pub const PAYLOAD_DIR: &str = "rackproof";

/// Tries a new entry gets.
pub const DEFAULT_TRIES: u32 = 3;

/// A failed ESP update.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("update the ESP")]
    Esp(#[source] EspError),
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("install entry {stem}: it is the booted entry")]
    ReplacesBooted { stem: String },
    #[error(
        "make room for {needed} bytes on the ESP: only {free} bytes free with every removable entry gone"
    )]
    NoSpace { needed: u64, free: u64 },
    #[error("mark entry {name} bad: it has no boot counter")]
    NoCounter { name: String },
    #[error("change entry {name}: no such entry on the ESP")]
    NoSuchEntry { name: String },
    #[error("decode EFI variable {name}: {reason}")]
    EfiVar { name: String, reason: &'static str },
}

impl From<EspError> for UpdateError {
    fn from(e: EspError) -> Self {
        Self::Esp(e)
    }
}

impl UpdateError {
    /// Whether the ESP lost power underneath this update.
    pub fn is_power_lost(&self) -> bool {
        matches!(self, Self::Esp(e) if e.is_power_lost())
    }
}

/// A new OS version to install as a boot entry.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    /// The entry's stem (`rackproof-1.2.0`); also names its kernel and initrd files.
    pub stem: &'a str,
    /// Title, version, sort-key, machine-id, options; `linux` and `initrd` are filled in.
    pub conf: EntryConf,
    pub kernel: &'a [u8],
    pub initrd: Option<&'a [u8]>,
    /// Boot attempts before the loader falls back ([`DEFAULT_TRIES`]).
    pub tries: u32,
}

/// `(kernel, initrd)` ESP paths for a stem.
pub fn payload_paths(stem: &str) -> (String, String) {
    (
        format!("{PAYLOAD_DIR}/{stem}.linux"),
        format!("{PAYLOAD_DIR}/{stem}.initrd"),
    )
}

/// Bytes `install_entry` would write for `new`.
pub fn install_size(new: &NewEntry<'_>) -> u64 {
    let conf = entry_conf_for(new).format().len() as u64;
    new.kernel.len() as u64 + new.initrd.map_or(0, |i| i.len() as u64) + conf
}

fn entry_conf_for(new: &NewEntry<'_>) -> EntryConf {
    let (kernel, initrd) = payload_paths(new.stem);
    let mut conf = new.conf.clone();
    conf.linux = Some(format!("/{kernel}"));
    conf.efi = None;
    conf.initrd = new
        .initrd
        .map(|_| format!("/{initrd}"))
        .into_iter()
        .collect();
    conf
}

/// Installs `new` as `loader/entries/STEM+TRIES.conf`, replacing any other entry with the same
/// stem (but never the booted one). Returns the new entry's name.
pub fn install_entry(
    esp: &dyn Esp,
    new: &NewEntry<'_>,
    booted: Option<&EntryName>,
) -> Result<EntryName, UpdateError> {
    let name = EntryName::with_tries(new.stem, new.tries)?;
    if booted.is_some_and(|b| b.stem().eq_ignore_ascii_case(new.stem)) {
        return Err(UpdateError::ReplacesBooted {
            stem: new.stem.to_owned(),
        });
    }
    let conf = entry_conf_for(new);
    let conf_text = conf.format();
    let (kernel_path, initrd_path) = payload_paths(new.stem);

    let mut writes: Vec<(String, &[u8])> = vec![(kernel_path, new.kernel)];
    if let Some(initrd) = new.initrd {
        writes.push((initrd_path, initrd));
    }
    writes.retain(|(path, data)| !matches!(esp.read(path), Ok(existing) if existing == *data));
    let needed: u64 =
        writes.iter().map(|(_, d)| d.len() as u64).sum::<u64>() + conf_text.len() as u64;
    let free = esp.free_space()?;
    if needed > free {
        return Err(UpdateError::NoSpace { needed, free });
    }

    for (path, data) in &writes {
        esp.write_atomic(path, data)?;
    }
    esp.write_atomic(&entry_path(&name), conf_text.as_bytes())?;
    for (other, _) in entry_files(esp)? {
        if other.stem().eq_ignore_ascii_case(new.stem) && other.file_name() != name.file_name() {
            esp.remove(&entry_path(&other))?;
        }
    }
    Ok(name)
}

/// Finds the entry file for `name` now: the same name, or else the same stem (a boot renamed it).
fn current(esp: &dyn Esp, name: &EntryName) -> Result<Option<EntryName>, EspError> {
    let files: Vec<EntryName> = entry_files(esp)?.into_iter().map(|(n, _)| n).collect();
    if let Some(n) = files
        .iter()
        .find(|n| n.file_name().eq_ignore_ascii_case(name.file_name()))
    {
        return Ok(Some(n.clone()));
    }
    Ok(files
        .into_iter()
        .find(|n| n.stem().eq_ignore_ascii_case(name.stem())))
}

/// Blesses an entry: `NAME+L-D.conf` → `NAME.conf`. Succeeds if it is blessed already.
pub fn bless(esp: &dyn Esp, name: &EntryName) -> Result<EntryName, UpdateError> {
    let Some(now) = current(esp, name)? else {
        return Err(UpdateError::NoSuchEntry {
            name: name.file_name().to_owned(),
        });
    };
    let target = now.blessed();
    if target != now {
        esp.rename(&entry_path(&now), &entry_path(&target))?;
    }
    Ok(target)
}

/// Marks an entry bad: `NAME+L-D.conf` → `NAME+0-D.conf`. Succeeds if it has no tries left already.
pub fn mark_bad(esp: &dyn Esp, name: &EntryName) -> Result<EntryName, UpdateError> {
    let Some(now) = current(esp, name)? else {
        return Err(UpdateError::NoSuchEntry {
            name: name.file_name().to_owned(),
        });
    };
    if now.is_bad() {
        return Ok(now);
    }
    let Some(target) = now.marked_bad() else {
        return Err(UpdateError::NoCounter {
            name: now.file_name().to_owned(),
        });
    };
    esp.rename(&entry_path(&now), &entry_path(&target))?;
    Ok(target)
}

/// Removes temporary files left by interrupted writes and payload files no entry references.
/// Returns the removed paths. Call it only while no install is running.
pub fn collect_garbage(esp: &dyn Esp) -> Result<Vec<String>, UpdateError> {
    let referenced: Vec<String> = entry_files(esp)?
        .into_iter()
        .flat_map(|(_, c)| c.referenced_files())
        .collect();
    let mut removed = Vec::new();
    for dir in [ENTRIES_DIR, PAYLOAD_DIR, "loader"] {
        for item in esp.list(dir)? {
            if item.is_dir {
                continue;
            }
            let path = format!("{dir}/{}", item.name);
            let orphan =
                dir == PAYLOAD_DIR && !referenced.iter().any(|r| r.eq_ignore_ascii_case(&path));
            if is_temp_name(&item.name) || orphan {
                esp.remove(&path)?;
                removed.push(path);
            }
        }
    }
    Ok(removed)
}

/// Frees space until `needed` bytes are free: garbage first, then entries in this order — bad
/// ones, then ones still on trial, then older good ones (each group oldest first) — never the
/// booted entry nor the first good entry in boot order. Returns the removed entries.
pub fn make_room(
    esp: &dyn Esp,
    needed: u64,
    booted: Option<&EntryName>,
) -> Result<Vec<EntryName>, UpdateError> {
    collect_garbage(esp)?;
    let mut removed = Vec::new();
    if esp.free_space()? >= needed {
        return Ok(removed);
    }
    let all: Vec<MenuEntry> = entry_files(esp)?
        .into_iter()
        .map(|(name, conf)| MenuEntry { name, conf })
        .collect();
    let menu = Menu::new(LoaderConf::default(), all);
    let last_good = menu
        .entries()
        .iter()
        .find(|e| e.name.is_blessed())
        .map(|e| e.name.stem().to_owned());
    let protected = |e: &MenuEntry| {
        booted.is_some_and(|b| b.stem().eq_ignore_ascii_case(e.name.stem()))
            || last_good
                .as_deref()
                .is_some_and(|g| g.eq_ignore_ascii_case(e.name.stem()))
    };
    let group = |e: &MenuEntry| {
        if e.name.is_bad() {
            0
        } else if e.name.is_in_trial() {
            1
        } else {
            2
        }
    };
    let mut candidates: Vec<&MenuEntry> = menu
        .entries()
        .iter()
        .rev()
        .filter(|e| !protected(e))
        .collect();
    candidates.sort_by_key(|e| group(e));
    for entry in candidates {
        esp.remove(&entry_path(&entry.name))?;
        removed.push(entry.name.clone());
        collect_garbage(esp)?;
        if esp.free_space()? >= needed {
            return Ok(removed);
        }
    }
    Err(UpdateError::NoSpace {
        needed,
        free: esp.free_space()?,
    })
}

/// Writes `loader.conf` atomically.
pub fn write_loader_conf(esp: &dyn Esp, conf: &LoaderConf) -> Result<(), UpdateError> {
    esp.write_atomic(LOADER_CONF_PATH, conf.format().as_bytes())?;
    Ok(())
}

/// Which entry file on the ESP was booted, from the loader's variables: `LoaderBootCountPath`
/// (`\loader\entries\NAME+L-D.conf`, set when a counter was bumped) and `LoaderEntrySelected`
/// (the id, i.e. the lowercased name before bumping). Matches a file of the same name, else of
/// the same stem (it may have been blessed or renamed since).
pub fn booted_entry(
    esp: &dyn Esp,
    loader_boot_count_path: Option<&str>,
    loader_entry_selected: Option<&str>,
) -> Result<Option<EntryName>, UpdateError> {
    let files: Vec<EntryName> = entry_files(esp)?.into_iter().map(|(n, _)| n).collect();
    Ok(resolve_booted(
        &files,
        loader_boot_count_path,
        loader_entry_selected,
    ))
}

/// [`booted_entry`] over a list of entry names.
pub fn resolve_booted(
    files: &[EntryName],
    loader_boot_count_path: Option<&str>,
    loader_entry_selected: Option<&str>,
) -> Option<EntryName> {
    let from_path = loader_boot_count_path
        .and_then(|p| p.rsplit(['\\', '/']).next())
        .filter(|s| !s.is_empty());
    for candidate in [from_path, loader_entry_selected].into_iter().flatten() {
        let candidate = candidate.trim();
        if let Some(n) = files
            .iter()
            .find(|n| n.file_name().eq_ignore_ascii_case(candidate))
        {
            return Some(n.clone());
        }
        if let Ok(parsed) = EntryName::parse(candidate)
            && let Some(n) = files
                .iter()
                .find(|n| n.stem().eq_ignore_ascii_case(parsed.stem()))
        {
            return Some(n.clone());
        }
    }
    None
}

/// Decodes an efivarfs file holding a string variable (4 bytes of attributes, then UTF-16LE,
/// optionally NUL-terminated), e.g. `/sys/firmware/efi/efivars/LoaderEntrySelected-4a67b082-...`.
pub fn decode_efivarfs_string(name: &str, bytes: &[u8]) -> Result<String, UpdateError> {
    let bad = |reason| UpdateError::EfiVar {
        name: name.to_owned(),
        reason,
    };
    let payload = bytes
        .get(4..)
        .ok_or_else(|| bad("shorter than its 4-byte attribute header"))?;
    if payload.len() % 2 != 0 {
        return Err(bad("odd number of UTF-16 bytes"));
    }
    let units: Vec<u16> = payload
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let end = units.iter().position(|&u| u == 0).unwrap_or(units.len());
    String::from_utf16(&units[..end]).map_err(|_| bad("not valid UTF-16"))
}

/// Encodes a string variable as efivarfs shows it (attributes: non-volatile, boot and runtime
/// access), NUL-terminated; for tests and simulated firmware.
pub fn encode_efivarfs_string(value: &str) -> Vec<u8> {
    let mut out = 0x7u32.to_le_bytes().to_vec();
    for unit in value.encode_utf16().chain(std::iter::once(0)) {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}
