//! Faults: waiting for a fault's trigger (a time, a node state, a console line, the Nth boot)
//! and firing it on the lab (any backend, through [`crate::engine::lab::Lab`]) or the components.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use rackproof_std::LockExt;
use regex::Regex;
use tracing::Instrument;

use crate::engine::cluster::objects::NAMESPACE;
use crate::engine::judge::timeline::EntryKind;
use crate::engine::run::Ctx;
use crate::scenario::{Component, Fault, FaultAction, PowerAction, Trigger};

/// Waits for the fault's trigger, then fires it. Runs as its own task, in a
/// `fault{n, kind, node}` span (`n` counts the scenario's `faults` from 1 in file order).
pub(crate) async fn arm(ctx: &Ctx, number: usize, fault: &Fault) {
    let span = tracing::info_span!(
        "fault",
        n = number,
        kind = %fault.action.kind(),
        node = tracing::field::Empty,
    );
    if let Some(node) = fault.action.node() {
        span.record("node", tracing::field::display(node));
    }
    async {
        if triggered(ctx, &fault.when).await {
            fire(ctx, &fault.action).await;
        }
    }
    .instrument(span)
    .await;
}

async fn triggered(ctx: &Ctx, trigger: &Trigger) -> bool {
    use futures::StreamExt as _;
    match trigger {
        Trigger::After(span) => {
            ctx.shared.clock().sleep(span.get()).await;
            true
        }
        Trigger::NodeReaches(event) => {
            let (node, state) = (event.node.value.clone(), event.state);
            ctx.shared
                .wait_until(Duration::MAX, move |judge| judge.node_is(&node, state))
                .await
        }
        Trigger::Console(console) => {
            let Ok(pattern) = Regex::new(&console.matches) else {
                return false;
            };
            let Some(mut lines) = ctx.lab.console(&console.node.value) else {
                return false;
            };
            while let Some(line) = lines.next().await {
                if pattern.is_match(&line) {
                    return true;
                }
            }
            false
        }
        Trigger::Boot(boot) => {
            let Some(mut lines) = ctx.lab.console(&boot.node.value) else {
                return false;
            };
            let wanted = u64::from(boot.count);
            loop {
                if ctx.lab.boots(&boot.node.value).await >= wanted {
                    return true;
                }
                if lines.next().await.is_none() {
                    return false;
                }
            }
        }
    }
}

/// Fires a fault now.
pub(crate) async fn fire(ctx: &Ctx, action: &FaultAction) {
    let shared = &ctx.shared;
    match action {
        FaultAction::Power(power) => {
            let node = power.node.value.as_str();
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("power {:?} through the BMC", power.action),
            );
            if power.action == PowerAction::On {
                {
                    let mut judge = shared.judge();
                    judge.world.outage.remove(node);
                    judge.world.powered_off.remove(node);
                }
                ctx.lab.power_on_and_wait(node, shared).await;
            } else {
                if matches!(
                    power.action,
                    PowerAction::Off | PowerAction::GracefulShutdown
                ) {
                    shared.judge().world.powered_off.insert(node.to_owned());
                }
                ctx.lab.power(node, power.action, shared).await;
            }
        }
        FaultAction::BootFailure(failure) => {
            let node = failure.node.value.as_str();
            let version = failure.version.value.as_str();
            match ctx.lab.node_build(node, version, &failure.boot) {
                Ok(()) => shared.record(
                    Some(node),
                    EntryKind::Fault,
                    format!(
                        "from its next download of {version} on, the node gets a build that boots as {:?} (a copy already on its ESP boots as before until it installs {version} again)",
                        failure.boot
                    ),
                ),
                Err(e) => shared.record(
                    Some(node),
                    EntryKind::Fault,
                    format!(
                        "boot failure of {version} not armed: {}",
                        rackproof_std::error_chain(&e)
                    ),
                ),
            }
        }
        FaultAction::PowerCut(cut) => {
            let node = cut.node.value.as_str();
            let _lane = ctx.power_cuts.lane(node).lock_owned().await;
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("power will be cut during the {:?}", cut.during),
            );
            if !ctx.lab.cut_power(node, cut.during, shared).await {
                shared.record(
                    Some(node),
                    EntryKind::Fault,
                    "the armed power cut never happened",
                );
                return;
            }
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("power lost; back in {}", cut.power_back_after),
            );
            shared.judge().world.powered_off.insert(node.to_owned());
            shared.clock().sleep(cut.power_back_after.get()).await;
            shared.judge().world.powered_off.remove(node);
            shared.record(Some(node), EntryKind::Fault, "power is back");
            ctx.lab.power_on_and_wait(node, shared).await;
        }
        FaultAction::Bmc(bmc) => {
            let node = bmc.node.value.as_str();
            let count = bmc.count.map_or_else(
                || "every request".to_owned(),
                |n| format!("the next {n} requests"),
            );
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("BMC quirk {:?} for {count}", bmc.quirk),
            );
            if let Err(e) = ctx.lab.add_bmc_quirk(node, &bmc.quirk, bmc.count) {
                shared.record(
                    Some(node),
                    EntryKind::Fault,
                    format!("BMC quirk not set: {}", rackproof_std::error_chain(&e)),
                );
            }
        }
        FaultAction::Partition(partition) => {
            let node = partition.node.value.as_str();
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("network cut for {}", partition.duration),
            );
            shared.judge().world.outage.insert(node.to_owned());
            if let Err(e) = ctx.lab.set_link(node, false).await {
                shared.record(
                    Some(node),
                    EntryKind::Fault,
                    format!("partition failed: {}", rackproof_std::error_chain(&e)),
                );
                return;
            }
            shared.clock().sleep(partition.duration.get()).await;
            match ctx.lab.set_link(node, true).await {
                Ok(()) => {
                    shared.judge().world.outage.remove(node);
                    shared.record(Some(node), EntryKind::Fault, "network back");
                }
                Err(e) => shared.record(
                    Some(node),
                    EntryKind::Fault,
                    format!("reconnecting failed: {}", rackproof_std::error_chain(&e)),
                ),
            }
        }
        FaultAction::Kill(kill) => {
            let restart = kill.restart_after.map(|s| s.get());
            let again = kill.restart_after.map_or_else(
                || "not restarted".to_owned(),
                |d| format!("restarted after {d}"),
            );
            match kill.component.value {
                component @ (Component::Agent | Component::Kubelet) => {
                    let Some(name) = kill.node.as_ref().map(|n| n.value.clone()) else {
                        return;
                    };
                    kill_on_node(ctx, &name, component, restart, &again).await;
                }
                component => {
                    let text = match kill_component(ctx, component, restart).await {
                        Ok(name) => format!("{name} killed, {again}"),
                        Err(why) => {
                            format!("{component:?} kill: {}", rackproof_std::error_chain(&why))
                                .to_lowercase()
                        }
                    };
                    shared.record(None, EntryKind::Fault, text);
                    ctx.reconcile();
                }
            }
        }
        FaultAction::ImageServer(fault) => {
            let node = fault.node.value.as_str();
            let count = fault.count.map_or_else(
                || "every request".to_owned(),
                |n| format!("the next {n} requests"),
            );
            shared.record(
                Some(node),
                EntryKind::Fault,
                format!("the image server answers {:?} to {count}", fault.answer),
            );
            ctx.lab.image_server_fault(node, fault.answer, fault.count);
        }
        FaultAction::NodesDie(nodes) => {
            for node in nodes {
                shared.record(
                    Some(&node.value),
                    EntryKind::Fault,
                    "dies (not under update): power lost",
                );
                {
                    let mut judge = shared.judge();
                    judge.world.outage.insert(node.value.clone());
                    judge.world.powered_off.insert(node.value.clone());
                }
                ctx.lab.power(&node.value, PowerAction::Off, shared).await;
            }
        }
    }
}

/// Kills `component` (the agent or the kubelet) of node `name` and starts it again after
/// `restart`. The node stays up: the agent's death stops its updates (resumed from its saved
/// plan when it starts again), the kubelet's its heartbeat, which makes the node NotReady once
/// its Lease expires: an outage, as a partition is.
async fn kill_on_node(
    ctx: &Ctx,
    name: &str,
    component: Component,
    restart: Option<Duration>,
    again: &str,
) {
    let shared = &ctx.shared;
    let what = component.name();
    let killed = match ctx.lab.kill_service(name, component).await {
        Ok(killed) => killed,
        Err(e) => {
            shared.record(
                Some(name),
                EntryKind::Fault,
                format!("{what} kill failed: {}", rackproof_std::error_chain(&e)),
            );
            return;
        }
    };
    if !killed {
        shared.record(
            Some(name),
            EntryKind::Fault,
            format!("{what} kill: no {what} was running"),
        );
        return;
    }
    if component == Component::Kubelet {
        let mut judge = shared.judge();
        judge.world.outage.insert(name.to_owned());
        judge.world.kubelet_stopped.insert(name.to_owned());
    }
    shared.record(
        Some(name),
        EntryKind::Fault,
        format!("{what} killed (the node stays up), {again}"),
    );
    let Some(after) = restart else {
        return;
    };
    shared.clock().sleep(after).await;
    // A reboot meanwhile started it with the rest of the OS: running either way from now on.
    if component == Component::Kubelet {
        let mut judge = shared.judge();
        judge.world.outage.remove(name);
        judge.world.kubelet_stopped.remove(name);
    }
    match ctx.lab.restart_service(name, component).await {
        Ok(true) => shared.record(Some(name), EntryKind::Fault, format!("{what} restarted")),
        Ok(false) => {}
        Err(e) => shared.record(
            Some(name),
            EntryKind::Fault,
            format!("{what} restart failed: {}", rackproof_std::error_chain(&e)),
        ),
    }
}

/// Per-node lanes that serialize power cuts: the machine and the image server each hold one
/// armed cut at a time, so a second cut on a node waits until the first one happened and the
/// power is back, then arms.
#[derive(Debug, Default)]
pub struct PowerCutLanes(Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl PowerCutLanes {
    /// `node`'s lane (made on first use).
    pub fn lane(&self, node: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.0.locked().entry(node.to_owned()).or_default().clone()
    }
}

/// Why no instance of a component was killed.
#[derive(Debug, thiserror::Error)]
enum KillError {
    /// The component's Lease could not be read. kube's error is in the message, not a source:
    /// its own message already repeats its source.
    #[error("reading the Lease {lease}: {error}")]
    ReadLease {
        lease: &'static str,
        error: kube::Error,
    },
    /// No instance has taken the Lease yet.
    #[error("no instance holds the Lease {lease} yet")]
    NoHolder { lease: &'static str },
    /// The Lease's holder is not one of this run's instances.
    #[error("the Lease {lease} is held by {holder:?}, not by an instance of this run")]
    ForeignHolder { lease: &'static str, holder: String },
    /// The scenario runs no instance of the component.
    #[error("the scenario runs none")]
    NoneRunning,
}

/// Kills the instance of `component` that leads (the only one, when one runs); returns its name,
/// or why none was killed.
async fn kill_component(
    ctx: &Ctx,
    component: Component,
    restart: Option<Duration>,
) -> Result<String, KillError> {
    let lease = ctx.supervisor().leader_lease(component);
    let index = match lease {
        None => 1,
        Some(lease) => {
            let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), NAMESPACE);
            let holder = leases
                .get_opt(lease)
                .await
                .map_err(|error| KillError::ReadLease { lease, error })?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .ok_or(KillError::NoHolder { lease })?;
            ctx.supervisor()
                .instance_named(component, &holder)
                .ok_or(KillError::ForeignHolder { lease, holder })?
        }
    };
    let elapsed = ctx.shared.elapsed();
    ctx.supervisor()
        .kill(component, index, restart, elapsed)
        .ok_or(KillError::NoneRunning)
}
