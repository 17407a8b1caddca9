//! The `sim` backend's lab: one simulated machine per lab node, each running the real node agent
//! in-process (talking to the API server as that node), a BMC in front of each machine with the
//! scenario's quirks. The machine provider (`provider`) hands these machines to the
//! orchestrator's Machine objects.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use inplace_agent::manifest::SlotKeyPair;
use inplace_agent::osupdate::source::MemorySource;
use rackproof_clock::Clock;
use rackproof_driver::{DriverError, Power, PowerState, ResetAction};
use rackproof_lab::console::{ConsoleLine, ConsoleSource};
use rackproof_lab::sim::{Behaviour, BootTiming, Catalog, SimError, SimMachine, SlotArtifact};
use rackproof_lab::strategy::{NodeControl, WaitOptions};
use rackproof_std::LockExt;

use crate::engine::cluster::api::ApiCluster;
use crate::engine::cluster::api::ClusterError;
use crate::engine::judge::timeline::EntryKind;
use crate::engine::lab::Lines;
use crate::engine::lab::provider::OscLocation;
use crate::engine::lab::sim_nodes::{self, AgentGuest};
use crate::engine::shared::Shared;
use crate::scenario::{BmcKind, BmcQuirk, PowerAction, PowerCutPoint, Scenario};

/// How long an armed power cut may take to happen (the update reaching that point).
const POWER_CUT_WAIT: Duration = Duration::from_secs(24 * 3600);

/// The epoch every simulated run starts at (virtual time).
pub(crate) const EPOCH: &str = "2026-01-01T00:00:00Z";

/// Why the simulated lab could not be built or a node could not be changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SimLabError {
    /// The scenario names no lab node `node`.
    #[error("no lab node {node}")]
    UnknownNode { node: String },
    /// The image server's slots could not be made.
    #[error(transparent)]
    Slots(#[from] sim_nodes::SlotsError),
    /// The cluster did not give a node its client.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A node's simulated machine could not be built.
    #[error("failed to build simulated machine {node}")]
    Machine {
        node: String,
        #[source]
        source: SimError,
    },
    /// A node's disk could not be given another OS version (the error names the node).
    #[error(transparent)]
    Reimage(SimError),
    /// The image server has no build of a version a disk was to get.
    #[error("the image server has no build of {version}")]
    UnknownVersion { version: String },
}

/// One lab node.
#[derive(Debug)]
pub struct SimNode {
    pub machine: SimMachine,
    pub guest: Arc<AgentGuest>,
    pub bmc: Arc<SimBmc>,
}

/// The machines' boot timing: the scenario's `lab.bootTiming` over the simulation's defaults.
pub fn boot_timing(scenario: &Scenario) -> BootTiming {
    let defaults = BootTiming::default();
    let Some(given) = scenario.lab.boot_timing else {
        return defaults;
    };
    BootTiming {
        firmware: given.firmware.map_or(defaults.firmware, |s| s.get()),
        loader: given.loader.map_or(defaults.loader, |s| s.get()),
        kernel: given.kernel.map_or(defaults.kernel, |s| s.get()),
        ..defaults
    }
}

/// The simulated lab.
#[derive(Debug)]
pub struct SimLab {
    pub nodes: BTreeMap<String, SimNode>,
    cluster: ApiCluster,
    clock: Clock,
    /// The image server every node downloads from (unless it has its own build of a version).
    source: MemorySource,
    /// The build of each version the image server serves now (what a fresh disk gets too).
    builds: Mutex<Catalog>,
    /// Signs the slots of builds made during the run (boxed: a key pair is large, and `Lab`
    /// holds this lab by value).
    key: Box<SlotKeyPair>,
}

impl SimLab {
    /// Builds every lab node, powered off, with its pool's starting OS installed (a spare: the
    /// first pool's; it gets a fresh disk when a Machine takes it).
    pub(crate) async fn build(
        scenario: &Scenario,
        cluster: &ApiCluster,
        clock: &Clock,
        shared: &Shared,
    ) -> Result<Self, SimLabError> {
        let catalog = sim_nodes::catalog(scenario);
        let key = SlotKeyPair::from_seed(seed_bytes(scenario.seed));
        let source = sim_nodes::image_server(scenario, &catalog, &key)?;
        let timing = boot_timing(scenario);
        let mut nodes = BTreeMap::new();
        let owners = scenario.node_pools();
        for name in scenario.lab.node_names() {
            let pool = owners
                .get(&name)
                .and_then(|pool| scenario.pool_named(pool))
                .unwrap_or(scenario.first_pool());
            let guest = Arc::new(
                AgentGuest::new(
                    &name,
                    cluster
                        .node_client(&name)
                        .await
                        .map_err(SimLabError::Cluster)?,
                    &pool.kubernetes,
                    source.clone(),
                    key.public(),
                )
                .with_node_labels(cluster.node_labels()),
            );
            let machine = SimMachine::builder(name.clone(), clock.clone())
                .catalog(catalog.clone())
                .installed(&pool.os.value)
                .timing(timing)
                .guest(guest.clone())
                .build()
                .map_err(|source| SimLabError::Machine {
                    node: name.clone(),
                    source,
                })?;
            guest.attach_disk(machine.esp().clone());
            let bmc = Arc::new(SimBmc {
                node: name.clone(),
                kind: scenario.lab.bmc,
                machine: machine.clone(),
                clock: clock.clone(),
                shared: shared.clone(),
                quirks: Mutex::default(),
            });
            nodes.insert(
                name,
                SimNode {
                    machine,
                    guest,
                    bmc,
                },
            );
        }
        Ok(Self {
            nodes,
            cluster: cluster.clone(),
            clock: clock.clone(),
            source,
            builds: Mutex::new(catalog),
            key: Box::new(key),
        })
    }

    /// The node called `name` (names were validated against the lab when the scenario loaded).
    pub fn node(&self, name: &str) -> Option<&SimNode> {
        self.nodes.get(name)
    }

    /// The node called `name`, or the error that names it.
    fn known(&self, name: &str) -> Result<&SimNode, SimLabError> {
        self.node(name).ok_or_else(|| SimLabError::UnknownNode {
            node: name.to_owned(),
        })
    }

    fn control(&self, node: &SimNode) -> NodeControl {
        NodeControl::new(
            node.machine.name(),
            node.bmc.clone(),
            Arc::new(node.machine.clone()),
            self.clock.clone(),
        )
    }

    /// Powers a node on through its BMC and waits until its OS is up, retrying a power-on the BMC
    /// accepted but ignored. Errors are recorded in the timeline.
    pub async fn power_on_and_wait(&self, name: &str, shared: &Shared) {
        let Some(node) = self.node(name) else { return };
        let options = WaitOptions {
            deadline: Duration::from_secs(900),
            ..WaitOptions::default()
        };
        match self.control(node).power_on_and_wait_until_up(options).await {
            Ok(version) => shared.record(Some(name), EntryKind::Lab, format!("OS {version} is up")),
            Err(e) => shared.record(
                Some(name),
                EntryKind::Lab,
                format!("power-on failed: {}", rackproof_std::error_chain(&e)),
            ),
        }
    }

    /// A power action through the node's BMC, recorded in the timeline.
    pub async fn power(&self, name: &str, action: PowerAction, shared: &Shared) {
        let Some(node) = self.node(name) else { return };
        let reset = crate::engine::lab::reset_action(action);
        if let Err(e) = node.bmc.reset(reset).await {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!("{reset} failed: {}", rackproof_std::error_chain(&e)),
            );
        }
    }

    /// Gives node `name` a fresh disk with `version` and binds its agent, as a node of `pool`,
    /// to the pool's OSC.
    pub(crate) fn provision(
        &self,
        name: &str,
        pool: &str,
        osc: &OscLocation,
        version: &str,
    ) -> Result<(), SimLabError> {
        let node = self.known(name)?;
        self.cluster.confine_node(name, pool, osc);
        let build = self
            .builds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .artifact(version)
            .ok_or_else(|| SimLabError::UnknownVersion {
                version: version.to_owned(),
            })?;
        node.machine
            .reimage_with(&build)
            .map_err(SimLabError::Reimage)?;
        node.guest
            .bind(Some(sim_nodes::agent_config(name, pool, osc)));
        Ok(())
    }

    /// Unbinds the node's agent and powers the node off.
    pub async fn decommission(&self, name: &str, shared: &Shared) {
        let Some(node) = self.node(name) else { return };
        node.guest.bind(None);
        if let Err(e) = node.bmc.reset(ResetAction::ForceOff).await {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!("power-off failed: {}", rackproof_std::error_chain(&e)),
            );
        }
    }

    /// Cuts (`up: false`) or restores node `name`'s network (fault `partition`).
    pub(crate) fn set_link(&self, name: &str, up: bool) -> Result<(), SimLabError> {
        self.known(name)?.guest.link.set(up);
        Ok(())
    }

    /// The node's console lines from now on.
    pub fn console(&self, name: &str) -> Option<Lines> {
        let (_, lines) = self.node(name)?.machine.subscribe();
        Some(Box::pin(futures::stream::unfold(
            lines,
            |mut lines| async move { next_line(&mut lines).await.map(|l| (l.text, lines)) },
        )))
    }

    /// Arms a power cut at `point` of the node's next update and waits until the power is gone.
    pub async fn cut_power(&self, name: &str, point: PowerCutPoint, shared: &Shared) -> bool {
        let Some(node) = self.node(name) else {
            return false;
        };
        match point {
            PowerCutPoint::Download => node.guest.cut_power_at_next_download(),
            PowerCutPoint::SlotWrite => node.machine.cut_power_at_next_esp_write(),
            PowerCutPoint::FirstBoot => {
                // The loader's first write of the new entry's boot is its counter rename.
                let (_, mut lines) = node.machine.subscribe();
                loop {
                    match next_line(&mut lines).await {
                        Some(line) if line.text == "rackproof-os: rebooting" => break,
                        Some(_) => {}
                        None => return false,
                    }
                }
                node.machine.cut_power_at_next_esp_write();
            }
        }
        let off = async {
            loop {
                if matches!(node.machine.power_state().await, Ok(PowerState::Off)) {
                    return;
                }
                shared.clock().sleep(Duration::from_secs(1)).await;
            }
        };
        shared.clock().timeout(POWER_CUT_WAIT, off).await.is_ok()
    }

    /// Fault `bootFailure`: from its next download of `version` on, `name` gets a build that
    /// boots like `behaviour`. What is on its ESP stays as it is: the bytes decide what boots.
    pub(crate) fn node_build(
        &self,
        name: &str,
        version: &str,
        behaviour: &Behaviour,
    ) -> Result<(), SimLabError> {
        let node = self.known(name)?;
        node.guest
            .source
            .own_build(&SlotArtifact::build(version, behaviour), &self.key)?;
        Ok(())
    }

    /// Step `publish`: the image server serves a new build of `version` that boots like
    /// `behaviour` to every node (their own builds of it are dropped) and to fresh disks.
    pub(crate) fn publish(&self, version: &str, behaviour: &Behaviour) -> Result<(), SimLabError> {
        sim_nodes::put_slot(
            &self.source,
            &SlotArtifact::build(version, behaviour),
            &self.key,
        )?;
        let mut builds = self.builds.locked();
        *builds = std::mem::take(&mut *builds).with(version, behaviour.clone());
        for node in self.nodes.values() {
            node.guest.source.drop_own_build(version);
        }
        Ok(())
    }

    /// Powers every machine off (the end of a run).
    pub async fn tear_down(&self) {
        for node in self.nodes.values() {
            let _ = node.machine.reset(ResetAction::ForceOff).await;
        }
    }
}

/// The next console line; lines lost to a slow reader are skipped. `None` once the machine is
/// gone.
pub(crate) async fn next_line(
    lines: &mut tokio::sync::broadcast::Receiver<ConsoleLine>,
) -> Option<ConsoleLine> {
    loop {
        match lines.recv().await {
            Ok(line) => return Some(line),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        }
    }
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&seed.to_le_bytes());
    }
    bytes
}

/// A BMC in front of a simulated machine (Redfish or IPMI by the scenario's `lab.bmc`), with
/// the quirks a scenario sets. The client side is modelled too: 5xx answers are retried with
/// backoff, an expired session is logged into again, as `rackproof-redfish`'s client does.
#[derive(Debug)]
pub struct SimBmc {
    node: String,
    kind: BmcKind,
    machine: SimMachine,
    clock: Clock,
    shared: Shared,
    quirks: Mutex<Vec<ActiveQuirk>>,
}

#[derive(Debug, Clone)]
struct ActiveQuirk {
    quirk: BmcQuirk,
    /// Requests still affected (`None`: all).
    remaining: Option<u32>,
}

/// Retries of one request answered with a 5xx before the client gives up.
const SERVER_ERROR_RETRIES: u32 = 4;

impl SimBmc {
    /// Sets a quirk for the next `count` requests (all, when absent).
    pub fn add_quirk(&self, quirk: &BmcQuirk, count: Option<u32>) {
        if let BmcQuirk::IgnorePowerOn = quirk {
            self.machine.ignore_power_on(count.unwrap_or(u32::MAX));
            return;
        }
        self.quirks.locked().push(ActiveQuirk {
            quirk: quirk.clone(),
            remaining: count,
        });
    }

    /// The quirks affecting the next request (and uses one of each count).
    fn take_quirks(&self) -> Vec<BmcQuirk> {
        let mut quirks = self.quirks.locked();
        let mut now = Vec::new();
        for active in quirks.iter_mut() {
            match &mut active.remaining {
                Some(0) => continue,
                Some(n) => *n -= 1,
                None => {}
            }
            now.push(active.quirk.clone());
        }
        quirks.retain(|q| q.remaining != Some(0));
        now
    }

    fn describe(&self, action: ResetAction) -> String {
        match self.kind {
            BmcKind::Redfish => {
                format!("redfish: POST ComputerSystem.Reset {{ResetType: {action}}}")
            }
            BmcKind::Ipmi => format!("ipmi: chassis control {}", ipmi_name(action)),
        }
    }
}

pub(crate) fn ipmi_name(action: ResetAction) -> &'static str {
    match action {
        ResetAction::On => "power on",
        ResetAction::ForceOff => "power off",
        ResetAction::GracefulShutdown => "soft",
        ResetAction::GracefulRestart | ResetAction::ForceRestart => "reset",
        ResetAction::PowerCycle => "power cycle",
        ResetAction::Nmi => "diag",
    }
}

#[async_trait]
impl Power for SimBmc {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        self.machine.power_state().await
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let request = self.describe(action);
        let mut attempt = 0;
        loop {
            let quirks = self.take_quirks();
            for quirk in &quirks {
                match quirk {
                    BmcQuirk::Latency(span) => self.clock.sleep(span.get()).await,
                    BmcQuirk::ExpireSessions => {
                        self.shared.record(
                            Some(&self.node),
                            EntryKind::Bmc,
                            "session expired (401); logged in again",
                        );
                    }
                    _ => {}
                }
            }
            let status = quirks.iter().find_map(|q| match q {
                BmcQuirk::Status(code) => Some(*code),
                _ => None,
            });
            match status {
                Some(code) if (500..600).contains(&code) && attempt < SERVER_ERROR_RETRIES => {
                    attempt += 1;
                    let backoff = Duration::from_secs(1 << attempt);
                    self.shared.record(
                        Some(&self.node),
                        EntryKind::Bmc,
                        format!(
                            "{request} → {code}; retrying in {}",
                            rackproof_clock::format_duration(backoff)
                        ),
                    );
                    self.clock.sleep(backoff).await;
                }
                Some(code) if code >= 400 => {
                    self.shared.record(
                        Some(&self.node),
                        EntryKind::Bmc,
                        format!("{request} → {code}; giving up"),
                    );
                    return Err(DriverError::Refused {
                        action: action.to_string(),
                        target: self.node.clone(),
                        reason: format!("the BMC answered {code}"),
                    });
                }
                _ => {
                    self.shared
                        .record(Some(&self.node), EntryKind::Bmc, request);
                    return self.machine.reset(action).await;
                }
            }
        }
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.machine.allowed_resets()
    }
}
