//! One boot as a task (firmware, loader, kernel, the behaviour of the build on the ESP) and the power
//! transitions that start and abort it, on the machine's state.

use rackproof_std::LockExt;

use super::*;

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    pub(super) fn print(inner: &Arc<Inner>, s: &mut State, text: String) {
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
    pub(super) fn stop(s: &mut State) -> u64 {
        s.generation += 1;
        for task in s.tasks.drain(..) {
            task.abort();
        }
        if let Some(guest) = s.guest.take() {
            guest
                .services
                .into_values()
                .flatten()
                .for_each(|t| t.abort());
        }
        s.generation
    }

    /// Starts every service of the guest OS (a boot came up).
    pub(super) fn start_guest(inner: &Arc<Inner>, s: &mut State, ctx: GuestContext) {
        let Some(guest) = &inner.guest else {
            return;
        };
        s.guest = Some(RunningGuest {
            services: guest.services().iter().map(|&unit| (unit, None)).collect(),
            ctx: ctx.clone(),
        });
        for &unit in guest.services() {
            Self::start_service(inner, s, unit, ctx.clone());
        }
    }

    /// Starts one service of the running guest.
    pub(super) fn start_service(
        inner: &Arc<Inner>,
        s: &mut State,
        unit: &'static str,
        ctx: GuestContext,
    ) {
        let (Some(guest), Some(running)) = (&inner.guest, s.guest.as_mut()) else {
            return;
        };
        let task = tokio::spawn(guest.start(unit, ctx));
        running.services.insert(unit, Some(task.abort_handle()));
    }

    pub(super) fn power_off(inner: &Arc<Inner>, s: &mut State, line: &str) {
        if s.power == PowerState::Off {
            return;
        }
        Self::stop(s);
        s.power = PowerState::Off;
        s.phase = Phase::Off;
        Self::print(inner, s, line.to_owned());
    }

    pub(super) fn power_on(inner: &Arc<Inner>, s: &mut State) {
        inner.esp.restore_power();
        s.power = PowerState::On;
        s.history.clear();
        Self::schedule_boot(inner, s, Duration::ZERO, "power on");
    }

    /// Aborts what runs and starts a boot after `delay`.
    pub(super) fn schedule_boot(
        inner: &Arc<Inner>,
        s: &mut State,
        delay: Duration,
        cause: &'static str,
    ) {
        let generation = Self::stop(s);
        if !delay.is_zero() {
            s.phase = Phase::ShuttingDown;
        }
        let task = tokio::spawn(Self::run(inner.clone(), generation, delay, cause));
        s.tasks.push(task.abort_handle());
    }

    /// Aborts what runs and powers off after `delay`.
    pub(super) fn schedule_power_off(inner: &Arc<Inner>, s: &mut State, delay: Duration) {
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
    pub(super) fn current<R>(
        inner: &Arc<Inner>,
        generation: u64,
        f: impl FnOnce(&mut State) -> R,
    ) -> Option<R> {
        let mut s = inner.lock();
        (s.generation == generation).then(|| f(&mut s))
    }

    pub(super) fn say(inner: &Arc<Inner>, generation: u64, text: String) -> Option<()> {
        Self::current(inner, generation, |s| Self::print(inner, s, text))
    }

    /// The boot sequence; loops on kernel panics. Returns when up, hung, halted or superseded.
    pub(super) async fn run(
        inner: Arc<Inner>,
        generation: u64,
        delay: Duration,
        first_cause: &'static str,
    ) {
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
            // The build's own behaviour, unless a fault overrides the version on this machine.
            let build = kernel.as_deref().and_then(kernel_build);
            let version = build.as_ref().map(|(v, _)| v.clone());
            let entry = record.current_name().file_name().to_owned();
            let behaviour = build.map(|(v, own)| {
                Self::current(&inner, generation, |s| s.overrides.get(&v).cloned())
                    .flatten()
                    .unwrap_or(own)
            });
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
