//! Helpers shared by the real-guest tests: the images, nodes whose directory survives a failed
//! test, console markers, and inplace-boot's model of the ESP.

mod bless;
mod boot;
mod variants;

use std::path::{Path, PathBuf};
use std::time::Duration;

use inplace_boot::{BootRecord, Esp, LoaderVars, MemEsp};
use rackproof_clock::Clock;
use rackproof_driver::{Power, PowerState, ResetAction};
use rackproof_qemu::images::BASE_VERSION;
use rackproof_qemu::{Mark, NodeIdentity, QemuConfig, QemuMachine};
use rackproof_test_support::workspace_root;
use regex::Regex;

/// One boot through UEFI, systemd-boot and the kernel to the init marker, with room for a
/// loaded CI machine.
pub(crate) const BOOT: Duration = Duration::from_secs(120);

pub(crate) fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap()
}

/// A console marker of the node OS: `rackproof-os VERSION: WHAT`.
pub(crate) fn marker(version: &str, what: &str) -> Regex {
    re(&format!("^rackproof-os {}: {what}", regex::escape(version)))
}

/// The init marker of any version (one per boot that reached the initramfs).
pub(crate) fn any_init() -> Regex {
    re(r"^rackproof-os \S+: init started")
}

/// The agent's start line.
pub(crate) fn agent_started() -> Regex {
    re(r"^rackproof-agent: started")
}

/// A node whose directory survives a failed test.
pub(crate) struct Node {
    pub(crate) machine: QemuMachine,
    pub(crate) clock: Clock,
    pub(crate) dir: PathBuf,
}

impl Node {
    pub(crate) fn new(test: &str, disk: &Path) -> Self {
        Self::with_identity(test, disk, None)
    }

    pub(crate) fn with_identity(test: &str, disk: &Path, identity: Option<NodeIdentity>) -> Self {
        let dir = workspace_root().join("target/qemu-artifacts").join(test);
        let _ = std::fs::remove_dir_all(&dir);
        let mut config = QemuConfig::new(test, disk);
        if let Some(identity) = identity {
            config.identity = identity;
        }
        config.work_dir = Some(dir.clone());
        let clock = Clock::wall();
        let machine = QemuMachine::create(config, clock.clone()).unwrap();
        Self {
            machine,
            clock,
            dir,
        }
    }

    pub(crate) async fn wait(&self, mark: Mark, pattern: &Regex) -> String {
        self.wait_boots(mark, pattern, 1).await
    }

    /// Waits for `pattern` allowing `boots` boots' time.
    pub(crate) async fn wait_boots(&self, mark: Mark, pattern: &Regex, boots: u32) -> String {
        match self
            .machine
            .console()
            .wait_for_since(&self.clock, mark, pattern, BOOT * boots)
            .await
        {
            Ok(line) => line.text,
            Err(e) => panic!("{e}; artifacts in {}", self.dir.display()),
        }
    }

    /// Presses the power button and waits until the guest has powered itself off.
    pub(crate) async fn power_button(&self, version: &str) {
        let mark = self.machine.console().mark();
        self.machine
            .reset(ResetAction::GracefulShutdown)
            .await
            .unwrap();
        self.wait(mark, &marker(version, "powering off")).await;
        if let Err(e) = self.machine.wait_off(BOOT).await {
            panic!("{e}; artifacts in {}", self.dir.display());
        }
        assert_eq!(self.machine.power_state().await.unwrap(), PowerState::Off);
    }

    /// Powers off, checks the process is gone, and removes the artifacts (the test passed).
    pub(crate) async fn finish(self) {
        self.machine.reset(ResetAction::ForceOff).await.unwrap();
        assert_eq!(self.machine.power_state().await.unwrap(), PowerState::Off);
        let dir = self.dir.clone();
        drop(self.machine);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Entry file names on an ESP, sorted.
pub(crate) fn entries(esp: &dyn Esp) -> Vec<String> {
    let mut names: Vec<String> = inplace_boot::entry_files(esp)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n.file_name().to_owned())
        .collect();
    names.sort();
    names
}

/// The loader's files of a real ESP, copied into a model ESP.
pub(crate) fn model_of(esp: &dyn Esp) -> MemEsp {
    let model = MemEsp::new(1 << 30);
    for dir in ["loader", "loader/entries", "rackproof"] {
        for item in esp.list(dir).unwrap() {
            if !item.is_dir {
                let path = format!("{dir}/{}", item.name);
                model.write_file(&path, &esp.read(&path).unwrap()).unwrap();
            }
        }
    }
    model
}

/// Boots the model `boots` times (inplace-boot's systemd-boot 252), returning what each boot
/// selected.
pub(crate) fn boot_model(model: &MemEsp, boots: usize) -> Vec<BootRecord> {
    let mut vars = LoaderVars::default();
    (0..boots)
        .map(|_| {
            inplace_boot::boot(model, &mut vars)
                .unwrap()
                .expect("an entry to boot")
        })
        .collect()
}

/// What the ESP looks like after `boots` boots, per the model.
pub(crate) fn predict(model: &MemEsp, boots: usize) -> Vec<String> {
    boot_model(model, boots);
    entries(model)
}

/// Blessed entry file name of a version.
pub(crate) fn blessed(version: &str) -> String {
    format!("rackproof-{version}.conf")
}

/// The installed version's entry, blessed.
pub(crate) fn base_blessed() -> String {
    blessed(BASE_VERSION)
}
