//! The node-image lab's faults: broken update images, power cuts at a point of an update, BMC
//! quirks through the Redfish emulator, image-server answers and network partitions.

use futures::StreamExt as _;
use rackproof_driver::ResetAction;
use rackproof_lab::image_server::ImageFault;
use rackproof_redfish::FaultRule;

use super::{ImageLab, ImageNodeError, Served, variant_suffix};
use crate::engine::judge::timeline::EntryKind;
use crate::engine::shared::Shared;
use crate::scenario::{BmcQuirk, BootBehaviour, ImageServerAnswer, PowerCutPoint};

/// The Redfish path of the one system's reset action.
const RESET_PATH: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";
/// The line `os-update` logs just before its first write to the ESP.
const SLOT_WRITE_LINE: &str = "installing the slot on the ESP";

impl ImageLab {
    /// The image server hands `name` the variant of `version` that boots like `boot` from now on
    /// (the images have variants of the update target only).
    pub(crate) fn node_build(
        &self,
        name: &str,
        version: &str,
        boot: &BootBehaviour,
    ) -> Result<(), ImageNodeError> {
        self.node(name)?;
        if version != self.new_version {
            return Err(ImageNodeError::NoVariants {
                version: version.to_owned(),
                target: self.new_version.clone(),
            });
        }
        let suffix = variant_suffix(boot, &self.base_version)?;
        self.image_server
            .serve_variant(name, version, &format!("{version}{suffix}"));
        Ok(())
    }

    /// Cuts the node's power (QMP `quit`) at `point` of its next update.
    pub async fn cut_power(&self, name: &str, point: PowerCutPoint, shared: &Shared) -> bool {
        let Ok(node) = self.node(name) else {
            return false;
        };
        let reached = match point {
            PowerCutPoint::Download => {
                let mut events = self.image_server.subscribe();
                self.image_server.stall_next_payload(name);
                loop {
                    match events.recv().await {
                        Ok(request)
                            if request.node.as_deref() == Some(name)
                                && request.answer.starts_with("stalled") =>
                        {
                            break true;
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break false,
                    }
                }
            }
            PowerCutPoint::SlotWrite => self.wait_line(name, |l| l.contains(SLOT_WRITE_LINE)).await,
            PowerCutPoint::FirstBoot => {
                let new = format!("rackproof-os {}: init started", self.new_version);
                self.wait_line(name, |l| l.ends_with(": rebooting")).await
                    && self.wait_line(name, |l| l.starts_with(&new)).await
            }
        };
        if !reached {
            return false;
        }
        if let Err(e) = node.machine.power().reset(ResetAction::ForceOff).await {
            shared.record(
                Some(name),
                EntryKind::Fault,
                format!(
                    "cutting the power failed: {}",
                    rackproof_std::error_chain(&e)
                ),
            );
            return false;
        }
        true
    }

    async fn wait_line(&self, name: &str, wanted: impl Fn(&str) -> bool) -> bool {
        let Some(mut lines) = self.console(name) else {
            return false;
        };
        while let Some(line) = lines.next().await {
            if wanted(&line) {
                return true;
            }
        }
        false
    }

    /// Sets a quirk as fault rules of the node's Redfish emulator.
    pub(crate) fn add_bmc_quirk(
        &self,
        name: &str,
        quirk: &BmcQuirk,
        count: Option<u32>,
    ) -> Result<(), ImageNodeError> {
        let node = self.node(name)?;
        let Served::Redfish { emulator, .. } = &node.served else {
            return Err(ImageNodeError::NoRedfishEmulator);
        };
        let rule = match quirk {
            BmcQuirk::IgnorePowerOn => {
                FaultRule::ignore_action("POST", RESET_PATH).for_reset_type(ResetAction::On)
            }
            BmcQuirk::Status(code) => FaultRule::status("POST", RESET_PATH, *code),
            BmcQuirk::Latency(span) => FaultRule::latency(None, "/redfish/v1/*", span.get()),
            BmcQuirk::ExpireSessions => FaultRule::expire_session("/redfish/v1/*"),
        };
        let rule = match count {
            Some(n) => rule.times(n),
            None => rule,
        };
        emulator.add_fault(rule)?;
        Ok(())
    }

    pub fn image_server_fault(&self, name: &str, answer: ImageServerAnswer, count: Option<u32>) {
        let fault = match answer {
            ImageServerAnswer::Unreachable => ImageFault::Unreachable,
            ImageServerAnswer::Status(code) => ImageFault::Status(code),
            ImageServerAnswer::Corrupt => ImageFault::Corrupt,
        };
        self.image_server.add_fault(name, fault, count);
    }

    pub(crate) async fn set_link(&self, name: &str, up: bool) -> Result<(), ImageNodeError> {
        Ok(self.node(name)?.machine.set_link(up).await?)
    }
}
