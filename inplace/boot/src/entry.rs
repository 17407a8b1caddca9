//! Type #1 entry file contents (`title`, `version`, `sort-key`, `machine-id`, `linux`, `initrd`,
//! `options`, ...), parsed as leniently as systemd-boot 252 reads them and formatted canonically.

use crate::lines::key_values;

/// The architecture name systemd-boot compares `architecture` lines with on x86-64.
pub const EFI_ARCH: &str = "x64";

/// The contents of a boot loader entry file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryConf {
    pub title: Option<String>,
    pub version: Option<String>,
    pub sort_key: Option<String>,
    pub machine_id: Option<String>,
    /// Kernel path on the ESP, as written (`/rackproof/os-2.linux`).
    pub linux: Option<String>,
    /// Initrd paths, in order.
    pub initrd: Vec<String>,
    /// An EFI program to run instead of a kernel.
    pub efi: Option<String>,
    pub devicetree: Option<String>,
    /// `options` lines, in order; the loader joins them with spaces.
    pub options: Vec<String>,
    pub architecture: Option<String>,
    /// Lines the loader ignores, kept so a rewrite loses nothing.
    pub other: Vec<(String, String)>,
}

/// Entry contents that are not text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("read entry {name}: contents are not UTF-8")]
pub struct EntryConfError {
    pub name: String,
}

impl EntryConf {
    /// Parses entry file contents. `name` only labels errors.
    pub fn parse_bytes(name: &str, bytes: &[u8]) -> Result<Self, EntryConfError> {
        let text = std::str::from_utf8(bytes).map_err(|_| EntryConfError {
            name: name.to_owned(),
        })?;
        Ok(Self::parse(text))
    }

    /// Parses entry text; later lines replace earlier ones for single-valued keys, as in the loader.
    pub fn parse(text: &str) -> Self {
        let mut conf = Self::default();
        for kv in key_values(text) {
            let value = kv.value.to_owned();
            match kv.key {
                "title" => conf.title = Some(value),
                "version" => conf.version = Some(value),
                "sort-key" => conf.sort_key = Some(value),
                "machine-id" => conf.machine_id = Some(value),
                "linux" => conf.linux = Some(value),
                "initrd" => conf.initrd.push(value),
                "efi" => conf.efi = Some(value),
                "devicetree" => conf.devicetree = Some(value),
                "options" => conf.options.push(value),
                "architecture" => conf.architecture = Some(value),
                other => conf.other.push((other.to_owned(), value)),
            }
        }
        conf
    }

    /// Canonical text: one `key value` line per field.
    pub fn format(&self) -> String {
        let mut out = String::new();
        let mut line = |key: &str, value: &str| {
            out.push_str(key);
            out.push(' ');
            out.push_str(value);
            out.push('\n');
        };
        let single = [
            ("title", &self.title),
            ("version", &self.version),
            ("sort-key", &self.sort_key),
            ("machine-id", &self.machine_id),
            ("linux", &self.linux),
        ];
        for (key, value) in single {
            if let Some(v) = value {
                line(key, v);
            }
        }
        for v in &self.initrd {
            line("initrd", v);
        }
        for (key, value) in [("efi", &self.efi), ("devicetree", &self.devicetree)] {
            if let Some(v) = value {
                line(key, v);
            }
        }
        for v in &self.options {
            line("options", v);
        }
        if let Some(v) = &self.architecture {
            line("architecture", v);
        }
        for (k, v) in &self.other {
            line(k, v);
        }
        out
    }

    /// The kernel command line the loader passes: every `options` line, joined by spaces.
    pub fn command_line(&self) -> String {
        self.options.join(" ")
    }

    /// The file the loader starts (`linux`, or else `efi`), as an ESP-relative path.
    pub fn loader_path(&self) -> Option<String> {
        self.linux
            .as_deref()
            .or(self.efi.as_deref())
            .map(esp_relative)
    }

    /// Whether the loader lists this entry at all: it names something to start and is not for
    /// another architecture. (Whether that file exists is checked against the ESP.)
    pub fn is_loadable(&self) -> bool {
        if self.architecture.as_deref().is_some_and(|a| a != EFI_ARCH) {
            return false;
        }
        self.linux.is_some() || self.efi.is_some()
    }

    /// Every ESP file this entry needs (kernel or EFI program, initrds, devicetree), ESP-relative.
    pub fn referenced_files(&self) -> Vec<String> {
        self.linux
            .iter()
            .chain(self.efi.iter())
            .chain(self.initrd.iter())
            .chain(self.devicetree.iter())
            .map(|p| esp_relative(p))
            .collect()
    }
}

/// `/rackproof/a.linux` or `\rackproof\a.linux` → `rackproof/a.linux`.
pub fn esp_relative(path: &str) -> String {
    path.replace('\\', "/").trim_start_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EntryConf {
        EntryConf {
            title: Some("Rackproof OS 1.2.0".into()),
            version: Some("1.2.0".into()),
            sort_key: Some("rackproof".into()),
            machine_id: Some("0123456789abcdef0123456789abcdef".into()),
            linux: Some("/rackproof/os-1.2.0.linux".into()),
            initrd: vec!["/rackproof/os-1.2.0.initrd".into()],
            options: vec!["console=ttyS0".into(), "quiet".into()],
            ..EntryConf::default()
        }
    }

    #[test]
    fn format_then_parse_round_trips() {
        let conf = sample();
        assert_eq!(EntryConf::parse(&conf.format()), conf);
        assert_eq!(conf.command_line(), "console=ttyS0 quiet");
        assert_eq!(
            conf.referenced_files(),
            ["rackproof/os-1.2.0.linux", "rackproof/os-1.2.0.initrd"]
        );
    }

    #[test]
    fn later_lines_win_and_unknown_lines_are_kept() {
        let conf = EntryConf::parse("title a\ntitle b\nlinux \\EFI\\k\nfoo bar\n");
        assert_eq!(conf.title.as_deref(), Some("b"));
        assert_eq!(conf.loader_path().as_deref(), Some("EFI/k"));
        assert_eq!(conf.other, [("foo".to_owned(), "bar".to_owned())]);
        assert!(EntryConf::parse(&conf.format()) == conf);
    }

    #[test]
    fn loadability() {
        assert!(sample().is_loadable());
        assert!(!EntryConf::parse("title x\n").is_loadable());
        assert!(!EntryConf::parse("efi /x.efi\narchitecture aa64\n").is_loadable());
        assert!(EntryConf::parse("efi /x.efi\narchitecture x64\n").is_loadable());
    }

    #[test]
    fn non_utf8_is_an_error() {
        let err = EntryConf::parse_bytes("os.conf", &[0xff, 0xfe]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "read entry os.conf: contents are not UTF-8"
        );
    }
}
