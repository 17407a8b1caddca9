//! The lab a run drives, whatever the backend: the one place the engine's steps, faults and
//! machine provider reach the machines through. Each backend implements the same operations;
//! what a backend cannot do is refused before the run starts (`run::unsupported`).

pub(crate) mod guest;
pub(crate) mod images;
pub(crate) mod link;
pub(crate) mod provider;
pub(crate) mod rack;
pub(crate) mod sim;
pub(crate) mod sim_nodes;

use std::pin::Pin;

use futures::Stream;

use crate::engine::lab::images::{ImageLab, ImageNodeError};
use crate::engine::lab::provider::OscLocation;
use crate::engine::lab::sim::{SimLab, SimLabError};
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;
use crate::scenario::{
    BmcQuirk, BootBehaviour, Component, ImageServerAnswer, PowerAction, PowerCutPoint,
};

/// The BMC reset action a scenario's power action takes (every backend alike).
pub(crate) fn reset_action(action: PowerAction) -> rackproof_driver::ResetAction {
    use rackproof_driver::ResetAction;
    match action {
        PowerAction::On => ResetAction::On,
        PowerAction::Off => ResetAction::ForceOff,
        PowerAction::Cycle => ResetAction::PowerCycle,
        PowerAction::Reset => ResetAction::ForceRestart,
        PowerAction::GracefulShutdown => ResetAction::GracefulShutdown,
    }
}

/// Why the lab could not do what a fault or the machine provider asked of a node.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabError {
    /// The `sim` backend's lab refused or failed.
    #[error(transparent)]
    Sim(#[from] SimLabError),
    /// The lab of the node-image backends refused or failed.
    #[error(transparent)]
    Images(#[from] ImageNodeError),
    /// The node images are built before the run; no new build can be published during it.
    #[error("publishing a build during the run is available on `sim` only")]
    PublishUnavailable,
}

/// Console lines of one node, as they are printed.
pub(crate) type Lines = Pin<Box<dyn Stream<Item = String> + Send>>;

/// The machines of a run.
#[derive(Debug)]
pub enum Lab {
    Sim(SimLab),
    Images(Box<ImageLab>),
}

impl Lab {
    /// The credentials the lab made (none on `sim`, whose nodes and BMCs live in this process).
    pub fn credentials(&self) -> Vec<String> {
        match self {
            Self::Sim(_) => Vec::new(),
            Self::Images(lab) => lab.credentials(),
        }
    }

    /// Every lab node's name.
    pub fn node_names(&self) -> Vec<String> {
        match self {
            Self::Sim(lab) => lab.nodes.keys().cloned().collect(),
            Self::Images(lab) => lab.node_names(),
        }
    }

    /// Gives node `name` a fresh disk with `version` and the identity of a node of `pool`, the
    /// pool of the Machine, which reads `osc`; the node stays off. (The node images carry one
    /// pool's identity: a scenario with several pools runs on `sim`.)
    pub(crate) async fn provision(
        &self,
        name: &str,
        pool: &str,
        osc: &OscLocation,
        version: &str,
    ) -> Result<(), LabError> {
        match self {
            Self::Sim(lab) => Ok(lab.provision(name, pool, osc, version)?),
            Self::Images(lab) => Ok(lab.provision(name, osc, version).await?),
        }
    }

    /// The node's Machine went away: it no longer acts as a node, and is powered off.
    pub async fn decommission(&self, name: &str, shared: &Shared) {
        match self {
            Self::Sim(lab) => lab.decommission(name, shared).await,
            Self::Images(lab) => lab.decommission(name, shared).await,
        }
    }

    /// Powers a node on through its BMC and waits until its OS is up, retrying a power-on the BMC
    /// accepted but ignored. Errors are recorded in the timeline.
    pub async fn power_on_and_wait(&self, name: &str, shared: &Shared) {
        match self {
            Self::Sim(lab) => lab.power_on_and_wait(name, shared).await,
            Self::Images(lab) => lab.power_on_and_wait(name, shared).await,
        }
    }

    /// A power action through the node's BMC, recorded in the timeline.
    pub async fn power(&self, name: &str, action: PowerAction, shared: &Shared) {
        match self {
            Self::Sim(lab) => lab.power(name, action, shared).await,
            Self::Images(lab) => lab.power(name, action, shared).await,
        }
    }

    /// The node's console lines from now on; `None` for an unknown node.
    pub fn console(&self, name: &str) -> Option<Lines> {
        match self {
            Self::Sim(lab) => lab.console(name),
            Self::Images(lab) => lab.console(name),
        }
    }

    /// Boots of the node so far.
    pub async fn boots(&self, name: &str) -> u64 {
        match self {
            Self::Sim(lab) => lab.node(name).map_or(0, |n| n.machine.boots()),
            Self::Images(lab) => lab.boots(name).await,
        }
    }

    /// Fault: from its next download of `version` on, `name` gets a build that boots like
    /// `boot` (a copy already on its ESP is unchanged).
    pub(crate) fn node_build(
        &self,
        name: &str,
        version: &str,
        boot: &BootBehaviour,
    ) -> Result<(), LabError> {
        match self {
            Self::Sim(lab) => Ok(lab.node_build(
                name,
                version,
                &crate::engine::lab::sim_nodes::behaviour(boot),
            )?),
            Self::Images(lab) => Ok(lab.node_build(name, version, boot)?),
        }
    }

    /// Step `publish`: the image server serves a new build of `version` that boots like `boot`
    /// to every node from now on (replacing the nodes' own builds of it).
    pub(crate) fn publish(&self, version: &str, boot: &BootBehaviour) -> Result<(), LabError> {
        match self {
            Self::Sim(lab) => {
                Ok(lab.publish(version, &crate::engine::lab::sim_nodes::behaviour(boot))?)
            }
            Self::Images(_) => Err(LabError::PublishUnavailable),
        }
    }

    /// Fault: cuts the node's power at `point` of its next update; returns once the power is
    /// gone (`false`: the point was never reached).
    pub async fn cut_power(&self, name: &str, point: PowerCutPoint, shared: &Shared) -> bool {
        match self {
            Self::Sim(lab) => lab.cut_power(name, point, shared).await,
            Self::Images(lab) => lab.cut_power(name, point, shared).await,
        }
    }

    /// Fault: the node's BMC misbehaves for the next `count` requests (all, when `None`).
    pub(crate) fn add_bmc_quirk(
        &self,
        name: &str,
        quirk: &BmcQuirk,
        count: Option<u32>,
    ) -> Result<(), LabError> {
        match self {
            Self::Sim(lab) => {
                if let Some(node) = lab.node(name) {
                    node.bmc.add_quirk(quirk, count);
                }
                Ok(())
            }
            Self::Images(lab) => Ok(lab.add_bmc_quirk(name, quirk, count)?),
        }
    }

    /// Fault: the image server answers the node's next `count` requests (all, when `None`) badly.
    pub fn image_server_fault(&self, name: &str, answer: ImageServerAnswer, count: Option<u32>) {
        match self {
            Self::Sim(lab) => {
                if let Some(node) = lab.node(name) {
                    node.guest.image_server_fault(answer, count);
                }
            }
            Self::Images(lab) => lab.image_server_fault(name, answer, count),
        }
    }

    /// Fault: kills the node's `component` (the agent or the kubelet) while the node stays up;
    /// `true` if it was running.
    pub(crate) async fn kill_service(
        &self,
        name: &str,
        component: Component,
    ) -> Result<bool, LabError> {
        match self {
            Self::Sim(lab) => Ok(lab
                .node(name)
                .zip(sim_service(component))
                .is_some_and(|(n, service)| n.machine.kill_guest(service))),
            Self::Images(lab) => Ok(lab.kill_service(name, component).await?),
        }
    }

    /// Starts the node's `component` again after [`Lab::kill_service`]; `true` if it started
    /// (`false`: it was running again, as after a reboot).
    pub(crate) async fn restart_service(
        &self,
        name: &str,
        component: Component,
    ) -> Result<bool, LabError> {
        match self {
            Self::Sim(lab) => Ok(lab
                .node(name)
                .zip(sim_service(component))
                .is_some_and(|(n, service)| n.machine.restart_guest(service))),
            Self::Images(lab) => Ok(lab.restart_service(name, component).await?),
        }
    }

    /// Fault: disconnects (`up: false`) or reconnects the node's network.
    pub(crate) async fn set_link(&self, name: &str, up: bool) -> Result<(), LabError> {
        match self {
            Self::Sim(lab) => Ok(lab.set_link(name, up)?),
            Self::Images(lab) => Ok(lab.set_link(name, up).await?),
        }
    }

    /// Records every console line of every node into `logs` (the run's console artifacts).
    pub fn capture_consoles(
        &self,
        logs: &LineLogs,
        shared: &Shared,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.node_names()
            .into_iter()
            .filter_map(|name| {
                let mut lines = self.console(&name)?;
                let logs = logs.clone();
                let shared = shared.clone();
                Some(tokio::spawn(async move {
                    use futures::StreamExt as _;
                    while let Some(line) = lines.next().await {
                        logs.push(&shared, &name, &line);
                    }
                }))
            })
            .collect()
    }

    /// Powers every machine off and releases what the lab holds (the end of a run).
    pub async fn tear_down(&self) {
        match self {
            Self::Sim(lab) => lab.tear_down().await,
            Self::Images(lab) => lab.tear_down().await,
        }
    }
}

/// The service of a simulated node that runs `component` (none for the components that do not
/// run on a node).
fn sim_service(component: Component) -> Option<&'static str> {
    match component {
        Component::Agent => Some(sim_nodes::AGENT_SERVICE),
        Component::Kubelet => Some(sim_nodes::KUBELET_SERVICE),
        Component::Orchestrator | Component::Watchdog => None,
    }
}
