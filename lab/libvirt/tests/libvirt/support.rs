//! A workspace per test (a directory libvirt's QEMU user can traverse, a name prefix), defining
//! machines, and looking at what runs.

pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::time::Duration;

pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
pub(crate) use rackproof_libvirt::{
    LibvirtMachine, MachineConfig, MachineError, sweep_orphans, teardown_prefix,
};
use rackproof_std::error_chain;
pub(crate) use rackproof_test_support::processes::processes_mentioning;

pub(crate) const URI: &str = "qemu:///system";
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
pub(crate) const STATE_TIMEOUT: Duration = Duration::from_secs(60);

/// A directory libvirt's QEMU user can traverse, removed at the end of the test.
pub(crate) struct Workspace {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) prefix: String,
}

impl Workspace {
    pub(crate) fn new(test: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rackproof-libvirt-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let prefix = format!("rackproof-t{}-{test}-", std::process::id());
        Self { dir, prefix }
    }

    /// A node config with an empty 64 MiB qcow2 disk inside the node's directory.
    pub(crate) fn node(&self, node: &str) -> MachineConfig {
        let node_dir = self.dir.path().join(node);
        std::fs::create_dir_all(&node_dir).unwrap();
        let disk = node_dir.join("disk.qcow2");
        let out = std::process::Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2"])
            .arg(&disk)
            .arg("64M")
            .output()
            .unwrap_or_else(|e| {
                panic!("qemu-img is missing ({e}); install it with: apt-get install -y qemu-utils")
            });
        assert!(
            out.status.success(),
            "qemu-img create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut config = MachineConfig::new(node, &node_dir, disk);
        config.uri = URI.to_owned();
        config.name_prefix = self.prefix.clone();
        config
    }
}

/// Defines the machine or fails saying how to get libvirt running.
pub(crate) async fn define(config: MachineConfig) -> LibvirtMachine {
    match LibvirtMachine::define(config, Clock::wall()).await {
        Ok(m) => m,
        Err(e @ MachineError::Connect { .. }) => panic!(
            "{}\nlibvirtd is not answering on {URI}: install and start it with `ci/start-libvirtd` \
             (apt-get install -y libvirt-daemon-system libvirt-dev pkg-config tini qemu-system-x86 ovmf qemu-utils)",
            error_chain(&e)
        ),
        Err(e) => panic!("{}", error_chain(&e)),
    }
}

/// PIDs of the processes in process group `pgid`.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces, so split after its ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // Zombies have exited; only the reaper (PID 1 here, which is slow) still has to collect them.
        let zombie = fields.first() == Some(&"Z");
        if !zombie && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            pids.push(pid);
        }
    }
    pids
}

pub(crate) async fn assert_gone(prefix: &str, name: &str, dir: &Path) {
    let leftovers = teardown_prefix(URI, prefix).await.unwrap();
    assert!(leftovers.is_empty(), "domains left behind: {leftovers:?}");
    let guests = processes_mentioning(&format!("guest={name}"));
    assert!(
        guests.is_empty(),
        "a QEMU process of {name} is still running: {guests:?}"
    );
    assert!(
        !dir.exists(),
        "node directory {} is still there",
        dir.display()
    );
}

pub(crate) fn bds() -> regex::Regex {
    regex::Regex::new("BdsDxe: ").unwrap()
}
