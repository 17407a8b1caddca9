//! An ESP inside a disk image file, read and written with mtools (`IMG@@OFFSET`): no loop device,
//! no mount, no root. For building disks and for inspecting a stopped node's ESP.
//!
//! Caveats: mtools has no atomic rename-over, so [`MtoolsEsp::rename`] deletes the target first
//! (fine on a disk no guest is running from); never use it while the VM runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use inplace_boot::{DirEntry, Esp, EspError};

/// Byte offset of the ESP in disks built by `images/build-disk` (GPT, 1 MiB aligned).
pub const ESP_OFFSET: u64 = 1024 * 1024;

/// The `apt-get` line that provides mtools.
pub const MTOOLS_INSTALL: &str = "apt-get install -y mtools";

/// A FAT file system at `offset` bytes into `image`.
#[derive(Debug, Clone)]
pub struct MtoolsEsp {
    image: PathBuf,
    offset: u64,
}

impl MtoolsEsp {
    /// The ESP of a disk built by `images/build-disk` (partition 1 at 1 MiB).
    pub fn on_disk(image: impl Into<PathBuf>) -> Self {
        Self::at_offset(image, ESP_OFFSET)
    }

    /// A FAT file system at `offset` bytes into `image`.
    pub fn at_offset(image: impl Into<PathBuf>, offset: u64) -> Self {
        Self {
            image: image.into(),
            offset,
        }
    }

    /// The disk image.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// Whether the file system is marked dirty: Linux's FAT driver sets the state bit of the boot
    /// sector when it mounts the file system read-write and clears it when it unmounts it, so a
    /// set bit on a stopped node means the guest did not unmount it (a power cut, not a shutdown).
    pub fn dirty(&self) -> Result<bool, EspError> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let path = format!("{}@@{}", self.image.display(), self.offset);
        let io = |source| EspError::Io {
            op: "read boot sector",
            path: path.clone(),
            source,
        };
        let mut file = std::fs::File::open(&self.image).map_err(io)?;
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut sector = [0u8; 512];
        file.read_exact(&mut sector).map_err(io)?;
        fat_dirty(&sector).ok_or_else(|| io(std::io::Error::other("no FAT boot signature")))
    }

    fn drive(&self) -> String {
        format!("{}@@{}", self.image.display(), self.offset)
    }

    fn run(
        &self,
        op: &'static str,
        path: &str,
        tool: &str,
        args: &[&str],
    ) -> Result<Output, EspError> {
        Command::new(tool)
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-i")
            .arg(self.drive())
            .args(args)
            .output()
            .map_err(|source| {
                let source = if source.kind() == std::io::ErrorKind::NotFound {
                    std::io::Error::new(
                        source.kind(),
                        format!("{tool} is not installed: {MTOOLS_INSTALL}"),
                    )
                } else {
                    source
                };
                EspError::Io {
                    op,
                    path: path.to_owned(),
                    source,
                }
            })
    }

    fn check(&self, op: &'static str, path: &str, out: Output) -> Result<Output, EspError> {
        if out.status.success() {
            return Ok(out);
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if stderr.contains("not found") {
            return Err(EspError::NotFound {
                op,
                path: path.to_owned(),
            });
        }
        if stderr.contains("Disk full") || stderr.contains("No free") {
            return Err(EspError::NoSpace {
                op,
                path: path.to_owned(),
                needed: 0,
                free: self.free_space().unwrap_or(0),
            });
        }
        Err(EspError::Io {
            op,
            path: path.to_owned(),
            source: std::io::Error::other(format!("mtools on {}: {stderr}", self.image.display())),
        })
    }

    fn ensure_dirs(&self, path: &str) -> Result<(), EspError> {
        let mut prefix = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            let listing = self.run(
                "create directory",
                &prefix,
                "mdir",
                &["-b", &format!("::/{prefix}")],
            )?;
            if !listing.status.success() {
                let out = self.run(
                    "create directory",
                    &prefix,
                    "mmd",
                    &[&format!("::/{prefix}")],
                )?;
                self.check("create directory", &prefix, out)?;
            }
        }
        Ok(())
    }
}

fn check_path(op: &'static str, path: &str) -> Result<(), EspError> {
    let invalid = |reason| {
        Err(EspError::InvalidPath {
            op,
            path: path.to_owned(),
            reason,
        })
    };
    if path.starts_with('/') || path.contains('\\') {
        return invalid("must be relative with / separators");
    }
    if !path.is_empty()
        && path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return invalid("empty, . or .. component");
    }
    Ok(())
}

impl Esp for MtoolsEsp {
    fn list(&self, dir: &str) -> Result<Vec<DirEntry>, EspError> {
        check_path("list", dir)?;
        let out = self.run("list", dir, "mdir", &["-a", "-f", &format!("::/{dir}")])?;
        match self.check("list", dir, out) {
            Ok(out) => Ok(parse_mdir(&String::from_utf8_lossy(&out.stdout))),
            Err(EspError::NotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, EspError> {
        check_path("read", path)?;
        let out = self.run("read", path, "mcopy", &["-n", &format!("::/{path}"), "-"])?;
        Ok(self.check("read", path, out)?.stdout)
    }

    fn exists(&self, path: &str) -> Result<bool, EspError> {
        check_path("stat", path)?;
        let out = self.run("stat", path, "mdir", &["-b", &format!("::/{path}")])?;
        match self.check("stat", path, out) {
            Ok(_) => Ok(true),
            Err(EspError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn write_file(&self, path: &str, data: &[u8]) -> Result<(), EspError> {
        check_path("write", path)?;
        self.ensure_dirs(path)?;
        let staged = tempfile::NamedTempFile::new()
            .and_then(|mut f| {
                use std::io::Write as _;
                f.write_all(data)?;
                f.flush()?;
                Ok(f)
            })
            .map_err(|source| EspError::Io {
                op: "write",
                path: path.to_owned(),
                source,
            })?;
        let source = staged.path().to_string_lossy().into_owned();
        let out = self.run(
            "write",
            path,
            "mcopy",
            &["-n", "-o", &source, &format!("::/{path}")],
        )?;
        self.check("write", path, out)?;
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<(), EspError> {
        check_path("rename", from)?;
        check_path("rename", to)?;
        if !self.exists(from)? {
            return Err(EspError::NotFound {
                op: "rename",
                path: from.to_owned(),
            });
        }
        if self.exists(to)? {
            self.remove(to)?;
        }
        let out = if parent(from) == parent(to) {
            self.run(
                "rename",
                from,
                "mren",
                &[&format!("::/{from}"), &format!("::/{to}")],
            )?
        } else {
            self.ensure_dirs(to)?;
            self.run(
                "rename",
                from,
                "mmove",
                &[&format!("::/{from}"), &format!("::/{to}")],
            )?
        };
        self.check("rename", from, out)?;
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<(), EspError> {
        check_path("remove", path)?;
        let out = self.run("remove", path, "mdel", &[&format!("::/{path}")])?;
        match self.check("remove", path, out) {
            Ok(_) | Err(EspError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn free_space(&self) -> Result<u64, EspError> {
        let out = self.run("measure free space", "", "mdir", &["-a", "::/"])?;
        let out = self.check("measure free space", "", out)?;
        parse_free(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| EspError::Io {
            op: "measure free space",
            path: String::new(),
            source: std::io::Error::other(format!(
                "no 'bytes free' line in mdir output for {}",
                self.image.display()
            )),
        })
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

/// Parses `mdir -a -f` output: `NAME EXT SIZE|<DIR> DATE TIME [LONG NAME]` per entry.
pub(crate) fn parse_mdir(text: &str) -> Vec<DirEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(date_at) = tokens.iter().position(|t| is_date(t)) else {
            continue;
        };
        if date_at < 2 || tokens.len() < date_at + 2 {
            continue;
        }
        let size_token = tokens[date_at - 1];
        let is_dir = size_token == "<DIR>";
        let size = if is_dir {
            0
        } else {
            size_token.parse().unwrap_or(0)
        };
        let long = tokens[date_at + 2..].join(" ");
        let name = if !long.is_empty() {
            long
        } else if date_at == 3 {
            format!("{}.{}", tokens[0], tokens[1])
        } else {
            tokens[0].to_owned()
        };
        if name == "." || name == ".." {
            continue;
        }
        out.push(DirEntry { name, size, is_dir });
    }
    out
}

fn is_date(token: &str) -> bool {
    let b = token.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && token.bytes().filter(u8::is_ascii_digit).count() == 8
}

/// The dirty bit of a FAT boot sector (FAT32: state byte 0x41; FAT12/16: 0x25), or `None`
/// without the boot signature.
pub(crate) fn fat_dirty(sector: &[u8; 512]) -> Option<bool> {
    if sector[510..512] != [0x55, 0xaa] {
        return None;
    }
    let state = if &sector[0x52..0x5a] == b"FAT32   " {
        sector[0x41]
    } else {
        sector[0x25]
    };
    Some(state & 0x01 != 0)
}

/// The `N N N bytes free` line of `mdir` (digits grouped by spaces).
pub(crate) fn parse_free(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.trim_end().ends_with("bytes free"))?;
    let digits: String = line
        .trim_end()
        .trim_end_matches("bytes free")
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = " Volume in drive : is RP-ESP     \n Volume Serial Number is 3EDD-81BC\nDirectory for ::/loader\n\n\
.            <DIR>     2026-11-21  12:52 \n\
..           <DIR>     2026-11-21  12:52 \n\
a        c           3 2026-11-21  12:52 \n\
X~1      TMP         3 2026-11-21  12:52  .x.tmp\n\
RACKPR~1 CON         3 2026-11-21  12:52  rackproof-1.0.0+3.conf\n\
UPPER    EFI     140891 2026-11-21  12:52 \n\
entries      <DIR>     2026-11-21  12:52 \n\
        6 files                  12 bytes\n                        131 993 088 bytes free\n";

    #[test]
    fn mdir_listings_parse_into_names_sizes_and_directories() {
        let entries = parse_mdir(LISTING);
        let names: Vec<(&str, u64, bool)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.size, e.is_dir))
            .collect();
        assert_eq!(
            names,
            [
                ("a.c", 3, false),
                (".x.tmp", 3, false),
                ("rackproof-1.0.0+3.conf", 3, false),
                ("UPPER.EFI", 140891, false),
                ("entries", 0, true)
            ]
        );
        assert_eq!(parse_free(LISTING), Some(131_993_088));
        assert_eq!(parse_free("no such line"), None);
    }

    #[test]
    fn the_dirty_bit_is_read_from_the_fat32_or_fat16_state_byte() {
        let mut sector = [0u8; 512];
        assert_eq!(fat_dirty(&sector), None);
        sector[510] = 0x55;
        sector[511] = 0xaa;
        assert_eq!(fat_dirty(&sector), Some(false));
        sector[0x25] = 1;
        assert_eq!(fat_dirty(&sector), Some(true));
        sector[0x52..0x5a].copy_from_slice(b"FAT32   ");
        assert_eq!(fat_dirty(&sector), Some(false));
        sector[0x41] = 1;
        assert_eq!(fat_dirty(&sector), Some(true));
        let err = MtoolsEsp::on_disk("/nonexistent/disk.raw")
            .dirty()
            .unwrap_err()
            .to_string();
        assert_eq!(err, "read boot sector /nonexistent/disk.raw@@1048576");
    }

    #[test]
    fn bad_paths_are_refused_before_running_mtools() {
        let esp = MtoolsEsp::on_disk("/nonexistent/disk.raw");
        let err = esp.read("/abs").unwrap_err().to_string();
        assert_eq!(
            err,
            "read /abs: invalid ESP path: must be relative with / separators"
        );
        assert!(esp.read("a/../b").is_err());
    }
}
