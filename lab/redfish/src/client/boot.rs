//! Boot source override: `PATCH` of `Boot.BootSourceOverrideEnabled`/`Target` with `If-Match`,
//! refusing targets the BMC does not advertise, and reading the setting back (a BMC that accepts
//! and ignores the PATCH gets it once more, then an error).

use async_trait::async_trait;
use http::{Method, StatusCode};
use rackproof_driver::{BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError};
use serde_json::{Value, json};

use super::{RedfishClient, RedfishError};

fn mode_str(mode: BootOverrideMode) -> &'static str {
    match mode {
        BootOverrideMode::Disabled => "Disabled",
        BootOverrideMode::Once => "Once",
        BootOverrideMode::Continuous => "Continuous",
    }
}

/// Reads `Boot` from a system body; a missing `Boot` means no override.
pub(crate) fn parse_boot(boot: Option<&Value>) -> Result<BootOverride, String> {
    let Some(boot) = boot else {
        return Ok(BootOverride::default());
    };
    let mode = match boot
        .get("BootSourceOverrideEnabled")
        .and_then(Value::as_str)
    {
        None | Some("Disabled") => BootOverrideMode::Disabled,
        Some("Once") => BootOverrideMode::Once,
        Some("Continuous") => BootOverrideMode::Continuous,
        Some(other) => return Err(format!("unknown BootSourceOverrideEnabled {other:?}")),
    };
    let target = match boot.get("BootSourceOverrideTarget").and_then(Value::as_str) {
        None => BootTarget::None,
        Some(text) => text
            .parse()
            .map_err(|e: rackproof_driver::UnknownValue| e.to_string())?,
    };
    Ok(BootOverride { mode, target })
}

/// How often a PATCH is repeated after `412 Precondition Failed` (the system changed meanwhile).
const PRECONDITION_RETRIES: u32 = 3;

impl RedfishClient {
    /// The boot override in force.
    pub async fn read_boot_override(&self) -> Result<BootOverride, RedfishError> {
        Ok(self.refresh().await?.boot)
    }

    /// Sets the boot override and checks that it took effect.
    pub async fn set_boot(&self, setting: BootOverride) -> Result<(), RedfishError> {
        let mut patches = 0;
        let mut stale = 0;
        loop {
            let info = self.refresh().await?;
            if let Some(allowed) = &info.boot_targets
                && !allowed.iter().any(|t| t == setting.target.as_str())
            {
                return Err(RedfishError::NotAllowed {
                    host: self.inner.host.clone(),
                    system: info.path.clone(),
                    what: "BootSourceOverrideTarget",
                    value: setting.target.as_str().to_owned(),
                    allowed: allowed.clone(),
                });
            }
            if patches > 0 && info.boot == setting {
                return Ok(());
            }
            if patches >= 2 {
                return Err(RedfishError::NotApplied {
                    host: self.inner.host.clone(),
                    system: info.path,
                });
            }
            let body = json!({"Boot": {
                "BootSourceOverrideEnabled": mode_str(setting.mode),
                "BootSourceOverrideTarget": setting.target.as_str(),
            }});
            let reply = self
                .inner
                .request(Method::PATCH, &info.path, Some(&body), info.etag.as_deref())
                .await?;
            if reply.status == StatusCode::PRECONDITION_FAILED && stale < PRECONDITION_RETRIES {
                stale += 1;
                tracing::debug!(bmc = %self.inner.host, "system changed under the PATCH; reading it again");
                continue;
            }
            if !reply.status.is_success() {
                return Err(self.inner.reply_error(&Method::PATCH, &info.path, &reply));
            }
            patches += 1;
        }
    }
}

#[async_trait]
impl BootControl for RedfishClient {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        self.read_boot_override()
            .await
            .map_err(|e| e.into_driver_error(&self.driver_target(), "read the boot override"))
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        self.set_boot(setting).await.map_err(|e| {
            e.into_driver_error(
                &self.driver_target(),
                &format!(
                    "set the boot override to {:?} {}",
                    setting.mode,
                    setting.target.as_str()
                ),
            )
        })
    }
}
