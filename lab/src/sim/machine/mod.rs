//! The simulated machine: power, firmware with boot override, systemd-boot boot counting on an
//! in-memory ESP (through `inplace-boot`, the same rules the agent and the images use), the
//! OS builds' behaviours, boot timing on the [`Clock`], a console, and fault hooks.
//!
//! One boot, as a task that any power transition aborts:
//! 1. `firmware: power on` (or `firmware: reset (...)`), boot counter +1, firmware delay;
//!    a `Once` boot override is consumed; targets other than the disk find nothing and fall through.
//! 2. The loader: select the default entry, bump its counter on the ESP, print
//!    `systemd-boot: selected entry ID`, loader delay. No entry: halt. A power cut during the
//!    rename: the machine is off.
//! 3. The kernel named by the entry, read from the ESP (a torn file panics), kernel delay.
//! 4. The behaviour of the build the kernel file names (a fault may override a version's on one
//!    machine): up (`rackproof-os VERSION: up`, the guest starts), panic (reboot after the panic
//!    delay), or hang.
//!
//! Here: the machine's types and its handle; in `boot_task` the boot and the power transitions
//! on its state; in `driver` the driver traits and the console.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use inplace_boot::{
    BootRecord, EntryName, Esp, LoaderConf, LoaderVars, MemEsp, Timeout, bless, boot,
    install_entry, write_loader_conf,
};
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::catalog::{Behaviour, Catalog, SlotArtifact, kernel_build};
use super::guest::{GuestContext, GuestOs};
use crate::console::ConsoleLine;

mod boot_task;
mod driver;

pub use driver::booted_entry_of;

/// Boot timing, all on the machine's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootTiming {
    pub firmware: Duration,
    pub loader: Duration,
    pub kernel: Duration,
    /// From a kernel panic to the reset (`panic=10`).
    pub panic_reboot: Duration,
    /// From a graceful shutdown/restart request to power-off/reset.
    pub shutdown: Duration,
    /// How long a power cycle keeps the power off.
    pub cycle_off: Duration,
}

impl Default for BootTiming {
    fn default() -> Self {
        Self {
            firmware: Duration::from_secs(5),
            loader: Duration::from_secs(1),
            kernel: Duration::from_secs(4),
            panic_reboot: Duration::from_secs(10),
            shutdown: Duration::from_secs(3),
            cycle_off: Duration::from_secs(2),
        }
    }
}

/// Where a simulated machine is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Off,
    Firmware,
    Loader,
    Kernel {
        entry: String,
        version: String,
    },
    /// The OS is up and reports `version`.
    Up {
        entry: String,
        version: String,
    },
    Hung {
        entry: String,
        version: String,
    },
    /// The loader found nothing to boot.
    Halted,
    ShuttingDown,
}

impl Phase {
    fn kernel_running(&self) -> bool {
        matches!(
            self,
            Self::Kernel { .. } | Self::Up { .. } | Self::Hung { .. } | Self::ShuttingDown
        )
    }
}

/// How many console lines are kept for late subscribers.
const HISTORY_LIMIT: usize = 4096;

/// How many console lines a slow subscriber may fall behind before it misses some. The channel
/// is made at the first subscription: a thousand machines nobody reads the console of live
/// without a thousand such buffers.
const CONSOLE_CAPACITY: usize = 1024;

struct Inner {
    name: String,
    clock: Clock,
    esp: MemEsp,
    catalog: Catalog,
    timing: BootTiming,
    guest: Option<Arc<dyn GuestOs>>,
    state: Mutex<State>,
}

struct State {
    power: PowerState,
    phase: Phase,
    /// Bumped by every power transition; tasks of older generations stop acting.
    generation: u64,
    tasks: Vec<AbortHandle>,
    boot_override: BootOverride,
    vars: LoaderVars,
    boots: u64,
    last_boot: Option<BootRecord>,
    history: Vec<ConsoleLine>,
    /// Live console lines, once someone subscribed.
    console: Option<broadcast::Sender<ConsoleLine>>,
    ignore_power_on: u32,
    /// Per-machine boot behaviours that replace the builds' own (fault: "this version panics on
    /// this node only").
    overrides: BTreeMap<String, Behaviour>,
    /// The guest's services and what they were started with, while the OS is up.
    guest: Option<RunningGuest>,
}

/// The services of the guest OS of one boot.
struct RunningGuest {
    /// Each service's task, `None` once a fault killed it (until it is started again).
    services: BTreeMap<&'static str, Option<AbortHandle>>,
    /// The boot's context, for starting a killed service again.
    ctx: GuestContext,
}

/// An in-process machine. Clones share the machine.
#[derive(Clone)]
pub struct SimMachine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.lock();
        f.debug_struct("SimMachine")
            .field("name", &self.inner.name)
            .field("power", &s.power)
            .field("phase", &s.phase)
            .finish()
    }
}

/// A weak handle to a machine, given to the guest OS (it must not keep the machine alive).
#[derive(Clone)]
pub struct SimHandle {
    inner: Weak<Inner>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimHandle")
    }
}

/// A failed machine setup.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("node {node}: version {version} is not in the image catalog")]
    UnknownVersion { node: String, version: String },
    #[error("node {node}: cannot re-image a machine that is powered on; power it off first")]
    PoweredOn { node: String },
    #[error("node {node}: prepare the ESP")]
    Esp {
        node: String,
        #[source]
        source: inplace_boot::UpdateError,
    },
}

/// Builds a [`SimMachine`].
#[derive(Debug)]
pub struct SimMachineBuilder {
    name: String,
    clock: Clock,
    catalog: Catalog,
    timing: BootTiming,
    guest: Option<Arc<dyn GuestOs>>,
    esp_capacity: u64,
    installed: Vec<String>,
    loader_conf: LoaderConf,
}

impl SimMachineBuilder {
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    pub fn timing(mut self, timing: BootTiming) -> Self {
        self.timing = timing;
        self
    }

    /// The OS payload started whenever the OS is up (the in-process agent).
    pub fn guest(mut self, guest: Arc<dyn GuestOs>) -> Self {
        self.guest = Some(guest);
        self
    }

    pub fn esp_capacity(mut self, bytes: u64) -> Self {
        self.esp_capacity = bytes;
        self
    }

    /// Installs `version` as a good (blessed) entry, as a disk builder does. Repeatable.
    pub fn installed(mut self, version: &str) -> Self {
        self.installed.push(version.to_owned());
        self
    }

    /// The `loader.conf` written to the ESP (default: `timeout 0`, no `default`).
    pub fn loader_conf(mut self, conf: LoaderConf) -> Self {
        self.loader_conf = conf;
        self
    }

    /// Builds the machine, powered off.
    pub fn build(self) -> Result<SimMachine, SimError> {
        let esp = MemEsp::new(self.esp_capacity);
        let esp_err = |source| SimError::Esp {
            node: self.name.clone(),
            source,
        };
        write_loader_conf(&esp, &self.loader_conf).map_err(esp_err)?;
        for version in &self.installed {
            let artifact =
                self.catalog
                    .artifact(version)
                    .ok_or_else(|| SimError::UnknownVersion {
                        node: self.name.clone(),
                        version: version.clone(),
                    })?;
            let stem = artifact.stem();
            let name = install_entry(&esp, &artifact.new_entry(&stem), None).map_err(esp_err)?;
            bless(&esp, &name).map_err(esp_err)?;
        }
        let inner = Arc::new(Inner {
            name: self.name,
            clock: self.clock,
            esp: esp.clone(),
            catalog: self.catalog,
            timing: self.timing,
            guest: self.guest,
            state: Mutex::new(State {
                power: PowerState::Off,
                phase: Phase::Off,
                generation: 0,
                tasks: Vec::new(),
                boot_override: BootOverride::default(),
                vars: LoaderVars::default(),
                boots: 0,
                last_boot: None,
                history: Vec::new(),
                console: None,
                ignore_power_on: 0,
                overrides: BTreeMap::new(),
                guest: None,
            }),
        });
        let weak = Arc::downgrade(&inner);
        esp.on_power_cut(Arc::new(move || {
            if let Some(inner) = weak.upgrade() {
                let mut s = inner.lock();
                Inner::power_off(&inner, &mut s, "firmware: power lost");
            }
        }));
        Ok(SimMachine { inner })
    }
}

impl SimMachine {
    /// A machine called `name` with default timing, an empty catalog and a 64 MiB ESP.
    pub fn builder(name: impl Into<String>, clock: Clock) -> SimMachineBuilder {
        SimMachineBuilder {
            name: name.into(),
            clock,
            catalog: Catalog::new(),
            timing: BootTiming::default(),
            guest: None,
            esp_capacity: 64 << 20,
            installed: Vec::new(),
            loader_conf: LoaderConf {
                timeout: Some(Timeout::Seconds(0)),
                ..LoaderConf::default()
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The machine's ESP (shared: changes are the machine's).
    pub fn esp(&self) -> &MemEsp {
        &self.inner.esp
    }

    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    pub fn phase(&self) -> Phase {
        self.inner.lock().phase.clone()
    }

    /// Boots started since the machine was built (power-ons and resets).
    pub fn boots(&self) -> u64 {
        self.inner.lock().boots
    }

    /// The loader's record of the latest boot.
    pub fn last_boot(&self) -> Option<BootRecord> {
        self.inner.lock().last_boot.clone()
    }

    /// The loader's EFI variables (one-shot, default, last booted).
    pub fn loader_vars(&self) -> LoaderVars {
        self.inner.lock().vars.clone()
    }

    pub fn set_loader_vars(&self, vars: LoaderVars) {
        self.inner.lock().vars = vars;
    }

    /// Every console line kept (since the last power-on, at most a few thousand).
    pub fn console_history(&self) -> Vec<String> {
        self.inner
            .lock()
            .history
            .iter()
            .map(|l| l.text.clone())
            .collect()
    }

    /// Fault: the next `times` power-on requests are accepted but do nothing (a vendor quirk).
    pub fn ignore_power_on(&self, times: u32) {
        self.inner.lock().ignore_power_on = times;
    }

    /// Fault: cut the power at the next write to the ESP (a slot write, a bless, the loader's
    /// counter rename); the write is torn and the machine goes off.
    pub fn cut_power_at_next_esp_write(&self) {
        self.inner.esp.cut_power_after(0);
    }

    /// Fault: cut the power at the ESP write after `n` more successful ones.
    pub fn cut_power_after_esp_writes(&self, n: u64) {
        self.inner.esp.cut_power_after(n);
    }

    /// Fault: from now on `version` boots like `behaviour` on this machine only, whatever build
    /// of it is on the ESP (the other machines boot their builds as they are).
    pub fn override_behaviour(&self, version: &str, behaviour: Behaviour) {
        self.inner
            .lock()
            .overrides
            .insert(version.to_owned(), behaviour);
    }

    /// Fault: kills one service of the guest (`rackproof-agent`, `kubelet`: a unit name of
    /// [`GuestOs::services`]) while the OS and the other services stay up. Returns whether it ran.
    pub fn kill_guest(&self, service: &str) -> bool {
        let mut s = self.inner.lock();
        let Some(task) = s
            .guest
            .as_mut()
            .and_then(|g| g.services.get_mut(service))
            .and_then(Option::take)
        else {
            return false;
        };
        task.abort();
        Inner::print(
            &self.inner,
            &mut s,
            format!("rackproof-os: {service}.service: killed"),
        );
        true
    }

    /// Starts a service again after [`SimMachine::kill_guest`] (the service manager restarting
    /// the unit), if the OS is still up. Returns whether it started.
    pub fn restart_guest(&self, service: &str) -> bool {
        let mut s = self.inner.lock();
        let Some(guest) = s.guest.as_ref() else {
            return false;
        };
        let Some((&unit, None)) = guest.services.get_key_value(service) else {
            return false;
        };
        let ctx = guest.ctx.clone();
        Inner::print(
            &self.inner,
            &mut s,
            format!("rackproof-os: {unit}.service: started"),
        );
        Inner::start_service(&self.inner, &mut s, unit, ctx);
        true
    }

    /// Provisions a fresh disk, as a machine provider does for a new machine: every file on the
    /// ESP but `loader.conf` is removed, and `version` installed as the one good entry. Refused
    /// while the machine is on.
    pub fn reimage(&self, version: &str) -> Result<(), SimError> {
        let artifact =
            self.inner
                .catalog
                .artifact(version)
                .ok_or_else(|| SimError::UnknownVersion {
                    node: self.inner.name.clone(),
                    version: version.to_owned(),
                })?;
        self.reimage_with(&artifact)
    }

    /// [`SimMachine::reimage`] with a given build (one published after the machine was built).
    pub fn reimage_with(&self, artifact: &SlotArtifact) -> Result<(), SimError> {
        let node = self.inner.name.clone();
        if self.inner.lock().power == PowerState::On {
            return Err(SimError::PoweredOn { node });
        }
        let esp_err = |source| SimError::Esp {
            node: node.clone(),
            source,
        };
        let esp = &self.inner.esp;
        let mut dirs = vec![String::new()];
        while let Some(dir) = dirs.pop() {
            let entries = esp.list(&dir).map_err(|e| esp_err(e.into()))?;
            for entry in entries {
                let path = if dir.is_empty() {
                    entry.name.clone()
                } else {
                    format!("{dir}/{}", entry.name)
                };
                if entry.is_dir {
                    dirs.push(path);
                } else if path != inplace_boot::LOADER_CONF_PATH {
                    esp.remove(&path).map_err(|e| esp_err(e.into()))?;
                }
            }
        }
        let stem = artifact.stem();
        let name = install_entry(esp, &artifact.new_entry(&stem), None).map_err(esp_err)?;
        bless(esp, &name).map_err(esp_err)?;
        self.inner.lock().vars = LoaderVars::default();
        Ok(())
    }

    /// A handle for code running inside the machine.
    pub fn handle(&self) -> SimHandle {
        SimHandle {
            inner: Arc::downgrade(&self.inner),
        }
    }
}

impl SimHandle {
    /// `systemctl reboot` from inside the OS.
    pub fn reboot(&self) {
        if let Some(inner) = self.inner.upgrade() {
            let mut s = inner.lock();
            if s.power == PowerState::On {
                Inner::print(&inner, &mut s, "rackproof-os: rebooting".to_owned());
                let delay = inner.timing.shutdown;
                Inner::schedule_boot(&inner, &mut s, delay, "reset (reboot)");
            }
        }
    }

    /// `systemctl poweroff` from inside the OS.
    pub fn power_off(&self) {
        if let Some(inner) = self.inner.upgrade() {
            let mut s = inner.lock();
            if s.power == PowerState::On {
                Inner::print(&inner, &mut s, "rackproof-os: powering off".to_owned());
                Inner::power_off(&inner, &mut s, "firmware: power off");
            }
        }
    }

    /// Fault: the machine loses power at this very moment (what runs inside stops).
    pub fn cut_power(&self) {
        if let Some(inner) = self.inner.upgrade() {
            let mut s = inner.lock();
            Inner::power_off(&inner, &mut s, "firmware: power lost");
        }
    }

    /// Prints a line on the machine's console (the agent's log, for example).
    pub fn print(&self, text: &str) {
        if let Some(inner) = self.inner.upgrade() {
            let mut s = inner.lock();
            Inner::print(&inner, &mut s, text.to_owned());
        }
    }
}
