//! One QEMU node: a per-node directory (disk copy, OVMF vars copy, identity, QMP socket, serial
//! and QEMU logs), the QEMU process started and stopped for power actions, and the driver traits.
//!
//! Power model (a BMC's view of a VM):
//! 1. `On` starts QEMU (paused with `-S`, QMP connected, then `cont`, so no event or console line
//!    is missed), or `cont`s a paused guest; nothing to do when running.
//! 2. `ForceOff` sends QMP `quit`, waits for the process, then SIGKILLs it; the disk and vars stay.
//! 3. `ForceRestart` is `system_reset`; `GracefulShutdown` is `system_powerdown` (ACPI button);
//!    `GracefulRestart` is Ctrl-Alt-Del (`send-key`); `Nmi` is `inject-nmi`; `PowerCycle` is
//!    `ForceOff` then `On`. The images' init acts on both graceful requests once it has started
//!    acpid (stops its services, unmounts the ESP and state partition, then powers off or
//!    reboots); a request sent while firmware or the kernel is still starting is lost, as on
//!    real hardware.
//! 4. A guest that powers itself off ends the QEMU process: the state reads `Off`.
//! 5. Dropping the machine SIGKILLs QEMU (`kill_on_drop`) and removes the node directory unless a
//!    work directory was given; [`QemuMachine::shutdown`] does the orderly `quit` first. A
//!    temporary node directory names its owning process, and the next machine to start removes
//!    those whose owner is gone (killed before it could clean up). QEMU itself dies with the
//!    thread that started it (`rackproof_reap::dying_with_parent`; machines are started from
//!    async tasks, so from runtime threads) and is listed in the process's record of children
//!    for the next run's sweep (`rackproof_reap`).
//!
//! Guests run on TCG with a bounded translation cache (without a bound QEMU grows it per reboot).
//! Not KVM, even where `/dev/kvm` opens: on this project's CI machines (nested virtualisation)
//! OVMF stops with a KVM "emulation failure" in its first instructions.
//!
//! Boots are counted by reason: one per process start, one per `system_reset` we send (some
//! firmwares report two `RESET` events for one), one per guest-initiated reset (`guest-reset`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use async_trait::async_trait;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_std::LockExt;
use serde_json::json;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use crate::console::Console;
use crate::identity::{FW_CFG_NAME, NodeIdentity};
use crate::mtools::MtoolsEsp;
use crate::prereq::Prerequisites;
use crate::qmp::{Qmp, QmpError, QmpEvent};

mod driver;
#[cfg(test)]
mod tests;

/// How long QEMU may take to open its QMP socket.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `quit` may take before SIGKILL.
const QUIT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a QEMU node is made of.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    /// Node name (logs, errors, QEMU's `-name`).
    pub name: String,
    /// A raw disk image built by `images/build-disk`; the node works on its own copy.
    pub disk: PathBuf,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Handed to the guest through fw_cfg.
    pub identity: NodeIdentity,
    /// Keep the node's files here (created if needed) instead of a temporary directory removed
    /// on drop; for artifacts of failed tests.
    pub work_dir: Option<PathBuf>,
}

impl QemuConfig {
    /// A node with 256 MiB and a minimal identity (name only).
    pub fn new(name: &str, disk: impl Into<PathBuf>) -> Self {
        Self {
            name: name.to_owned(),
            disk: disk.into(),
            memory_mib: 256,
            identity: NodeIdentity {
                node: name.to_owned(),
                ..NodeIdentity::default()
            },
            work_dir: None,
        }
    }
}

/// Booting a kernel directly (QEMU's `-kernel`, `-initrd`, `-append`) instead of the disk through
/// firmware and boot loader: SeaBIOS loads the kernel, no OVMF, no systemd-boot, no boot counting.
/// The disk is still attached, so the slot's init finds its ESP and state partition. For
/// measuring what firmware and boot loader cost (the `qemu-boot` benchmark).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectBoot {
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    /// The kernel command line.
    pub append: String,
}

impl DirectBoot {
    /// A slot's kernel and initrd with the command line its boot entry carries.
    pub fn of_slot(slot: &crate::slot::Slot) -> Self {
        Self {
            kernel: slot.dir.join(&slot.linux),
            initrd: slot.initrd.as_ref().map(|name| slot.dir.join(name)),
            append: slot.entry_conf().options.join(" "),
        }
    }
}

/// Setting up a node failed.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    #[error(transparent)]
    Missing(#[from] crate::prereq::MissingPrerequisite),
    #[error("prepare node {node}: {what} {path}")]
    Io {
        node: String,
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
}

#[derive(Debug)]
enum NodeDir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl NodeDir {
    fn path(&self) -> &Path {
        match self {
            Self::Temp(t) => t.path(),
            Self::Kept(p) => p,
        }
    }
}

#[derive(Debug)]
struct Running {
    child: Child,
    qmp: Qmp,
    /// Events seen by earlier QMP sessions of this node are in `State::past_events`.
    resets_sent: u64,
}

#[derive(Debug, Default)]
struct State {
    running: Option<Running>,
    starts: u64,
    resets_sent: u64,
    past_events: Vec<QmpEvent>,
}

/// A QEMU node. Implements [`Power`] and [`BootControl`].
#[derive(Debug)]
pub struct QemuMachine {
    config: QemuConfig,
    prereq: Prerequisites,
    clock: Clock,
    dir: NodeDir,
    console: Console,
    ssh_port: u16,
    state: Mutex<State>,
    boot_override: StdMutex<BootOverride>,
    direct: Option<DirectBoot>,
}

impl QemuMachine {
    /// Prepares the node directory (disk and vars copies, identity file) without starting QEMU.
    pub fn create(config: QemuConfig, clock: Clock) -> Result<Self, QemuError> {
        Self::prepare(config, clock, None)
    }

    /// [`QemuMachine::create`] for a node that boots `boot` directly, without firmware and boot
    /// loader (see [`DirectBoot`]).
    pub fn create_direct(
        config: QemuConfig,
        clock: Clock,
        boot: DirectBoot,
    ) -> Result<Self, QemuError> {
        Self::prepare(config, clock, Some(boot))
    }

    fn prepare(
        config: QemuConfig,
        clock: Clock,
        direct: Option<DirectBoot>,
    ) -> Result<Self, QemuError> {
        let prereq = Prerequisites::find()?;
        let node = config.name.clone();
        let io = |what, path: &Path| {
            let node = node.clone();
            let path = path.to_owned();
            move |source| QemuError::Io {
                node,
                what,
                path,
                source,
            }
        };
        let dir = match &config.work_dir {
            Some(p) => {
                std::fs::create_dir_all(p).map_err(io("create work directory", p))?;
                NodeDir::Kept(p.clone())
            }
            None => {
                let temp = std::env::temp_dir();
                let swept = rackproof_reap::sweep_dirs(&temp, TEMP_PREFIX);
                if swept > 0 {
                    tracing::info!(count = swept, dir = %temp.display(), "removed node directories of QEMU machines whose process is gone");
                }
                let dir =
                    rackproof_reap::owned_tempdir(&format!("{TEMP_PREFIX}{}-", sanitize(&node)))
                        .map_err(io("create temporary directory in", &temp))?;
                NodeDir::Temp(dir)
            }
        };
        let root = dir.path().to_owned();
        std::fs::copy(&config.disk, root.join("disk.raw"))
            .map_err(io("copy disk", &config.disk))?;
        std::fs::copy(&prereq.ovmf_vars, root.join("vars.fd"))
            .map_err(io("copy OVMF vars", &prereq.ovmf_vars))?;
        let identity = config.identity.render()?;
        std::fs::write(root.join("identity"), identity)
            .map_err(io("write identity", &root.join("identity")))?;
        let ssh_port = rackproof_std::free_tcp_port()
            .map_err(io("pick a free port on", Path::new("127.0.0.1")))?;
        let console = Console::new(&node, root.join("serial.log"));
        Ok(Self {
            config,
            prereq,
            clock,
            dir,
            console,
            ssh_port,
            state: Mutex::new(State::default()),
            boot_override: StdMutex::new(BootOverride::default()),
            direct,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The serial console (spans every QEMU process of this node).
    pub fn console(&self) -> &Console {
        &self.console
    }

    /// The node's directory (disk, vars, logs, QMP socket).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The node's own disk image.
    pub fn disk_path(&self) -> PathBuf {
        self.dir().join("disk.raw")
    }

    /// The ESP on the node's disk. Only consistent while QEMU is not running.
    pub fn esp(&self) -> MtoolsEsp {
        MtoolsEsp::on_disk(self.disk_path())
    }

    /// QEMU's own stderr.
    pub fn qemu_log(&self) -> PathBuf {
        self.dir().join("qemu.log")
    }

    /// The loopback port forwarded to the guest's SSH port 22.
    pub fn ssh_port(&self) -> u16 {
        self.ssh_port
    }

    /// Boots so far, counted by reason (see the module docs).
    pub async fn boots(&self) -> u64 {
        let state = self.state.lock().await;
        let guest_resets = self
            .all_events(&state)
            .iter()
            .filter(|e| e.event == "RESET" && e.reason() == Some("guest-reset"))
            .count();
        let running_resets = state.running.as_ref().map_or(0, |r| r.resets_sent);
        state.starts + state.resets_sent + running_resets + guest_resets as u64
    }

    /// Every QMP event of every QEMU process of this node, in order.
    pub async fn events(&self) -> Vec<QmpEvent> {
        let state = self.state.lock().await;
        self.all_events(&state)
    }

    fn all_events(&self, state: &State) -> Vec<QmpEvent> {
        let mut all = state.past_events.clone();
        if let Some(r) = &state.running {
            all.extend(r.qmp.events());
        }
        all
    }

    /// Runs a QMP command on the running QEMU.
    pub async fn qmp(
        &self,
        command: &str,
        arguments: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, DriverError> {
        let mut state = self.state.lock().await;
        self.reap(&mut state);
        let Some(running) = state.running.as_ref() else {
            return Err(self.refused(command, "powered off"));
        };
        running
            .qmp
            .execute(command, arguments)
            .await
            .map_err(|e| self.failed(e))
    }

    /// Connects or disconnects the NIC (`set_link`).
    pub async fn set_link(&self, up: bool) -> Result<(), DriverError> {
        self.qmp("set_link", Some(json!({ "name": "net0", "up": up })))
            .await
            .map(|_| ())
    }

    /// Pauses the guest's CPUs (`stop`); `On` resumes them.
    pub async fn pause(&self) -> Result<(), DriverError> {
        self.qmp("stop", None).await.map(|_| ())
    }

    /// Replaces the identity the guest reads from the next power-on (a machine handed to another
    /// Machine object). Refused while QEMU runs.
    pub async fn set_identity(&self, identity: &NodeIdentity) -> Result<(), DriverError> {
        let mut state = self.state.lock().await;
        self.reap(&mut state);
        if state.running.is_some() {
            return Err(self.refused("set identity", "powered on"));
        }
        let text = identity.render().map_err(|e| self.failed(e))?;
        std::fs::write(self.dir().join("identity"), text).map_err(|e| self.failed(e))
    }

    /// Replaces the node's disk with a fresh copy of `disk` (reprovisioning: a new machine gets
    /// a newly imaged disk). Refused while QEMU runs.
    pub async fn reimage(&self, disk: &Path) -> Result<(), DriverError> {
        let mut state = self.state.lock().await;
        self.reap(&mut state);
        if state.running.is_some() {
            return Err(self.refused("reimage", "powered on"));
        }
        std::fs::copy(disk, self.disk_path())
            .map(|_| ())
            .map_err(|e| self.failed(e))
    }

    /// Waits until the QEMU process has exited by itself (a guest that powered off), for at most
    /// `timeout` on the node's clock.
    pub async fn wait_off(&self, timeout: Duration) -> Result<(), DriverError> {
        let deadline = self.clock.instant() + timeout;
        loop {
            {
                let mut state = self.state.lock().await;
                self.reap(&mut state);
                if state.running.is_none() {
                    return Ok(());
                }
            }
            if self.clock.instant() >= deadline {
                return Err(DriverError::Timeout {
                    target: self.target(),
                    what: "guest power-off".into(),
                    after: timeout,
                });
            }
            self.clock.sleep(Duration::from_millis(200)).await;
        }
    }

    /// Orderly teardown: QMP `quit`, then SIGKILL if QEMU lingers.
    pub async fn shutdown(&self) -> Result<(), DriverError> {
        let mut state = self.state.lock().await;
        self.stop(&mut state).await
    }

    fn args(&self) -> Vec<String> {
        let root = self.dir();
        let p = |name: &str| root.join(name).display().to_string();
        let mut args: Vec<String> = vec![
            "-name".into(),
            sanitize(&self.config.name),
            "-machine".into(),
            "q35".into(),
            "-accel".into(),
            "tcg,tb-size=64".into(),
            "-m".into(),
            self.config.memory_mib.to_string(),
            "-smp".into(),
            "1".into(),
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
        ];
        match &self.direct {
            None => args.extend([
                "-drive".into(),
                format!(
                    "if=pflash,format=raw,unit=0,readonly=on,file={}",
                    self.prereq.ovmf_code.display()
                ),
                "-drive".into(),
                format!("if=pflash,format=raw,unit=1,file={}", p("vars.fd")),
            ]),
            Some(boot) => {
                args.extend([
                    "-kernel".into(),
                    boot.kernel.display().to_string(),
                    "-append".into(),
                    boot.append.clone(),
                ]);
                if let Some(initrd) = &boot.initrd {
                    args.extend(["-initrd".into(), initrd.display().to_string()]);
                }
            }
        }
        args.extend([
            "-drive".into(),
            format!("if=none,id=disk0,format=raw,file={}", p("disk.raw")),
            "-device".into(),
            // With -kernel, QEMU's linuxboot option ROM takes boot index 0.
            if self.direct.is_some() {
                "virtio-blk-pci,drive=disk0".into()
            } else {
                "virtio-blk-pci,drive=disk0,bootindex=0".into()
            },
            "-netdev".into(),
            format!("user,id=net0,hostfwd=tcp:127.0.0.1:{}-:22", self.ssh_port),
            "-device".into(),
            "virtio-net-pci,netdev=net0,romfile=".into(),
            "-chardev".into(),
            "stdio,id=ser0,signal=off".into(),
            "-serial".into(),
            "chardev:ser0".into(),
            "-qmp".into(),
            format!("unix:{},server=on,wait=off", p("qmp.sock")),
            "-fw_cfg".into(),
            format!("name={FW_CFG_NAME},file={}", p("identity")),
            "-S".into(),
        ]);
        args
    }

    async fn start(&self, state: &mut State) -> Result<(), DriverError> {
        let sock = self.dir().join("qmp.sock");
        let _ = std::fs::remove_file(&sock);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.qemu_log())
            .map_err(|e| self.failed(e))?;
        let mut child = Command::from(rackproof_reap::dying_with_parent(&self.prereq.qemu))
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.failed(e))?;
        if let (Some(record), Some(pid)) = (rackproof_reap::record(), child.id()) {
            record.add(pid);
        }
        if let Some(out) = child.stdout.take() {
            tokio::spawn(self.console.clone().capture(out));
        }
        let deadline = self.clock.instant() + START_TIMEOUT;
        let qmp = loop {
            if sock.exists() {
                match Qmp::connect(&sock, self.clock.clone()).await {
                    Ok(q) => break q,
                    Err(QmpError::Connect { .. }) => {}
                    Err(e) => return Err(self.failed(e)),
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                let tail = std::fs::read_to_string(self.qemu_log()).unwrap_or_default();
                return Err(
                    self.failed_msg(format!("QEMU exited at start ({status}): {}", tail.trim()))
                );
            }
            if self.clock.instant() >= deadline {
                let _ = child.start_kill();
                return Err(DriverError::Timeout {
                    target: self.target(),
                    what: "QMP socket".into(),
                    after: START_TIMEOUT,
                });
            }
            self.clock.sleep(Duration::from_millis(50)).await;
        };
        qmp.execute("cont", None)
            .await
            .map_err(|e| self.failed(e))?;
        state.starts += 1;
        state.running = Some(Running {
            child,
            qmp,
            resets_sent: 0,
        });
        let mut o = self.boot_override.locked();
        if o.mode == BootOverrideMode::Once {
            *o = BootOverride::default();
        }
        tracing::info!(node = %self.config.name, ssh_port = self.ssh_port, "QEMU started");
        Ok(())
    }

    async fn stop(&self, state: &mut State) -> Result<(), DriverError> {
        self.reap(state);
        let Some(mut running) = state.running.take() else {
            return Ok(());
        };
        let pid = running.child.id();
        let _ = running.qmp.execute("quit", None).await;
        if self
            .clock
            .timeout(QUIT_TIMEOUT, running.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(node = %self.config.name, "QEMU ignored quit; killing it");
            let _ = running.child.kill().await;
        }
        forget(pid);
        state.resets_sent += running.resets_sent;
        state.past_events.extend(running.qmp.events());
        Ok(())
    }

    /// Forgets a QEMU process that has exited by itself (guest power-off).
    fn reap(&self, state: &mut State) {
        let pid = state.running.as_ref().and_then(|r| r.child.id());
        let exited = state
            .running
            .as_mut()
            .is_some_and(|r| !matches!(r.child.try_wait(), Ok(None)));
        if exited {
            forget(pid);
        }
        if exited && let Some(r) = state.running.take() {
            state.resets_sent += r.resets_sent;
            state.past_events.extend(r.qmp.events());
        }
    }

    async fn on_running(
        &self,
        state: &State,
        action: ResetAction,
        command: &str,
        arguments: Option<serde_json::Value>,
    ) -> Result<(), DriverError> {
        match state.running.as_ref() {
            Some(r) => r
                .qmp
                .execute(command, arguments)
                .await
                .map(|_| ())
                .map_err(|e| self.failed(e)),
            None => Err(self.refused(action.as_str(), "powered off")),
        }
    }

    fn target(&self) -> String {
        format!("qemu node {}", self.config.name)
    }

    fn failed(&self, e: impl std::error::Error + Send + Sync + 'static) -> DriverError {
        DriverError::Failed {
            target: self.target(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }

    fn failed_msg(&self, message: String) -> DriverError {
        DriverError::Failed {
            target: self.target(),
            message,
            source: None,
        }
    }

    fn refused(&self, action: &str, reason: &str) -> DriverError {
        DriverError::Refused {
            action: action.to_owned(),
            target: self.target(),
            reason: reason.to_owned(),
        }
    }
}

/// How temporary node directories' names start.
const TEMP_PREFIX: &str = "rackproof-qemu-";

/// Takes a reaped QEMU off the process's record of children.
fn forget(pid: Option<u32>) {
    if let (Some(record), Some(pid)) = (rackproof_reap::record(), pid) {
        record.remove(pid);
    }
}

/// Letters, digits, `-` and `_` only (for file and process names).
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
