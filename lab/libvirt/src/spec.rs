//! What a libvirt lab node is made of, as plain data: the machine configuration a caller fills in,
//! and the validated [`DomainSpec`] it turns into (which [`crate::xml`] renders as domain XML).

use std::path::{Path, PathBuf};

/// The libvirt URI of the local system QEMU driver.
pub const DEFAULT_URI: &str = "qemu:///system";
/// The default prefix of every domain name Rackproof defines; teardown of leftovers matches on it.
pub const DEFAULT_NAME_PREFIX: &str = "rackproof-";
/// Debian's OVMF code for 4 MiB flash (the 2 MiB code with the 4 MiB vars hangs).
pub const OVMF_CODE_4M: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
/// Debian's OVMF variable store template for 4 MiB flash; every node gets its own copy.
pub const OVMF_VARS_4M: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";
/// The fw_cfg name under which the guest finds its identity file.
pub const IDENTITY_FW_CFG_NAME: &str = "opt/rackproof/identity";

/// File names inside a node's directory.
pub(crate) const NVRAM_FILE: &str = "OVMF_VARS_4M.fd";
pub(crate) const SERIAL_LOG_FILE: &str = "serial.log";

/// The firmware a node boots: OVMF's read-only code and the template of its variable store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firmware {
    pub code: PathBuf,
    pub vars_template: PathBuf,
}

impl Default for Firmware {
    fn default() -> Self {
        Self {
            code: PathBuf::from(OVMF_CODE_4M),
            vars_template: PathBuf::from(OVMF_VARS_4M),
        }
    }
}

/// Which device the firmware tries first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BootOrder {
    /// The disk, then the network (the lab's normal order: the ESP and systemd-boot).
    #[default]
    DiskFirst,
    /// The network (UEFI PXE), then the disk.
    NetworkFirst,
}

/// One libvirt lab node as the caller describes it.
///
/// Paths refer to the host that runs the domain: with a remote URI (`qemu+ssh://host/system`) the
/// disk, the directory and the identity file must exist there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineConfig {
    /// libvirt connection URI, e.g. `qemu:///system` or `qemu+ssh://lab2/system`.
    pub uri: String,
    /// Prefix of the domain name; [`crate::machine`]'s prefix teardown removes exactly these.
    pub name_prefix: String,
    /// The node name; the domain is `name_prefix + node`.
    pub node: String,
    /// The node's own directory (NVRAM copy, serial log). Created if missing, removed on teardown.
    /// libvirt's QEMU runs as `libvirt-qemu`: every parent directory must be traversable by it.
    pub dir: PathBuf,
    /// The node's disk image (qcow2, usually an overlay on a built image). Not removed on teardown
    /// unless it lies inside `dir`.
    pub disk: PathBuf,
    /// A file handed to the guest through fw_cfg as [`IDENTITY_FW_CFG_NAME`].
    pub identity: Option<PathBuf>,
    /// Host port on 127.0.0.1 forwarded to the guest's SSH port 22.
    pub ssh_port: Option<u16>,
    pub memory_mib: u32,
    pub vcpus: u32,
    /// TCG translation block cache (`-accel tcg,tb-size=…`); without a bound QEMU grows per reboot.
    pub tb_size_mib: u32,
    pub firmware: Firmware,
}

impl MachineConfig {
    /// A node with the lab defaults: local system URI, `rackproof-` prefix, 256 MiB, one vCPU,
    /// `tb-size=64`, Debian's 4M OVMF, no identity, no SSH forward.
    pub fn new(node: &str, dir: impl Into<PathBuf>, disk: impl Into<PathBuf>) -> Self {
        Self {
            uri: DEFAULT_URI.to_owned(),
            name_prefix: DEFAULT_NAME_PREFIX.to_owned(),
            node: node.to_owned(),
            dir: dir.into(),
            disk: disk.into(),
            identity: None,
            ssh_port: None,
            memory_mib: 256,
            vcpus: 1,
            tb_size_mib: 64,
            firmware: Firmware::default(),
        }
    }

    /// The libvirt domain name: prefix + node, both checked.
    pub fn domain_name(&self) -> Result<String, SpecError> {
        check_name_part("name prefix", &self.name_prefix, true)?;
        check_name_part("node name", &self.node, false)?;
        Ok(format!("{}{}", self.name_prefix, self.node))
    }

    /// Where the node's copy of the OVMF variable store lives.
    pub fn nvram_path(&self) -> PathBuf {
        self.dir.join(NVRAM_FILE)
    }

    /// Where the node's first serial port is logged (appended across power cycles).
    pub fn serial_log_path(&self) -> PathBuf {
        self.dir.join(SERIAL_LOG_FILE)
    }

    /// The domain this configuration describes, with the given boot order and (once known) UUID.
    pub fn domain_spec(
        &self,
        uuid: Option<&str>,
        boot_order: BootOrder,
    ) -> Result<DomainSpec, SpecError> {
        let name = self.domain_name()?;
        if let Some(uuid) = uuid {
            check_uuid(uuid)?;
        }
        if self.memory_mib < 64 {
            return Err(SpecError::Invalid {
                node: self.node.clone(),
                what: format!("memory {} MiB is below 64 MiB", self.memory_mib),
            });
        }
        if self.vcpus == 0 || self.tb_size_mib == 0 {
            return Err(SpecError::Invalid {
                node: self.node.clone(),
                what: "vcpus and tb-size must be at least 1".to_owned(),
            });
        }
        if self.ssh_port == Some(0) {
            return Err(SpecError::Invalid {
                node: self.node.clone(),
                what: "ssh port 0 cannot be forwarded".to_owned(),
            });
        }
        let paths = [
            ("directory", Some(&self.dir)),
            ("disk", Some(&self.disk)),
            ("identity file", self.identity.as_ref()),
            ("OVMF code", Some(&self.firmware.code)),
            ("OVMF vars template", Some(&self.firmware.vars_template)),
        ];
        for (what, path) in paths {
            if let Some(path) = path {
                check_path(&self.node, what, path)?;
            }
        }
        Ok(DomainSpec {
            name,
            uuid: uuid.map(str::to_owned),
            memory_mib: self.memory_mib,
            vcpus: self.vcpus,
            tb_size_mib: self.tb_size_mib,
            ovmf_code: self.firmware.code.clone(),
            ovmf_vars_template: self.firmware.vars_template.clone(),
            nvram: self.nvram_path(),
            disk: self.disk.clone(),
            serial_log: self.serial_log_path(),
            identity: self.identity.clone(),
            ssh_port: self.ssh_port,
            boot_order,
            dir: self.dir.clone(),
            owner: rackproof_reap::owner_line().map(|line| line.trim().to_owned()),
        })
    }
}

/// A validated domain, ready to render as XML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSpec {
    pub name: String,
    pub uuid: Option<String>,
    pub memory_mib: u32,
    pub vcpus: u32,
    pub tb_size_mib: u32,
    pub ovmf_code: PathBuf,
    pub ovmf_vars_template: PathBuf,
    pub nvram: PathBuf,
    pub disk: PathBuf,
    pub serial_log: PathBuf,
    pub identity: Option<PathBuf>,
    pub ssh_port: Option<u16>,
    pub boot_order: BootOrder,
    /// The node's directory (NVRAM copy, serial log), removed with the domain by a sweep.
    pub dir: PathBuf,
    /// The process that defines the domain, as `PID STARTTIME` ([`rackproof_reap::owner_line`]):
    /// a domain whose owner is gone is a killed run's leftover
    /// ([`sweep_orphans`](crate::machine::sweep_orphans)).
    pub owner: Option<String>,
}

/// A machine configuration that cannot become a domain.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("invalid {what} {value:?}: use 1-64 of a-z, A-Z, 0-9, '-', '_', '.'{extra}")]
    BadName {
        what: &'static str,
        value: String,
        extra: &'static str,
    },
    #[error("invalid domain uuid {0:?}")]
    BadUuid(String),
    #[error("node {node}: {what} path {path} must be absolute and valid UTF-8 without commas")]
    BadPath {
        node: String,
        what: &'static str,
        path: PathBuf,
    },
    #[error("node {node}: {what}")]
    Invalid { node: String, what: String },
}

fn check_name_part(what: &'static str, value: &str, may_be_empty: bool) -> Result<(), SpecError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ok = (may_be_empty || !value.is_empty()) && value.len() <= 64 && value.chars().all(ok_char);
    if ok {
        Ok(())
    } else {
        let extra = if may_be_empty { "" } else { "; not empty" };
        Err(SpecError::BadName {
            what,
            value: value.to_owned(),
            extra,
        })
    }
}

fn check_uuid(uuid: &str) -> Result<(), SpecError> {
    let groups: Vec<&str> = uuid.split('-').collect();
    let lengths_ok = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]);
    if lengths_ok
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
    {
        Ok(())
    } else {
        Err(SpecError::BadUuid(uuid.to_owned()))
    }
}

/// Paths go into XML (escaped) and some into QEMU option strings, where a comma would split them.
fn check_path(node: &str, what: &'static str, path: &Path) -> Result<(), SpecError> {
    match path.to_str() {
        Some(s) if path.is_absolute() && !s.contains(',') => Ok(()),
        _ => Err(SpecError::BadPath {
            node: node.to_owned(),
            what,
            path: path.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MachineConfig {
        MachineConfig::new(
            "node-1",
            "/var/lib/rp/node-1",
            "/var/lib/rp/node-1/disk.qcow2",
        )
    }

    #[test]
    fn domain_name_is_prefix_plus_node() {
        let mut c = config();
        assert_eq!(c.domain_name().unwrap(), "rackproof-node-1");
        c.name_prefix = "rackproof-run7-".to_owned();
        assert_eq!(c.domain_name().unwrap(), "rackproof-run7-node-1");
    }

    #[test]
    fn bad_names_are_refused_with_the_value() {
        let mut c = config();
        c.node = "a/b".to_owned();
        let err = c.domain_name().unwrap_err().to_string();
        assert!(err.starts_with("invalid node name \"a/b\""), "{err}");
        c.node = String::new();
        assert!(c.domain_name().is_err());
        c.node = "ok".to_owned();
        c.name_prefix = "x y".to_owned();
        assert!(
            c.domain_name()
                .unwrap_err()
                .to_string()
                .contains("name prefix")
        );
    }

    #[test]
    fn spec_carries_the_node_files_and_defaults() {
        let spec = config().domain_spec(None, BootOrder::DiskFirst).unwrap();
        assert_eq!(spec.memory_mib, 256);
        assert_eq!(spec.tb_size_mib, 64);
        assert_eq!(spec.nvram, Path::new("/var/lib/rp/node-1/OVMF_VARS_4M.fd"));
        assert_eq!(spec.serial_log, Path::new("/var/lib/rp/node-1/serial.log"));
        assert_eq!(spec.ovmf_code, Path::new(OVMF_CODE_4M));
    }

    #[test]
    fn relative_or_comma_paths_and_bad_uuids_are_refused() {
        let mut c = config();
        c.disk = PathBuf::from("disk.qcow2");
        let err = c
            .domain_spec(None, BootOrder::DiskFirst)
            .unwrap_err()
            .to_string();
        assert!(err.contains("node node-1: disk path disk.qcow2"), "{err}");
        let mut c = config();
        c.identity = Some(PathBuf::from("/tmp/a,b"));
        assert!(c.domain_spec(None, BootOrder::DiskFirst).is_err());
        assert!(
            config()
                .domain_spec(Some("not-a-uuid"), BootOrder::DiskFirst)
                .is_err()
        );
        assert!(
            config()
                .domain_spec(
                    Some("b6d8b8f6-ed73-4160-b112-1c23e55782ce"),
                    BootOrder::DiskFirst
                )
                .is_ok()
        );
    }

    #[test]
    fn too_little_memory_and_port_zero_are_refused() {
        let mut c = config();
        c.memory_mib = 16;
        assert!(
            c.domain_spec(None, BootOrder::DiskFirst)
                .unwrap_err()
                .to_string()
                .contains("below 64 MiB")
        );
        let mut c = config();
        c.ssh_port = Some(0);
        assert!(c.domain_spec(None, BootOrder::DiskFirst).is_err());
    }
}
