//! The simulated machine: power, firmware with boot override, systemd-boot boot counting on an
//! in-memory ESP (through `inplace-boot`, the same rules the agent and the images use), the
//! catalog's OS behaviours, boot timing on the [`Clock`], a console, and fault hooks.
//!
//! One boot, as a task that any power transition aborts:
//! 1. `firmware: power on` (or `firmware: reset (...)`), boot counter +1, firmware delay;
//!    a `Once` boot override is consumed; targets other than the disk find nothing and fall through.
//! 2. The loader: select the default entry, bump its counter on the ESP, print
//!    `systemd-boot: selected entry ID`, loader delay. No entry: halt. A power cut during the
//!    rename: the machine is off.
//! 3. The kernel named by the entry, read from the ESP (a torn file panics), kernel delay.
//! 4. The image's behaviour: up (`rackproof-os VERSION: up`, the guest starts), panic (reboot
//!    after the panic delay), or hang.

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

use super::catalog::{Behaviour, Catalog, kernel_version};
use super::guest::{GuestContext, GuestOs};
use crate::console::{ConsoleLine, ConsoleSource};

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
    /// Per-machine boot behaviours that replace the catalog's (fault: "this version panics on
    /// this node only").
    overrides: BTreeMap<String, Behaviour>,
    /// The running guest (the agent) and what it was started with, while the OS is up.
    guest: Option<(AbortHandle, GuestContext)>,
    /// The guest was killed and not started again.
    guest_killed: bool,
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
                guest_killed: false,
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

    /// Fault: from now on `version` boots like `behaviour` on this machine only (the catalog
    /// stays as it is for the others).
    pub fn override_behaviour(&self, version: &str, behaviour: Behaviour) {
        self.inner
            .lock()
            .overrides
            .insert(version.to_owned(), behaviour);
    }

    /// Fault: kills the guest (the agent process) while the OS stays up. Returns whether one ran.
    pub fn kill_guest(&self) -> bool {
        let mut s = self.inner.lock();
        match s.guest.as_ref() {
            Some((task, _)) if !s.guest_killed => {
                task.abort();
                s.guest_killed = true;
                Inner::print(
                    &self.inner,
                    &mut s,
                    "rackproof-os: rackproof-agent.service: killed".to_owned(),
                );
                true
            }
            _ => false,
        }
    }

    /// Starts the guest again after [`SimMachine::kill_guest`] (systemd restarting the unit), if
    /// the OS is still up. Returns whether it started.
    pub fn restart_guest(&self) -> bool {
        let mut s = self.inner.lock();
        if !s.guest_killed {
            return false;
        }
        let Some((_, ctx)) = s.guest.take() else {
            return false;
        };
        Inner::print(
            &self.inner,
            &mut s,
            "rackproof-os: rackproof-agent.service: started".to_owned(),
        );
        Inner::start_guest(&self.inner, &mut s, ctx);
        true
    }

    /// Provisions a fresh disk, as a machine provider does for a new machine: every file on the
    /// ESP but `loader.conf` is removed, and `version` installed as the one good entry. Refused
    /// while the machine is on.
    pub fn reimage(&self, version: &str) -> Result<(), SimError> {
        let node = self.inner.name.clone();
        if self.inner.lock().power == PowerState::On {
            return Err(SimError::PoweredOn { node });
        }
        let artifact =
            self.inner
                .catalog
                .artifact(version)
                .ok_or_else(|| SimError::UnknownVersion {
                    node: node.clone(),
                    version: version.to_owned(),
                })?;
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

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn print(inner: &Arc<Inner>, s: &mut State, text: String) {
        tracing::debug!(node = %inner.name, console = %text);
        let line = ConsoleLine {
            at: inner.clock.now(),
            text,
        };
        if s.history.len() >= HISTORY_LIMIT {
            s.history.drain(..HISTORY_LIMIT / 2);
        }
        s.history.push(line.clone());
        if let Some(console) = &s.console {
            // No subscribers left is fine.
            let _ = console.send(line);
        }
    }

    /// Stops everything running (boot sequence, guest) and starts a new generation.
    fn stop(s: &mut State) -> u64 {
        s.generation += 1;
        for task in s.tasks.drain(..) {
            task.abort();
        }
        if let Some((task, _)) = s.guest.take() {
            task.abort();
        }
        s.guest_killed = false;
        s.generation
    }

    fn start_guest(inner: &Arc<Inner>, s: &mut State, ctx: GuestContext) {
        if let Some(guest) = &inner.guest {
            let task = tokio::spawn(guest.start(ctx.clone()));
            s.guest = Some((task.abort_handle(), ctx));
            s.guest_killed = false;
        }
    }

    fn power_off(inner: &Arc<Inner>, s: &mut State, line: &str) {
        if s.power == PowerState::Off {
            return;
        }
        Self::stop(s);
        s.power = PowerState::Off;
        s.phase = Phase::Off;
        Self::print(inner, s, line.to_owned());
    }

    fn power_on(inner: &Arc<Inner>, s: &mut State) {
        inner.esp.restore_power();
        s.power = PowerState::On;
        s.history.clear();
        Self::schedule_boot(inner, s, Duration::ZERO, "power on");
    }

    /// Aborts what runs and starts a boot after `delay`.
    fn schedule_boot(inner: &Arc<Inner>, s: &mut State, delay: Duration, cause: &'static str) {
        let generation = Self::stop(s);
        if !delay.is_zero() {
            s.phase = Phase::ShuttingDown;
        }
        let task = tokio::spawn(Self::run(inner.clone(), generation, delay, cause));
        s.tasks.push(task.abort_handle());
    }

    /// Aborts what runs and powers off after `delay`.
    fn schedule_power_off(inner: &Arc<Inner>, s: &mut State, delay: Duration) {
        let generation = Self::stop(s);
        s.phase = Phase::ShuttingDown;
        let inner2 = inner.clone();
        let task = tokio::spawn(async move {
            inner2.clock.sleep(delay).await;
            let mut s = inner2.lock();
            if s.generation == generation {
                Self::power_off(&inner2, &mut s, "firmware: power off");
            }
        });
        s.tasks.push(task.abort_handle());
    }

    /// Runs `f` on the state if this task's generation is still current.
    fn current<R>(
        inner: &Arc<Inner>,
        generation: u64,
        f: impl FnOnce(&mut State) -> R,
    ) -> Option<R> {
        let mut s = inner.lock();
        (s.generation == generation).then(|| f(&mut s))
    }

    fn say(inner: &Arc<Inner>, generation: u64, text: String) -> Option<()> {
        Self::current(inner, generation, |s| Self::print(inner, s, text))
    }

    /// The boot sequence; loops on kernel panics. Returns when up, hung, halted or superseded.
    async fn run(inner: Arc<Inner>, generation: u64, delay: Duration, first_cause: &'static str) {
        inner.clock.sleep(delay).await;
        let mut cause = first_cause;
        loop {
            let target = Self::current(&inner, generation, |s| {
                s.boots += 1;
                s.phase = Phase::Firmware;
                let line = if cause == "power on" {
                    "firmware: power on".to_owned()
                } else {
                    format!("firmware: {cause}")
                };
                Self::print(&inner, s, line);
                match s.boot_override.mode {
                    BootOverrideMode::Disabled => BootTarget::None,
                    BootOverrideMode::Once => {
                        let t = s.boot_override.target;
                        s.boot_override = BootOverride::default();
                        t
                    }
                    BootOverrideMode::Continuous => s.boot_override.target,
                }
            });
            let Some(target) = target else { return };
            inner.clock.sleep(inner.timing.firmware).await;
            if !matches!(target, BootTarget::None | BootTarget::Hdd) {
                Self::say(
                    &inner,
                    generation,
                    format!(
                        "firmware: boot from {}: nothing to boot, trying the disk",
                        target.as_str()
                    ),
                );
            }

            // The loader.
            let Some(mut vars) = Self::current(&inner, generation, |s| {
                s.phase = Phase::Loader;
                s.vars.clone()
            }) else {
                return;
            };
            let record = match boot(&inner.esp, &mut vars) {
                Ok(Some(record)) => record,
                Ok(None) => {
                    Self::current(&inner, generation, |s| {
                        s.phase = Phase::Halted;
                        Self::print(&inner, s, "systemd-boot: no boot entries found".to_owned());
                    });
                    return;
                }
                Err(e) if e.is_power_lost() => return,
                Err(e) => {
                    Self::current(&inner, generation, |s| {
                        s.phase = Phase::Halted;
                        Self::print(&inner, s, format!("systemd-boot: cannot read the ESP: {e}"));
                    });
                    return;
                }
            };
            let selected = Self::current(&inner, generation, |s| {
                s.vars = vars;
                s.last_boot = Some(record.clone());
                Self::print(
                    &inner,
                    s,
                    format!(
                        "systemd-boot: selected entry {}",
                        record.loader_entry_selected
                    ),
                );
            });
            if selected.is_none() {
                return;
            }
            inner.clock.sleep(inner.timing.loader).await;

            // The kernel.
            let kernel = record
                .entry
                .conf
                .loader_path()
                .and_then(|p| inner.esp.read(&p).ok());
            let version = kernel.as_deref().and_then(kernel_version);
            let entry = record.current_name().file_name().to_owned();
            let behaviour = match &version {
                Some(v) => Self::current(&inner, generation, |s| s.overrides.get(v).cloned())
                    .flatten()
                    .or_else(|| inner.catalog.image(v).map(|i| i.behaviour.clone())),
                None => None,
            };
            let shown = version.clone().unwrap_or_else(|| "?".to_owned());
            let started = Self::current(&inner, generation, |s| {
                s.phase = Phase::Kernel {
                    entry: entry.clone(),
                    version: shown.clone(),
                };
                Self::print(&inner, s, format!("Linux version {shown} (entry {entry})"));
            });
            if started.is_none() {
                return;
            }
            inner.clock.sleep(inner.timing.kernel).await;

            let reason = match (&version, &behaviour) {
                (None, _) => {
                    Some("VFS: Unable to mount root fs: kernel image unreadable".to_owned())
                }
                (Some(v), None) => Some(format!("no image for version {v} in the catalog")),
                (Some(_), Some(Behaviour::PanicsAtBoot)) => {
                    Some("Attempted to kill init! exitcode=0x00000100".to_owned())
                }
                _ => None,
            };
            if let Some(reason) = reason {
                let panicked = Self::current(&inner, generation, |s| {
                    Self::print(&inner, s, format!("Kernel panic - not syncing: {reason}"));
                    Self::print(
                        &inner,
                        s,
                        format!(
                            "Rebooting in {} seconds..",
                            inner.timing.panic_reboot.as_secs()
                        ),
                    );
                });
                if panicked.is_none() {
                    return;
                }
                inner.clock.sleep(inner.timing.panic_reboot).await;
                cause = "reset (kernel panic)";
                continue;
            }
            let (Some(version), Some(behaviour)) = (version, behaviour) else {
                return;
            };
            match behaviour {
                Behaviour::HangsAtBoot => {
                    Self::current(&inner, generation, |s| {
                        s.phase = Phase::Hung { entry, version }
                    });
                }
                Behaviour::Boots | Behaviour::AgentNeverReports | Behaviour::ReportsVersion(_) => {
                    let running = match &behaviour {
                        Behaviour::ReportsVersion(v) => v.clone(),
                        _ => version,
                    };
                    let start_guest = !matches!(behaviour, Behaviour::AgentNeverReports);
                    Self::current(&inner, generation, |s| {
                        s.phase = Phase::Up {
                            entry: entry.clone(),
                            version: running.clone(),
                        };
                        Self::print(&inner, s, format!("rackproof-os {running}: up"));
                        if start_guest {
                            let ctx = GuestContext {
                                node: inner.name.clone(),
                                booted_entry: record.current_name().clone(),
                                loader_entry_selected: record.loader_entry_selected.clone(),
                                loader_boot_count_path: record.loader_boot_count_path.clone(),
                                os_version: running.clone(),
                                esp: Arc::new(inner.esp.clone()) as Arc<dyn Esp>,
                                clock: inner.clock.clone(),
                                machine: SimHandle {
                                    inner: Arc::downgrade(&inner),
                                },
                            };
                            Self::start_guest(&inner, s, ctx);
                        }
                    });
                }
                Behaviour::PanicsAtBoot => {}
            }
            return;
        }
    }
}

fn refused(inner: &Inner, action: ResetAction, reason: &str) -> DriverError {
    DriverError::Refused {
        action: action.to_string(),
        target: inner.name.clone(),
        reason: reason.to_owned(),
    }
}

#[async_trait]
impl Power for SimMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        Ok(self.inner.lock().power)
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let inner = &self.inner;
        let mut s = inner.lock();
        let on = s.power == PowerState::On;
        tracing::info!(node = %inner.name, %action, "reset");
        match action {
            ResetAction::On => {
                if !on {
                    if s.ignore_power_on > 0 {
                        s.ignore_power_on -= 1;
                    } else {
                        Inner::power_on(inner, &mut s);
                    }
                }
            }
            ResetAction::ForceOff => Inner::power_off(inner, &mut s, "firmware: power off"),
            ResetAction::GracefulShutdown => {
                if on {
                    if matches!(s.phase, Phase::Up { .. }) {
                        Inner::print(
                            inner,
                            &mut s,
                            "rackproof-os: power button pressed, shutting down".to_owned(),
                        );
                        let delay = inner.timing.shutdown;
                        Inner::schedule_power_off(inner, &mut s, delay);
                    } else {
                        Inner::print(
                            inner,
                            &mut s,
                            "acpi: power button pressed, nobody listening".to_owned(),
                        );
                    }
                }
            }
            ResetAction::GracefulRestart => {
                if !on {
                    return Err(refused(inner, action, "the machine is off"));
                }
                if matches!(s.phase, Phase::Up { .. }) {
                    Inner::print(
                        inner,
                        &mut s,
                        "rackproof-os: restart requested, rebooting".to_owned(),
                    );
                    let delay = inner.timing.shutdown;
                    Inner::schedule_boot(inner, &mut s, delay, "reset (graceful restart)");
                } else {
                    Inner::print(
                        inner,
                        &mut s,
                        "acpi: restart requested, nobody listening".to_owned(),
                    );
                }
            }
            ResetAction::ForceRestart => {
                if !on {
                    return Err(refused(inner, action, "the machine is off"));
                }
                Inner::schedule_boot(inner, &mut s, Duration::ZERO, "reset (forced)");
            }
            ResetAction::PowerCycle => {
                if on {
                    Inner::power_off(inner, &mut s, "firmware: power off");
                    let generation = s.generation;
                    let inner2 = inner.clone();
                    let task = tokio::spawn(async move {
                        inner2.clock.sleep(inner2.timing.cycle_off).await;
                        let mut s = inner2.lock();
                        if s.generation == generation && s.power == PowerState::Off {
                            Inner::power_on(&inner2, &mut s);
                        }
                    });
                    s.tasks.push(task.abort_handle());
                } else {
                    Inner::power_on(inner, &mut s);
                }
            }
            ResetAction::Nmi => {
                if !on {
                    return Err(refused(inner, action, "the machine is off"));
                }
                if s.phase.kernel_running() {
                    Inner::print(
                        inner,
                        &mut s,
                        "Kernel panic - not syncing: NMI: Not continuing".to_owned(),
                    );
                    let delay = inner.timing.panic_reboot;
                    Inner::schedule_boot(inner, &mut s, delay, "reset (kernel panic)");
                } else {
                    Inner::print(inner, &mut s, "firmware: NMI ignored".to_owned());
                }
            }
        }
        Ok(())
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        ResetAction::ALL.to_vec()
    }
}

#[async_trait]
impl BootControl for SimMachine {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        Ok(self.inner.lock().boot_override)
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        self.inner.lock().boot_override = setting;
        Ok(())
    }
}

impl ConsoleSource for SimMachine {
    fn subscribe(&self) -> (Vec<ConsoleLine>, broadcast::Receiver<ConsoleLine>) {
        let mut s = self.inner.lock();
        // Lines are sent while holding the state lock, so none falls between these two.
        let live = s
            .console
            .get_or_insert_with(|| broadcast::channel(CONSOLE_CAPACITY).0)
            .subscribe();
        (s.history.clone(), live)
    }
}

/// The booted entry a machine's loader reported, for tests and the harness.
pub fn booted_entry_of(machine: &SimMachine) -> Option<EntryName> {
    machine.last_boot().map(|r| r.current_name().clone())
}
