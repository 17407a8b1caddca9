//! An ESP in memory, for simulated machines and tests, with a power-cut fault point: after a given
//! number of further writes, the next write is torn (a `write_file` leaves half the data, a rename
//! or removal does not happen) and every later operation fails until power is restored.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use rackproof_std::LockExt;

use crate::esp::{DirEntry, Esp, EspError, check_path};

/// Called (outside the ESP's lock) when an injected power cut fires.
pub type PowerCutHook = Arc<dyn Fn() + Send + Sync>;

/// An in-memory ESP. Clones share the same storage.
#[derive(Clone)]
pub struct MemEsp {
    inner: Arc<Mutex<State>>,
}

struct State {
    files: BTreeMap<String, Vec<u8>>,
    capacity: u64,
    /// Mutating operations still allowed before the power cut, if armed.
    cut_after: Option<u64>,
    powered: bool,
    mutations: u64,
    hook: Option<PowerCutHook>,
}

impl fmt::Debug for MemEsp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("MemEsp")
            .field("files", &s.files.keys().collect::<Vec<_>>())
            .field("capacity", &s.capacity)
            .field("powered", &s.powered)
            .finish()
    }
}

impl MemEsp {
    /// An empty ESP of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(State {
                files: BTreeMap::new(),
                capacity,
                cut_after: None,
                powered: true,
                mutations: 0,
                hook: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every update is one insert/remove).
        self.inner.locked()
    }

    /// Arms the fault point: `n` more writes (write, rename, remove) succeed, the next one is cut.
    pub fn cut_power_after(&self, n: u64) {
        self.lock().cut_after = Some(n);
    }

    /// Disarms the fault point without cutting.
    pub fn disarm(&self) {
        self.lock().cut_after = None;
    }

    /// Whether a fault point is armed.
    pub fn is_armed(&self) -> bool {
        self.lock().cut_after.is_some()
    }

    /// Called when an injected power cut fires (the simulated machine turns itself off).
    pub fn on_power_cut(&self, hook: PowerCutHook) {
        self.lock().hook = Some(hook);
    }

    /// Power is back (the machine starts again): operations work again. A fault point that fired
    /// is spent; one armed while the power was off stays armed.
    pub fn restore_power(&self) {
        self.lock().powered = true;
    }

    /// Whether the last injected power cut has not been followed by [`MemEsp::restore_power`].
    pub fn is_powered(&self) -> bool {
        self.lock().powered
    }

    /// Successful mutating operations so far.
    pub fn mutations(&self) -> u64 {
        self.lock().mutations
    }

    /// Every file and its contents, for exact assertions.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.lock().files.clone()
    }

    /// Every file path.
    pub fn paths(&self) -> Vec<String> {
        self.lock().files.keys().cloned().collect()
    }

    /// Replaces the whole contents (e.g. to restore a snapshot).
    pub fn restore(&self, files: BTreeMap<String, Vec<u8>>) {
        self.lock().files = files;
    }

    /// Starts a mutating operation: fails if power is off, or cuts it if the fault point is due.
    /// `Ok(true)` means "proceed", `Ok(false)` means "tear this operation, power is now off".
    fn begin(&self, s: &mut State, op: &'static str, path: &str) -> Result<bool, EspError> {
        if !s.powered {
            return Err(EspError::PowerLost {
                op,
                path: path.to_owned(),
            });
        }
        match s.cut_after {
            Some(0) => {
                s.powered = false;
                s.cut_after = None;
                Ok(false)
            }
            Some(n) => {
                s.cut_after = Some(n - 1);
                Ok(true)
            }
            None => Ok(true),
        }
    }

    fn fire_hook(&self) {
        let hook = self.lock().hook.clone();
        if let Some(hook) = hook {
            hook();
        }
    }

    fn check_powered(&self, op: &'static str, path: &str) -> Result<(), EspError> {
        if self.lock().powered {
            Ok(())
        } else {
            Err(EspError::PowerLost {
                op,
                path: path.to_owned(),
            })
        }
    }
}

fn used(files: &BTreeMap<String, Vec<u8>>) -> u64 {
    files.values().map(|v| v.len() as u64).sum()
}

impl Esp for MemEsp {
    fn list(&self, dir: &str) -> Result<Vec<DirEntry>, EspError> {
        check_path("list", dir, true)?;
        self.check_powered("list", dir)?;
        let s = self.lock();
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut files = Vec::new();
        let mut dirs = BTreeSet::new();
        for (path, data) in s.files.range(prefix.clone()..) {
            let Some(rest) = path.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                Some((sub, _)) => {
                    dirs.insert(sub.to_owned());
                }
                None => files.push(DirEntry {
                    name: rest.to_owned(),
                    size: data.len() as u64,
                    is_dir: false,
                }),
            }
        }
        files.extend(dirs.into_iter().map(|name| DirEntry {
            name,
            size: 0,
            is_dir: true,
        }));
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, EspError> {
        check_path("read", path, false)?;
        self.check_powered("read", path)?;
        self.lock()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| EspError::NotFound {
                op: "read",
                path: path.to_owned(),
            })
    }

    fn exists(&self, path: &str) -> Result<bool, EspError> {
        check_path("stat", path, false)?;
        self.check_powered("stat", path)?;
        Ok(self.lock().files.contains_key(path))
    }

    fn write_file(&self, path: &str, data: &[u8]) -> Result<(), EspError> {
        check_path("write", path, false)?;
        let torn = {
            let mut s = self.lock();
            let old = s.files.get(path).map_or(0, |v| v.len() as u64);
            let free = s.capacity.saturating_sub(used(&s.files) - old);
            if data.len() as u64 > free {
                return Err(EspError::NoSpace {
                    op: "write",
                    path: path.to_owned(),
                    needed: data.len() as u64,
                    free,
                });
            }
            if self.begin(&mut s, "write", path)? {
                s.files.insert(path.to_owned(), data.to_vec());
                s.mutations += 1;
                return Ok(());
            }
            s.files
                .insert(path.to_owned(), data[..data.len() / 2].to_vec());
            true
        };
        if torn {
            self.fire_hook();
        }
        Err(EspError::PowerLost {
            op: "write",
            path: path.to_owned(),
        })
    }

    fn rename(&self, from: &str, to: &str) -> Result<(), EspError> {
        check_path("rename", from, false)?;
        check_path("rename", to, false)?;
        let shown = format!("{from} to {to}");
        {
            let mut s = self.lock();
            if !s.files.contains_key(from) {
                if !s.powered {
                    return Err(EspError::PowerLost {
                        op: "rename",
                        path: shown,
                    });
                }
                return Err(EspError::NotFound {
                    op: "rename",
                    path: shown,
                });
            }
            if self.begin(&mut s, "rename", &shown)? {
                let data = s.files.remove(from).unwrap_or_default();
                s.files.insert(to.to_owned(), data);
                s.mutations += 1;
                return Ok(());
            }
        }
        self.fire_hook();
        Err(EspError::PowerLost {
            op: "rename",
            path: shown,
        })
    }

    fn remove(&self, path: &str) -> Result<(), EspError> {
        check_path("remove", path, false)?;
        {
            let mut s = self.lock();
            if self.begin(&mut s, "remove", path)? {
                s.files.remove(path);
                s.mutations += 1;
                return Ok(());
            }
        }
        self.fire_hook();
        Err(EspError::PowerLost {
            op: "remove",
            path: path.to_owned(),
        })
    }

    fn free_space(&self) -> Result<u64, EspError> {
        self.check_powered("measure free space of", "ESP")?;
        let s = self.lock();
        Ok(s.capacity.saturating_sub(used(&s.files)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn lists_files_and_implicit_directories() {
        let esp = MemEsp::new(1 << 20);
        esp.write_file("loader/loader.conf", b"timeout 0\n")
            .unwrap();
        esp.write_file("loader/entries/a.conf", b"x").unwrap();
        esp.write_file("loaderx", b"y").unwrap();
        let names: Vec<_> = esp
            .list("loader")
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.is_dir))
            .collect();
        assert_eq!(
            names,
            [
                ("entries".to_owned(), true),
                ("loader.conf".to_owned(), false)
            ]
        );
        assert_eq!(esp.free_space().unwrap(), (1 << 20) - 12);
    }

    #[test]
    fn capacity_is_enforced() {
        let esp = MemEsp::new(10);
        esp.write_file("a", b"12345678").unwrap();
        let err = esp.write_file("b", b"123").unwrap_err();
        assert_eq!(err.to_string(), "write b: needs 3 bytes, 2 free on the ESP");
        esp.write_file("a", b"1234567890").unwrap();
    }

    #[test]
    fn power_cut_tears_the_due_write_and_stops_everything_after() {
        let esp = MemEsp::new(1 << 20);
        let fired = Arc::new(AtomicU32::new(0));
        let counter = fired.clone();
        esp.on_power_cut(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        esp.cut_power_after(1);
        esp.write_file("a", b"1234").unwrap();
        assert!(esp.write_file("b", b"5678").unwrap_err().is_power_lost());
        assert_eq!(
            esp.snapshot().get("b").map(Vec::as_slice),
            Some(&b"56"[..]),
            "torn write"
        );
        assert!(esp.read("a").unwrap_err().is_power_lost());
        assert!(esp.rename("a", "c").unwrap_err().is_power_lost());
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        esp.restore_power();
        assert_eq!(esp.read("a").unwrap(), b"1234");
        assert_eq!(esp.mutations(), 1);
    }

    #[test]
    fn cut_rename_and_remove_do_nothing() {
        let esp = MemEsp::new(1 << 20);
        esp.write_file("a", b"1").unwrap();
        esp.cut_power_after(0);
        assert!(esp.rename("a", "b").unwrap_err().is_power_lost());
        esp.restore_power();
        assert_eq!(esp.paths(), ["a"]);
        esp.cut_power_after(0);
        assert!(esp.remove("a").unwrap_err().is_power_lost());
        esp.restore_power();
        assert_eq!(esp.paths(), ["a"]);
    }
}
