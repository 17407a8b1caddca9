//! The ESP logic (install with `+3`, boot-counter renames, blessing, fallback, the `default`
//! pattern pitfall) on a real FAT32 image built with dosfstools and driven with mtools, the way
//! the node images' ESP is built (no loop device, no root).
//!
//! Needs Debian's `mtools` and `dosfstools`; fails with the install command when they are missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use inplace_agent::assess::booted::{FixedBooted, LoaderHint};
use inplace_agent::assess::{BootAssessor as _, EspAssessor};
use inplace_agent::manifest::{BootSpec, SlotKeyPair, SlotManifest};
use inplace_agent::osupdate::source::MemorySource;
use inplace_agent::osupdate::{OsUpdateEnv, run};
use inplace_api::keys::OsUpdateExit;
use inplace_boot::{DirEntry, EntryConf, Esp, EspError, LoaderVars, NewEntry};

const INSTALL: &str = "apt-get install -y mtools dosfstools";

fn require_tools() {
    for tool in ["mkfs.vfat", "mdir", "mcopy", "mren", "mdel", "mmd"] {
        let found = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "command -v {tool} || test -x /usr/sbin/{tool} || test -x /sbin/{tool}"
            ))
            .output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "{tool} is missing: run `{INSTALL}`"
        );
    }
}

/// An ESP inside a FAT image file, every operation an mtools command.
#[derive(Debug)]
struct MtoolsEsp {
    image: PathBuf,
    scratch: tempfile::TempDir,
}

impl MtoolsEsp {
    fn create(dir: &Path) -> Self {
        let image = dir.join("esp.img");
        let mkfs = ["/usr/sbin/mkfs.vfat", "/sbin/mkfs.vfat", "mkfs.vfat"]
            .into_iter()
            .find(|p| !p.starts_with('/') || Path::new(p).exists())
            .unwrap();
        let out = Command::new(mkfs)
            .args(["-F", "32", "-C"])
            .arg(&image)
            .arg("65536")
            .output()
            .expect(INSTALL);
        assert!(
            out.status.success(),
            "mkfs.vfat failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            image,
            scratch: tempfile::tempdir().unwrap(),
        }
    }

    fn mtools(&self, tool: &str, args: &[&str]) -> std::process::Output {
        Command::new(tool)
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-i")
            .arg(&self.image)
            .args(args)
            .output()
            .expect(INSTALL)
    }

    fn io(op: &'static str, path: &str, out: &std::process::Output) -> EspError {
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        if text.contains("not found") {
            return EspError::NotFound {
                op,
                path: path.to_owned(),
            };
        }
        EspError::Io {
            op,
            path: path.to_owned(),
            source: std::io::Error::other(text),
        }
    }

    /// Entry file names as the FAT directory holds them.
    fn names(&self, dir: &str) -> Vec<String> {
        self.list(dir)
            .unwrap()
            .into_iter()
            .filter(|e| !e.is_dir)
            .map(|e| e.name)
            .collect()
    }
}

impl Esp for MtoolsEsp {
    fn list(&self, dir: &str) -> Result<Vec<DirEntry>, EspError> {
        let out = self.mtools("mdir", &["-b", &format!("::/{dir}")]);
        if !out.status.success() {
            return Ok(Vec::new());
        }
        let prefix = if dir.is_empty() {
            "::/".to_owned()
        } else {
            format!("::/{dir}/")
        };
        let mut entries = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let is_dir = rest.ends_with('/');
            let name = rest.trim_end_matches('/').to_owned();
            if name.is_empty() || name == "." || name == ".." {
                continue;
            }
            let size = if is_dir {
                0
            } else {
                self.read(&format!("{}{name}", &prefix[3..]))?.len() as u64
            };
            entries.push(DirEntry { name, size, is_dir });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, EspError> {
        let out = self.mtools("mcopy", &["-n", &format!("::/{path}"), "-"]);
        if !out.status.success() {
            return Err(Self::io("read", path, &out));
        }
        Ok(out.stdout)
    }

    fn exists(&self, path: &str) -> Result<bool, EspError> {
        Ok(self
            .mtools("mdir", &["-b", &format!("::/{path}")])
            .status
            .success())
    }

    fn write_file(&self, path: &str, data: &[u8]) -> Result<(), EspError> {
        let mut dir = String::new();
        if let Some((parent, _)) = path.rsplit_once('/') {
            for part in parent.split('/') {
                dir = if dir.is_empty() {
                    part.to_owned()
                } else {
                    format!("{dir}/{part}")
                };
                let _ = self.mtools("mmd", &[&format!("::/{dir}")]);
            }
        }
        let host = self.scratch.path().join("upload");
        std::fs::write(&host, data).map_err(|source| EspError::Io {
            op: "write",
            path: path.to_owned(),
            source,
        })?;
        let out = self.mtools(
            "mcopy",
            &[
                "-n",
                "-D",
                "o",
                host.to_str().unwrap(),
                &format!("::/{path}"),
            ],
        );
        if !out.status.success() {
            return Err(Self::io("write", path, &out));
        }
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<(), EspError> {
        if self.exists(to)? {
            self.remove(to)?;
        }
        let out = self.mtools(
            "mren",
            &["-D", "o", &format!("::/{from}"), &format!("::/{to}")],
        );
        if !out.status.success() {
            return Err(Self::io("rename", from, &out));
        }
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<(), EspError> {
        let out = self.mtools("mdel", &[&format!("::/{path}")]);
        if !out.status.success() && self.exists(path)? {
            return Err(Self::io("remove", path, &out));
        }
        Ok(())
    }

    fn free_space(&self) -> Result<u64, EspError> {
        let out = self.mtools("mdir", &["::/"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.contains("bytes free"))
            .ok_or_else(|| Self::io("measure free space", "", &out))?;
        let digits: String = line
            .split("bytes free")
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        Ok(digits.parse().unwrap_or(0))
    }
}

struct Fat {
    _dir: tempfile::TempDir,
    esp: Arc<MtoolsEsp>,
    booted: FixedBooted,
    vars: LoaderVars,
}

/// A FAT ESP with `loader.conf` (`loader_conf` text) and version 1.0.0 installed and blessed.
fn fat_with_one_version(loader_conf: &str) -> Fat {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let esp = Arc::new(MtoolsEsp::create(dir.path()));
    esp.write_atomic("loader/loader.conf", loader_conf.as_bytes())
        .unwrap();
    let conf = EntryConf {
        title: Some("Rackproof 1.0.0".into()),
        version: Some("1.0.0".into()),
        ..Default::default()
    };
    let name = inplace_boot::install_entry(
        esp.as_ref(),
        &NewEntry {
            stem: "rackproof-1.0.0",
            conf,
            kernel: b"kernel 1.0.0",
            initrd: Some(b"initrd 1.0.0"),
            tries: 3,
        },
        None,
    )
    .unwrap();
    inplace_boot::bless(esp.as_ref(), &name).unwrap();
    let mut fat = Fat {
        _dir: dir,
        esp,
        booted: FixedBooted::default(),
        vars: LoaderVars::default(),
    };
    assert_eq!(boot(&mut fat), "1.0.0");
    fat
}

/// One boot by systemd-boot's rules; returns the booted version.
fn boot(fat: &mut Fat) -> String {
    let record = inplace_boot::boot(fat.esp.as_ref(), &mut fat.vars)
        .unwrap()
        .expect("an entry to boot");
    fat.booted.set(LoaderHint {
        boot_count_path: record.loader_boot_count_path.clone(),
        entry_selected: Some(record.loader_entry_selected.clone()),
    });
    record.entry.conf.version.clone().unwrap()
}

async fn os_update(fat: &Fat, version: &str) -> OsUpdateExit {
    let source = MemorySource::new();
    let key = SlotKeyPair::from_seed([1; 32]);
    let kernel = format!("kernel {version}").into_bytes();
    let boot = BootSpec {
        linux: "vmlinuz".into(),
        initrd: None,
        options: "console=ttyS0".into(),
    };
    let mut manifest =
        SlotManifest::describe(version, &[("vmlinuz".into(), kernel.clone())], boot).unwrap();
    manifest.sign(key.signing());
    source.put(version, "manifest.json", manifest.to_json());
    source.put(version, "vmlinuz", kernel);
    let env = OsUpdateEnv {
        esp: Some(fat.esp.clone()),
        source: Some(Arc::new(source)),
        public_key: Some(key.public()),
        booted: Some(Arc::new(fat.booted.clone())),
    };
    let argv: Vec<String> = ["--version", version, "--image-server", "http://images.lab"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut out = Vec::new();
    let exit = run(&argv, &env, &mut out).await;
    assert_eq!(
        exit,
        OsUpdateExit::Success,
        "{}",
        String::from_utf8_lossy(&out)
    );
    exit
}

#[tokio::test]
async fn a_good_update_on_fat_is_tried_with_a_counter_and_blessed() {
    let mut fat = fat_with_one_version("timeout 0\n");
    os_update(&fat, "2.0.0").await;
    assert_eq!(
        fat.esp.names("loader/entries"),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0+3.conf"]
    );
    assert_eq!(boot(&mut fat), "2.0.0", "the newest entry wins");
    assert_eq!(
        fat.esp.names("loader/entries"),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0+2-1.conf"],
        "the loader counted the try"
    );
    let assessor = EspAssessor::new(fat.esp.clone(), Arc::new(fat.booted.clone()), "rackproof");
    assert_eq!(
        assessor.booted().unwrap().as_deref(),
        Some("rackproof-2.0.0+2-1.conf")
    );
    assert_eq!(assessor.bless_booted().unwrap(), "rackproof-2.0.0.conf");
    assert_eq!(
        fat.esp.names("loader/entries"),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"]
    );
    assert_eq!(boot(&mut fat), "2.0.0");
    assert_eq!(
        fat.esp.names("loader/entries"),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"],
        "a blessed entry is not renamed"
    );
}

#[tokio::test]
async fn a_failing_update_on_fat_falls_back_after_three_tries() {
    let mut fat = fat_with_one_version("timeout 0\n");
    os_update(&fat, "2.0.0").await;
    for expected in [
        "rackproof-2.0.0+2-1.conf",
        "rackproof-2.0.0+1-2.conf",
        "rackproof-2.0.0+0-3.conf",
    ] {
        assert_eq!(
            boot(&mut fat),
            "2.0.0",
            "the new entry is tried while it has tries left"
        );
        assert!(
            fat.esp
                .names("loader/entries")
                .contains(&expected.to_owned()),
            "{:?}",
            fat.esp.names("loader/entries")
        );
    }
    assert_eq!(
        boot(&mut fat),
        "1.0.0",
        "with no tries left the loader falls back"
    );
    let assessor = EspAssessor::new(fat.esp.clone(), Arc::new(fat.booted.clone()), "rackproof");
    assert_eq!(
        assessor.reject_version("2.0.0").unwrap().as_deref(),
        Some("rackproof-2.0.0+0-3.conf")
    );
    // The next update makes room by removing the bad entry, never the booted one.
    os_update(&fat, "3.0.0").await;
    let names = fat.esp.names("loader/entries");
    assert!(
        names.contains(&"rackproof-1.0.0.conf".to_owned())
            && names.contains(&"rackproof-3.0.0+3.conf".to_owned()),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_default_pattern_pins_a_failing_entry_on_fat() {
    let mut fat = fat_with_one_version("timeout 0\ndefault rackproof-2.0.0*\n");
    os_update(&fat, "2.0.0").await;
    for _ in 0..3 {
        assert_eq!(boot(&mut fat), "2.0.0");
    }
    assert!(
        fat.esp
            .names("loader/entries")
            .contains(&"rackproof-2.0.0+0-3.conf".to_owned())
    );
    assert_eq!(
        boot(&mut fat),
        "2.0.0",
        "the pitfall: a default pattern matching only the new entry pins it even at +0"
    );
    let (menu, _) = inplace_boot::load_menu(fat.esp.as_ref()).unwrap();
    assert!(menu.default_pattern_pins_counted_entry().is_some());
    // Without the pattern (what the images ship), the same ESP falls back.
    fat.esp
        .write_atomic("loader/loader.conf", b"timeout 0\n")
        .unwrap();
    assert_eq!(boot(&mut fat), "1.0.0");
}
