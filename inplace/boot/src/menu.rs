//! The boot menu as systemd-boot 252 builds it: entry order (`config_entry_compare`) and the
//! default entry (`config_default_entry_select`).
//!
//! Order, first to last:
//! 1. entries with no tries left (`+0`) go after all others;
//! 2. entries with a `sort-key` go before entries without one;
//! 3. among entries that both have a `sort-key`: by `sort-key` (bytewise, ascending), then
//!    `machine-id` (absent first), then `version` (newest first);
//! 4. then by id (the lowercased file name, counter included), newest version first;
//! 5. with both ids equal and both counted: more tries left first, then fewer tries done.
//!
//! Default: `LoaderEntryOneShot`, then `LoaderEntryDefault` (or the saved entry if that variable
//! says `@saved`), then `loader.conf`'s `default` (or the saved entry for `@saved`), each the
//! first entry *in this order* whose id matches the glob; else the first entry. A pattern that
//! matches only a `+0` entry therefore still selects it: there is no fallback.

use std::cmp::Ordering;

use crate::entry::EntryConf;
use crate::loader_conf::LoaderConf;
use crate::name::EntryName;
use crate::pattern::fnmatch;
use crate::version::compare_versions;

/// One entry the loader lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuEntry {
    pub name: EntryName,
    pub conf: EntryConf,
}

impl MenuEntry {
    pub fn id(&self) -> String {
        self.name.id()
    }
}

/// The loader's EFI variables that influence selection (all optional).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoaderVars {
    /// `LoaderEntryOneShot`: a pattern for the next boot only (the loader clears it).
    pub entry_oneshot: Option<String>,
    /// `LoaderEntryDefault`: a pattern overriding `loader.conf`'s `default`, or `@saved`.
    pub entry_default: Option<String>,
    /// `LoaderEntryLastBooted`: the id the loader saved for `@saved`.
    pub entry_last_booted: Option<String>,
}

/// Why an entry is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultReason {
    OneShot,
    EfiVarDefault,
    Saved,
    ConfigPattern,
    FirstInOrder,
}

/// The sorted list of entries plus the loader configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Menu {
    entries: Vec<MenuEntry>,
    conf: LoaderConf,
}

impl Menu {
    /// Sorts `entries` as the loader does.
    pub fn new(conf: LoaderConf, mut entries: Vec<MenuEntry>) -> Self {
        // Directory order on FAT is creation order; start from names so the result is
        // deterministic, then apply the loader's (stable) order.
        entries.sort_by(|a, b| a.name.file_name().cmp(b.name.file_name()));
        entries.sort_by(compare_entries);
        Self { entries, conf }
    }

    /// Entries in boot menu order.
    pub fn entries(&self) -> &[MenuEntry] {
        &self.entries
    }

    pub fn conf(&self) -> &LoaderConf {
        &self.conf
    }

    /// The entry whose file has this stem, if any.
    pub fn find_stem(&self, stem: &str) -> Option<&MenuEntry> {
        self.entries.iter().find(|e| e.name.stem() == stem)
    }

    /// The entry the loader boots without user input, and why; `None` with no entries.
    pub fn default_entry(&self, vars: &LoaderVars) -> Option<(&MenuEntry, DefaultReason)> {
        let lower = |s: &Option<String>| s.as_deref().map(str::to_ascii_lowercase);
        let saved = lower(&vars.entry_last_booted);
        let efivar_default = lower(&vars.entry_default);
        let efivar_saved = efivar_default.as_deref() == Some("@saved");

        if let Some(e) = self.find(lower(&vars.entry_oneshot).as_deref()) {
            return Some((e, DefaultReason::OneShot));
        }
        let from_efivar = if efivar_saved {
            saved.as_deref()
        } else {
            efivar_default.as_deref()
        };
        if let Some(e) = self.find(from_efivar) {
            return Some((
                e,
                if efivar_saved {
                    DefaultReason::Saved
                } else {
                    DefaultReason::EfiVarDefault
                },
            ));
        }
        if self.conf.uses_saved() {
            if !efivar_saved && let Some(e) = self.find(saved.as_deref()) {
                return Some((e, DefaultReason::Saved));
            }
        } else if let Some(e) = self.find(self.conf.default_pattern().as_deref()) {
            return Some((e, DefaultReason::ConfigPattern));
        }
        self.entries
            .first()
            .map(|e| (e, DefaultReason::FirstInOrder))
    }

    /// Whether `loader.conf`'s `default` pattern would select an entry with a boot counter:
    /// such a pattern pins a new entry even when it has no tries left.
    pub fn default_pattern_pins_counted_entry(&self) -> Option<&MenuEntry> {
        self.find(self.conf.default_pattern().as_deref())
            .filter(|e| !e.name.is_blessed())
    }

    fn find(&self, pattern: Option<&str>) -> Option<&MenuEntry> {
        let pattern = pattern?;
        self.entries.iter().find(|e| fnmatch(pattern, &e.id()))
    }
}

/// systemd-boot 252's `config_entry_compare`: `Less` means `a` comes first.
pub fn compare_entries(a: &MenuEntry, b: &MenuEntry) -> Ordering {
    let (na, nb) = (&a.name, &b.name);
    let r = na.is_bad().cmp(&nb.is_bad());
    if r != Ordering::Equal {
        return r;
    }
    let (ka, kb) = (a.conf.sort_key.as_deref(), b.conf.sort_key.as_deref());
    let r = ka.is_none().cmp(&kb.is_none());
    if r != Ordering::Equal {
        return r;
    }
    if let (Some(ka), Some(kb)) = (ka, kb) {
        let r = ka.cmp(kb);
        if r != Ordering::Equal {
            return r;
        }
        let r = a
            .conf
            .machine_id
            .as_deref()
            .cmp(&b.conf.machine_id.as_deref());
        if r != Ordering::Equal {
            return r;
        }
        let r = compare_versions(a.conf.version.as_deref(), b.conf.version.as_deref()).reverse();
        if r != Ordering::Equal {
            return r;
        }
    }
    let r = compare_versions(Some(&na.id()), Some(&nb.id())).reverse();
    if r != Ordering::Equal {
        return r;
    }
    let (Some(ca), Some(cb)) = (na.counter(), nb.counter()) else {
        return Ordering::Equal;
    };
    let r = ca.left.cmp(&cb.left).reverse();
    if r != Ordering::Equal {
        return r;
    }
    ca.done.unwrap_or(0).cmp(&cb.done.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(file: &str, sort_key: Option<&str>, version: Option<&str>) -> MenuEntry {
        MenuEntry {
            name: EntryName::parse(file).unwrap(),
            conf: EntryConf {
                sort_key: sort_key.map(Into::into),
                version: version.map(Into::into),
                linux: Some("/k".into()),
                ..EntryConf::default()
            },
        }
    }

    fn order(menu: &Menu) -> Vec<&str> {
        menu.entries().iter().map(|e| e.name.file_name()).collect()
    }

    fn conf(default: Option<&str>) -> LoaderConf {
        LoaderConf {
            default: default.map(Into::into),
            ..LoaderConf::default()
        }
    }

    #[test]
    fn without_sort_keys_newest_file_name_first() {
        let menu = Menu::new(
            conf(None),
            vec![
                entry("os-9.conf", None, None),
                entry("os-10+3.conf", None, None),
            ],
        );
        assert_eq!(order(&menu), ["os-10+3.conf", "os-9.conf"]);
    }

    #[test]
    fn bad_entries_go_last() {
        let menu = Menu::new(
            conf(None),
            vec![
                entry("os-9.conf", None, None),
                entry("os-10+0-3.conf", None, None),
            ],
        );
        assert_eq!(order(&menu), ["os-9.conf", "os-10+0-3.conf"]);
        assert_eq!(
            menu.default_entry(&LoaderVars::default())
                .unwrap()
                .0
                .name
                .file_name(),
            "os-9.conf"
        );
    }

    #[test]
    fn with_sort_keys_version_decides_not_file_name() {
        let menu = Menu::new(
            conf(None),
            vec![
                entry("b-slot.conf", Some("os"), Some("1.9")),
                entry("a-slot+3.conf", Some("os"), Some("1.10")),
            ],
        );
        assert_eq!(order(&menu), ["a-slot+3.conf", "b-slot.conf"]);
        let menu = Menu::new(
            conf(None),
            vec![
                entry("a-slot.conf", Some("os"), Some("1.9")),
                entry("b-slot+3.conf", Some("os"), Some("1.10")),
            ],
        );
        assert_eq!(order(&menu), ["b-slot+3.conf", "a-slot.conf"]);
    }

    #[test]
    fn entries_with_sort_key_go_before_those_without() {
        let menu = Menu::new(
            conf(None),
            vec![
                entry("z.conf", Some("os"), None),
                entry("zz.conf", None, None),
            ],
        );
        assert_eq!(order(&menu), ["z.conf", "zz.conf"]);
        let menu = Menu::new(
            conf(None),
            vec![
                entry("a.conf", Some("b"), None),
                entry("b.conf", Some("a"), None),
            ],
        );
        assert_eq!(order(&menu), ["b.conf", "a.conf"], "sort-key ascending");
    }

    #[test]
    fn machine_id_groups_before_version() {
        let mut a = entry("a.conf", Some("os"), Some("1"));
        a.conf.machine_id = Some("bbbb".into());
        let mut b = entry("b.conf", Some("os"), Some("2"));
        b.conf.machine_id = Some("aaaa".into());
        let menu = Menu::new(conf(None), vec![a, b]);
        assert_eq!(order(&menu), ["b.conf", "a.conf"]);
    }

    #[test]
    fn counted_entries_order_by_id_then_counters() {
        // Different counters make different ids, and the id comparison reads the counter digits.
        let menu = Menu::new(
            conf(None),
            vec![
                entry("os+1-2.conf", None, None),
                entry("os+2-1.conf", None, None),
            ],
        );
        assert_eq!(order(&menu), ["os+2-1.conf", "os+1-2.conf"]);
        let x = entry("os+2-1.conf", None, None);
        let y = entry("os+2-1.conf", None, None);
        assert_eq!(compare_entries(&x, &y), Ordering::Equal);
    }

    #[test]
    fn default_pattern_pitfall_pins_a_bad_entry() {
        let entries = vec![
            entry("os-1.conf", None, None),
            entry("os-2+0-3.conf", None, None),
        ];
        let menu = Menu::new(conf(Some("os-2*")), entries.clone());
        let (chosen, reason) = menu.default_entry(&LoaderVars::default()).unwrap();
        assert_eq!(
            (chosen.name.file_name(), reason),
            ("os-2+0-3.conf", DefaultReason::ConfigPattern)
        );
        assert!(menu.default_pattern_pins_counted_entry().is_some());
        // A pattern matching both picks the first in order: the good one.
        let menu = Menu::new(conf(Some("os-*")), entries.clone());
        assert_eq!(
            menu.default_entry(&LoaderVars::default())
                .unwrap()
                .0
                .name
                .file_name(),
            "os-1.conf"
        );
        // A pattern matching nothing falls back to the first entry.
        let menu = Menu::new(conf(Some("other-*")), entries);
        let (chosen, reason) = menu.default_entry(&LoaderVars::default()).unwrap();
        assert_eq!(
            (chosen.name.file_name(), reason),
            ("os-1.conf", DefaultReason::FirstInOrder)
        );
    }

    #[test]
    fn exact_default_without_counter_stops_matching_a_counted_entry() {
        // `default os-2.conf` does not match `os-2+3.conf`: ids include the counter.
        let menu = Menu::new(
            conf(Some("os-2.conf")),
            vec![
                entry("os-1.conf", None, None),
                entry("os-2+3.conf", None, None),
            ],
        );
        let (chosen, reason) = menu.default_entry(&LoaderVars::default()).unwrap();
        assert_eq!(
            (chosen.name.file_name(), reason),
            ("os-2+3.conf", DefaultReason::FirstInOrder)
        );
    }

    #[test]
    fn efi_variables_take_precedence() {
        let menu = Menu::new(
            conf(Some("os-2*")),
            vec![
                entry("os-1.conf", None, None),
                entry("os-2.conf", None, None),
            ],
        );
        let vars = LoaderVars {
            entry_oneshot: Some("OS-1.conf".into()),
            ..LoaderVars::default()
        };
        assert_eq!(menu.default_entry(&vars).unwrap().1, DefaultReason::OneShot);
        let vars = LoaderVars {
            entry_default: Some("os-1*".into()),
            ..LoaderVars::default()
        };
        assert_eq!(
            menu.default_entry(&vars).unwrap().0.name.file_name(),
            "os-1.conf"
        );
        let vars = LoaderVars {
            entry_default: Some("@saved".into()),
            entry_last_booted: Some("os-1.conf".into()),
            ..LoaderVars::default()
        };
        assert_eq!(menu.default_entry(&vars).unwrap().1, DefaultReason::Saved);
        let saved = Menu::new(conf(Some("@saved")), menu.entries().to_vec());
        let vars = LoaderVars {
            entry_last_booted: Some("os-1.conf".into()),
            ..LoaderVars::default()
        };
        assert_eq!(
            saved.default_entry(&vars).unwrap().0.name.file_name(),
            "os-1.conf"
        );
        assert_eq!(
            saved.default_entry(&LoaderVars::default()).unwrap().1,
            DefaultReason::FirstInOrder
        );
    }

    #[test]
    fn empty_menu_has_no_default() {
        assert!(
            Menu::new(conf(None), vec![])
                .default_entry(&LoaderVars::default())
                .is_none()
        );
    }
}
