//! Power: `ComputerSystem.Reset` restricted to the advertised allowable values, power-state
//! polling with deadlines, task monitors, and tolerance for two vendor quirks:
//!
//! - *power-on accepted but ignored*: after `On`, the client polls for `On` (or `PoweringOn`)
//!   for [`ClientOptions::power_on_grace`](super::ClientOptions) and sends `On` again if nothing
//!   happened, up to `power_on_attempts` times;
//! - *reset refused until off*: a restart-type reset refused with 409 (or a
//!   `…PowerStateOffRequired` message) becomes power off (graceful for `GracefulRestart` when
//!   offered), wait for `Off`, power on.

use std::time::Duration;

use async_trait::async_trait;
use http::{Method, StatusCode};
use rackproof_driver::{DriverError, Power, PowerState, ResetAction};
use serde_json::{Value, json};

use super::{RedfishClient, RedfishError, SystemInfo};

pub(crate) fn parse_power_state(text: &str) -> Option<PowerState> {
    match text {
        "On" => Some(PowerState::On),
        "Off" => Some(PowerState::Off),
        "PoweringOn" => Some(PowerState::PoweringOn),
        "PoweringOff" => Some(PowerState::PoweringOff),
        _ => None,
    }
}

fn is_restart(action: ResetAction) -> bool {
    matches!(
        action,
        ResetAction::ForceRestart | ResetAction::GracefulRestart | ResetAction::PowerCycle
    )
}

fn is_refusal(err: &RedfishError) -> bool {
    matches!(err, RedfishError::Status { status: 409, .. })
        || matches!(err, RedfishError::Status { status: 400..=499, detail, .. } if detail.contains("PowerStateOffRequired"))
}

impl RedfishClient {
    /// The system's power state as the BMC reports it now.
    pub async fn read_power_state(&self) -> Result<PowerState, RedfishError> {
        let info = self.refresh().await?;
        info.power.ok_or_else(|| RedfishError::BadResponse {
            host: self.inner.host.clone(),
            path: info.path.clone(),
            reason: "the system has no PowerState".to_owned(),
        })
    }

    /// Polls the power state until it is one of `targets`, for at most `timeout`.
    pub async fn wait_for_power_state(
        &self,
        targets: &[PowerState],
        timeout: Duration,
    ) -> Result<PowerState, RedfishError> {
        let start = self.inner.clock.instant();
        loop {
            let state = self.read_power_state().await?;
            if targets.contains(&state) {
                return Ok(state);
            }
            if self.inner.clock.since(start) >= timeout {
                let wanted: Vec<String> = targets.iter().map(ToString::to_string).collect();
                return Err(RedfishError::Timeout {
                    host: self.inner.host.clone(),
                    system: self.system_path(),
                    what: format!("power state {} (still {state})", wanted.join(" or ")),
                    after: timeout,
                });
            }
            self.inner
                .clock
                .sleep(self.inner.options.poll_interval)
                .await;
        }
    }

    /// Performs `action` (see the module docs for what happens around it). `On` returns once the
    /// system reports `On` or `PoweringOn`; other actions once the BMC accepted them and their
    /// task, if any, completed. `On` when on and `ForceOff`/`GracefulShutdown` when off do nothing.
    pub async fn reset_system(&self, action: ResetAction) -> Result<(), RedfishError> {
        let info = self.refresh().await?;
        self.check_allowed(&info, action)?;
        match (action, info.power) {
            (ResetAction::On, Some(PowerState::On | PowerState::PoweringOn))
            | (ResetAction::ForceOff | ResetAction::GracefulShutdown, Some(PowerState::Off)) => {
                tracing::debug!(bmc = %self.inner.host, %action, "already there: nothing to do");
                return Ok(());
            }
            _ => {}
        }
        match self.post_reset(&info, action).await {
            Ok(()) => {}
            Err(err)
                if self.inner.options.quirks.power_off_when_reset_refused
                    && is_restart(action)
                    && is_refusal(&err) =>
            {
                let off = if action == ResetAction::GracefulRestart
                    && info.allowed.contains(&ResetAction::GracefulShutdown)
                {
                    ResetAction::GracefulShutdown
                } else {
                    ResetAction::ForceOff
                };
                if !info.allowed.contains(&off) || !info.allowed.contains(&ResetAction::On) {
                    return Err(err);
                }
                tracing::info!(bmc = %self.inner.host, %action, "reset refused while on; powering off first");
                self.post_reset(&info, off).await?;
                self.wait_for_power_state(&[PowerState::Off], self.inner.options.power_on_grace)
                    .await?;
                return self.power_on(&info).await;
            }
            Err(err) => return Err(err),
        }
        if action == ResetAction::On {
            self.confirm_power_on(&info).await?;
        }
        Ok(())
    }

    fn check_allowed(&self, info: &SystemInfo, action: ResetAction) -> Result<(), RedfishError> {
        if info.allowed.contains(&action) {
            return Ok(());
        }
        Err(RedfishError::NotAllowed {
            host: self.inner.host.clone(),
            system: info.path.clone(),
            what: "ResetType",
            value: action.to_string(),
            allowed: info.allowed.iter().map(ToString::to_string).collect(),
        })
    }

    async fn power_on(&self, info: &SystemInfo) -> Result<(), RedfishError> {
        self.post_reset(info, ResetAction::On).await?;
        self.confirm_power_on(info).await
    }

    /// Waits for the power-on to show; sends `On` again when the BMC ignored it.
    async fn confirm_power_on(&self, info: &SystemInfo) -> Result<(), RedfishError> {
        let options = &self.inner.options;
        if !options.quirks.retry_ignored_power_on {
            return Ok(());
        }
        let targets = [PowerState::On, PowerState::PoweringOn];
        let mut sent = 1;
        loop {
            match self
                .wait_for_power_state(&targets, options.power_on_grace)
                .await
            {
                Ok(_) => return Ok(()),
                Err(RedfishError::Timeout { .. }) if sent < options.power_on_attempts.max(1) => {
                    tracing::warn!(bmc = %self.inner.host, attempt = sent, "power-on accepted but ignored; sending On again");
                    self.post_reset(info, ResetAction::On).await?;
                    sent += 1;
                }
                Err(RedfishError::Timeout { after, .. }) => {
                    return Err(RedfishError::Timeout {
                        host: self.inner.host.clone(),
                        system: info.path.clone(),
                        what: format!("power-on (On sent {sent} times)"),
                        after: after * sent,
                    });
                }
                Err(other) => return Err(other),
            }
        }
    }

    /// One `POST` of the reset action, following a task monitor if the BMC answers 202.
    async fn post_reset(&self, info: &SystemInfo, action: ResetAction) -> Result<(), RedfishError> {
        let body = json!({"ResetType": action.as_str()});
        let reply = self
            .inner
            .request(Method::POST, &info.reset_target, Some(&body), None)
            .await?;
        match reply.status {
            StatusCode::ACCEPTED => {
                let monitor = reply
                    .headers
                    .get(http::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                match monitor {
                    Some(monitor) => self.follow_task(&monitor).await,
                    None => Ok(()),
                }
            }
            status if status.is_success() => Ok(()),
            _ => Err(self
                .inner
                .reply_error(&Method::POST, &info.reset_target, &reply)),
        }
    }

    /// Polls a task monitor until the task ends, for at most `task_timeout`.
    pub async fn follow_task(&self, monitor: &str) -> Result<(), RedfishError> {
        let path = self
            .inner
            .base
            .join(monitor)
            .map(|u| u.path().to_owned())
            .unwrap_or_else(|_| monitor.to_owned());
        let start = self.inner.clock.instant();
        let timeout = self.inner.options.task_timeout;
        loop {
            if self.inner.clock.since(start) >= timeout {
                return Err(RedfishError::Timeout {
                    host: self.inner.host.clone(),
                    system: self.system_path(),
                    what: format!("task {path} to finish"),
                    after: timeout,
                });
            }
            self.inner
                .clock
                .sleep(self.inner.options.poll_interval)
                .await;
            let reply = self.inner.request(Method::GET, &path, None, None).await?;
            let task_failed = |state: &str, detail: String| RedfishError::TaskFailed {
                host: self.inner.host.clone(),
                monitor: path.clone(),
                state: state.to_owned(),
                detail,
            };
            match reply.status {
                StatusCode::ACCEPTED => continue,
                StatusCode::NO_CONTENT => return Ok(()),
                status if status.is_success() => {
                    let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
                    return match body.get("TaskState").and_then(Value::as_str) {
                        Some(state @ ("Exception" | "Killed" | "Cancelled" | "Interrupted")) => {
                            Err(task_failed(
                                state,
                                self.inner.scrub(
                                    &body
                                        .get("Messages")
                                        .map(Value::to_string)
                                        .unwrap_or_default(),
                                ),
                            ))
                        }
                        _ => Ok(()),
                    };
                }
                status => {
                    return Err(task_failed(
                        &format!("HTTP {}", status.as_u16()),
                        self.inner.error_detail(&reply.body),
                    ));
                }
            }
        }
    }

    pub(crate) fn driver_target(&self) -> String {
        format!("redfish BMC {}", self.inner.host)
    }
}

#[async_trait]
impl Power for RedfishClient {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        self.read_power_state()
            .await
            .map_err(|e| e.into_driver_error(&self.driver_target(), "read the power state"))
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        self.reset_system(action)
            .await
            .map_err(|e| e.into_driver_error(&self.driver_target(), &format!("reset {action}")))
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.system_info().allowed
    }
}
