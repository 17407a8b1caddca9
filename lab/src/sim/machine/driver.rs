//! The machine as the lab drives it: the driver traits (power, boot override) and its console.

use super::*;
use crate::console::ConsoleSource;

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

fn refused(inner: &Inner, action: ResetAction, reason: &str) -> DriverError {
    DriverError::Refused {
        action: action.to_string(),
        target: inner.name.clone(),
        reason: reason.to_owned(),
    }
}
