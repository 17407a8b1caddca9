//! The machine as the lab drives it: the driver traits (power through QMP, boot override).

use rackproof_std::LockExt;

use super::*;

#[async_trait]
impl Power for QemuMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        let mut state = self.state.lock().await;
        self.reap(&mut state);
        let Some(running) = state.running.as_ref() else {
            return Ok(PowerState::Off);
        };
        match running.qmp.status().await {
            Ok(s) if s == "running" => Ok(PowerState::On),
            Ok(s) if s == "shutdown" => Ok(PowerState::PoweringOff),
            // Paused CPUs (`stop`) are off to a BMC; `On` resumes them.
            Ok(_) => Ok(PowerState::Off),
            Err(QmpError::Closed { .. }) => Ok(PowerState::PoweringOff),
            Err(e) => Err(self.failed(e)),
        }
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let mut state = self.state.lock().await;
        self.reap(&mut state);
        tracing::info!(node = %self.config.name, %action, "power action");
        let on = state.running.is_some();
        match action {
            ResetAction::On if on => {
                let status = state.running.as_ref().map(|r| &r.qmp);
                if let Some(q) = status
                    && q.status().await.map_err(|e| self.failed(e))? == "paused"
                {
                    q.execute("cont", None).await.map_err(|e| self.failed(e))?;
                }
                Ok(())
            }
            ResetAction::On => self.start(&mut state).await,
            ResetAction::ForceOff => self.stop(&mut state).await,
            ResetAction::GracefulShutdown if !on => Ok(()),
            ResetAction::GracefulShutdown => {
                self.on_running(&state, action, "system_powerdown", None)
                    .await
            }
            ResetAction::GracefulRestart => {
                let keys = json!({ "keys": [
                    { "type": "qcode", "data": "ctrl" },
                    { "type": "qcode", "data": "alt" },
                    { "type": "qcode", "data": "delete" }
                ]});
                self.on_running(&state, action, "send-key", Some(keys))
                    .await
            }
            ResetAction::ForceRestart => {
                self.on_running(&state, action, "system_reset", None)
                    .await?;
                if let Some(r) = state.running.as_mut() {
                    r.resets_sent += 1;
                }
                Ok(())
            }
            ResetAction::PowerCycle => {
                self.stop(&mut state).await?;
                self.start(&mut state).await
            }
            ResetAction::Nmi => self.on_running(&state, action, "inject-nmi", None).await,
        }
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        ResetAction::ALL.to_vec()
    }
}

#[async_trait]
impl BootControl for QemuMachine {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        Ok(*self.boot_override.locked())
    }

    /// `None` and `Hdd` (the disk's ESP, which is what the node boots anyway) are accepted and
    /// recorded; the NIC has no option ROM, so `Pxe`/`UefiHttp` are not offered, nor is `Cd`.
    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        match setting.target {
            BootTarget::None | BootTarget::Hdd => {
                *self.boot_override.locked() = setting;
                Ok(())
            }
            other => Err(DriverError::Unsupported {
                action: format!("boot override to {}", other.as_str()),
                target: self.target(),
            }),
        }
    }
}
