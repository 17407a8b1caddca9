//! Provisioning and powering the node-image lab's nodes: a fresh disk and identity for a
//! Machine, power-on through the node's BMC until its OS reports up, and every BMC request
//! recorded in the timeline.

use std::time::Duration;

use rackproof_driver::{DriverError, Power, PowerState, ResetAction};
use rackproof_lab::resource::BmcKind as LabBmcKind;
use rackproof_lab::strategy::{self, WaitOptions};
use rackproof_qemu::NodeIdentity;
use rackproof_std::LockExt;
use regex::Regex;

use super::{ImageLab, ImageNode, ImageNodeError, Served};
use crate::engine::judge::timeline::EntryKind;
use crate::engine::lab::Lines;
use crate::engine::lab::guest::Guest;
use crate::engine::lab::provider::OscLocation;
use crate::engine::shared::Shared;
use crate::scenario::PowerAction;

/// How long a node may take from power-on to its OS reporting up (TCG on a loaded machine).
const BOOT_DEADLINE: Duration = Duration::from_secs(600);

impl ImageLab {
    /// Hands the node the pool's OSC and a fresh disk with `version` (a rack server: checks it
    /// runs `version`, and leaves it off with the identity on its state partition).
    pub(crate) async fn provision(
        &self,
        name: &str,
        osc: &OscLocation,
        version: &str,
    ) -> Result<(), ImageNodeError> {
        let node = self.node(name)?;
        self.cluster.confine_node(name, &self.pool, osc);
        let identity = NodeIdentity {
            osc_secret: format!("{}/{}", osc.namespace, osc.name),
            ..node.identity.clone()
        };
        if let Guest::Rack(server) = &node.machine {
            crate::engine::lab::rack::provision(
                server,
                &node.machine,
                &identity,
                version,
                &self.clock,
            )
            .await
            .map_err(|e| ImageNodeError::Rack(Box::new(e)))?;
            return Ok(());
        }
        node.machine.set_identity(&identity).await?;
        let fresh = node.installed.locked().clone() == version && node.machine.boots().await == 0;
        if !fresh {
            if version != self.base_version {
                return Err(ImageNodeError::NotOnDisk {
                    installed: self.base_version.clone(),
                    wanted: version.to_owned(),
                });
            }
            let disk = self.images.disk(version).map_err(ImageNodeError::Disk)?;
            node.machine.reimage(&disk).await?;
            *node.installed.locked() = version.to_owned();
        }
        Ok(())
    }

    /// Powers the node off (its Machine went away).
    pub async fn decommission(&self, name: &str, shared: &Shared) {
        self.power(name, PowerAction::Off, shared).await;
    }

    /// Powers the node on through its BMC (asking again when the BMC ignores it) and waits until
    /// the OS reports up on the console.
    pub async fn power_on_and_wait(&self, name: &str, shared: &Shared) {
        let Ok(node) = self.node(name) else { return };
        match self
            .clock
            .timeout(BOOT_DEADLINE, self.bring_up(name, node, shared))
            .await
        {
            Ok(Ok(version)) => {
                shared.record(Some(name), EntryKind::Lab, format!("OS {version} is up"))
            }
            Ok(Err(e)) => shared.record(
                Some(name),
                EntryKind::Lab,
                format!("power-on failed: {}", rackproof_std::error_chain(&e)),
            ),
            Err(_) => shared.record(
                Some(name),
                EntryKind::Lab,
                format!(
                    "power-on failed: the OS did not come up within {}",
                    rackproof_clock::format_duration(BOOT_DEADLINE)
                ),
            ),
        }
    }

    async fn bring_up(
        &self,
        name: &str,
        node: &ImageNode,
        shared: &Shared,
    ) -> Result<String, ImageNodeError> {
        let up = Regex::new(r"^rackproof-os (\S+): up$").expect("a valid pattern");
        let started = Regex::new(r"^rackproof-os \S+: init started").expect("a valid pattern");
        let mark = node.machine.mark();
        let state = node
            .bmc
            .power_state()
            .await
            .map_err(|source| ImageNodeError::PowerState {
                node: name.to_owned(),
                source,
            })?;
        if state == PowerState::On {
            // Up already if the latest boot reached `up`.
            let lines = node.machine.lines();
            let latest = lines
                .iter()
                .rev()
                .find(|l| up.is_match(l) || started.is_match(l));
            if let Some(caps) = latest.and_then(|l| up.captures(l)) {
                return Ok(caps[1].to_owned());
            }
        } else {
            self.power_on(name, node, shared).await?;
        }
        let line = node
            .machine
            .wait_line_since(&self.clock, mark, &up, BOOT_DEADLINE)
            .await?;
        Ok(up
            .captures(&line)
            .map(|c| c[1].to_owned())
            .unwrap_or_default())
    }

    /// Powers the node on through its BMC with the lab's one power-on procedure
    /// ([`rackproof_lab::strategy::power_on`]); each request and each repetition is a timeline
    /// entry.
    async fn power_on(
        &self,
        name: &str,
        node: &ImageNode,
        shared: &Shared,
    ) -> Result<(), ImageNodeError> {
        let recorded = RecordedBmc { name, node, shared };
        let options = WaitOptions::default();
        let retries = options.power_on_attempts.saturating_sub(1);
        strategy::power_on(name, &recorded, &self.clock, &options, |retry| {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!(
                    "the BMC accepted power-on but the machine stayed off; asking again ({retry}/{retries})"
                ),
            );
        })
        .await?;
        Ok(())
    }

    /// A power action through the node's BMC, recorded in the timeline.
    pub async fn power(&self, name: &str, action: PowerAction, shared: &Shared) {
        let Ok(node) = self.node(name) else { return };
        let reset = crate::engine::lab::reset_action(action);
        let recorded = RecordedBmc { name, node, shared };
        if let Err(e) = recorded.reset(reset).await {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!("{reset} failed: {}", rackproof_std::error_chain(&e)),
            );
        }
    }

    /// The node's console lines from now on.
    pub fn console(&self, name: &str) -> Option<Lines> {
        Some(self.nodes.get(name)?.machine.subscribe())
    }

    pub async fn boots(&self, name: &str) -> u64 {
        match self.nodes.get(name) {
            Some(node) => node.machine.boots().await,
            None => 0,
        }
    }
}

/// The timeline's words for a BMC request.
fn describe(served: &Served, action: ResetAction) -> String {
    match served {
        Served::Redfish { .. } | Served::Rack(LabBmcKind::Redfish) => {
            format!("redfish: POST ComputerSystem.Reset {{ResetType: {action}}}")
        }
        Served::Ipmi { .. } | Served::Rack(LabBmcKind::Ipmi) => format!(
            "ipmi: chassis control {}",
            crate::engine::lab::sim::ipmi_name(action)
        ),
    }
}

/// A node's BMC client that writes each reset request it sends into the timeline, as the BMC's
/// log would show it.
#[derive(Debug)]
struct RecordedBmc<'a> {
    name: &'a str,
    node: &'a ImageNode,
    shared: &'a Shared,
}

#[async_trait::async_trait]
impl Power for RecordedBmc<'_> {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        self.node.bmc.power_state().await
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        self.shared.record(
            Some(self.name),
            EntryKind::Bmc,
            describe(&self.node.served, action),
        );
        self.node.bmc.reset(action).await
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.node.bmc.allowed_resets()
    }
}
