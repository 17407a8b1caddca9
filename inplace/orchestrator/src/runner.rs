//! The control loop: level-triggered passes over every object, woken by watches or by the
//! earliest requeue any reconcile asked for (never later than the sync period).
//!
//! A pass reconciles WorkerPools, then MachineDeployments, then MachineSets, then Machines, each
//! object with `reconcile(obj, ctx) -> Result<Action, Error>`; a failed reconcile goes through
//! [`error_policy`]. The watches wake the loop and keep the caches (`cache`) that a pass reads
//! MachineSets, Machines and Nodes from; a read waits until its cache shows the orchestrator's own
//! last write to that kind, and lists from the API when the cache cannot show that, so a watch
//! that drops (and resumes with back-off) costs latency, never correctness. WorkerPools and
//! MachineDeployments (a handful) are listed afresh each pass. Each reconcile runs in a
//! `reconcile{kind, name, node}` span, so a log line says which object (and node) it is about.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use inplace_api::crd::{Machine, MachineDeployment, MachineSet, WorkerPool};
use inplace_api::node_fingerprint::node_fingerprint;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use rackproof_std::error_chain;
use tokio::sync::Notify;
use tracing::Instrument;

use crate::cache::NodesByName;
use crate::error::Error;
use crate::{Action, Context, deployment, machine, machineset, workerpool};

/// What to do after a failed reconcile: conflicts again soon, everything else after a back-off.
pub(crate) fn error_policy(error: &Error) -> Action {
    match error {
        Error::Contended { .. } => Action::soon(),
        Error::Kube { source, .. } if crate::error::is_conflict(source) => Action::soon(),
        _ => Action::after(Duration::from_secs(5)),
    }
}

pub(crate) async fn run(ctx: Context) {
    let wake = Notify::new();
    let watches = watch_all(&ctx, &wake);
    let passes = async {
        loop {
            let next = pass(&ctx).await;
            let wait = next
                .unwrap_or(ctx.config.sync_period)
                .min(ctx.config.sync_period);
            // Biased selects poll in a fixed order: simulated runs are reproducible.
            tokio::select! {
                biased;
                _ = ctx.clock.sleep(wait) => {}
                _ = wake.notified() => {
                    // Let a burst of watch events settle into one pass.
                    ctx.clock.sleep(Duration::from_millis(50)).await;
                }
            }
        }
    };
    // The node Leases are followed without waking passes (see `leases`).
    let leases = ctx.leases.follow(ctx.client.clone());
    tokio::select! {
        biased;
        _ = watches => {}
        _ = leases => {}
        _ = passes => {}
    }
}

async fn watch_all(ctx: &Context, wake: &Notify) {
    let ns = ctx.config.namespace.clone();
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    // Kubelet heartbeats rewrite every Node every few seconds; only changes the controllers act on
    // wake a pass (with a thousand nodes, waking on each heartbeat would mean a pass all the time).
    // A Machine's mirrored Node conditions change with every status its kubelet reports, and the
    // orchestrator's own copy of them is all such an event brings. The caches keep every change.
    let nodes = changes_read(
        ctx.caches.nodes.follow(Api::all(client.clone())),
        node_fingerprint,
    );
    let machines = changes_read(
        ctx.caches
            .machines
            .follow(Api::namespaced(client.clone(), &ns)),
        machine_fingerprint,
    );
    let sets = ctx
        .caches
        .sets
        .follow(Api::namespaced(client.clone(), &ns))
        .map(|_| ())
        .boxed();
    let deployments = watcher(
        Api::<MachineDeployment>::namespaced(client.clone(), &ns),
        cfg.clone(),
    )
    .default_backoff()
    .map(|_| ())
    .boxed();
    let pools = watcher(Api::<WorkerPool>::namespaced(client, &ns), cfg)
        .default_backoff()
        .map(|_| ())
        .boxed();
    let mut all = futures::stream::select_all([nodes, machines, sets, deployments, pools]);
    while all.next().await.is_some() {
        wake.notify_one();
    }
}

/// The events of `events` that change what the controllers read of an object (its `fingerprint`),
/// and every other kind of event (errors, relists, deletions), as wake-ups.
fn changes_read<K: ResourceExt + Send + Sync + 'static>(
    events: impl futures::Stream<Item = Result<Option<Arc<K>>, watcher::Error>> + Send + 'static,
    fingerprint: fn(&K) -> u64,
) -> futures::stream::BoxStream<'static, ()> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    events
        .filter_map(move |event| {
            let relevant = match &event {
                Ok(Some(object)) => {
                    let now = fingerprint(object);
                    seen.insert(object.name_any(), now) != Some(now)
                }
                _ => true,
            };
            std::future::ready(relevant.then_some(()))
        })
        .boxed()
}

/// What the controllers read of a Machine: all of it but the conditions mirrored from its Node
/// (which only the mirroring compares) and the resourceVersion (the watch brings no managedFields).
fn machine_fingerprint(machine: &Machine) -> u64 {
    let mut read = machine.clone();
    read.metadata.resource_version = None;
    if let Some(status) = &mut read.status {
        status.conditions.clear();
    }
    let mut hasher = DefaultHasher::new();
    serde_json::to_vec(&read)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// One pass; returns the earliest requeue asked for.
async fn pass(ctx: &Context) -> Option<Duration> {
    let mut next: Option<Duration> = None;
    let mut merge = |action: Action| {
        next = Some(next.map_or(action.after, |n| n.min(action.after)));
    };
    let ns = &ctx.config.namespace;
    macro_rules! each {
        ($kind:ty, $what:literal, $api:ident => $read:expr, $reconcile:path $(, $extra:expr)*) => {{
            let $api: Api<$kind> = Api::namespaced(ctx.client.clone(), ns);
            let read: Result<Vec<_>, kube::Error> = $read.await;
            match read {
                Ok(list) => {
                    for object in &list {
                        // Every log line of a reconcile (Events included) names its object, and
                        // a Machine's its node (recorded by `machine::reconcile`).
                        let span = tracing::info_span!(
                            "reconcile",
                            kind = %$what,
                            name = %object.name_any(),
                            node = tracing::field::Empty,
                        );
                        match $reconcile(object, $($extra,)* ctx).instrument(span).await {
                            Ok(action) => merge(action),
                            Err(error) => {
                                tracing::warn!(kind = $what, object = %object.name_any(), error = %error_chain(&error), "reconcile failed");
                                merge(error_policy(&error));
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(kind = $what, error = %error, "list failed");
                    merge(Action::after(Duration::from_secs(5)));
                }
            }
        }};
    }
    // Pools and deployments are few: listed afresh. MachineSets, Machines and Nodes come from the
    // watch caches, at least as recent as this orchestrator's own writes (`cache`).
    each!(WorkerPool, "WorkerPool", api => list_all(&api), workerpool::reconcile);
    each!(MachineDeployment, "MachineDeployment", api => list_all(&api), deployment::reconcile);
    each!(MachineSet, "MachineSet", api => ctx.read(&api), machineset::reconcile);
    // Machines are reconciled against one read of every Node, taken after the MachineDeployments
    // and MachineSets changed what they change.
    match ctx.read(&Api::<Node>::all(ctx.client.clone())).await {
        Ok(list) => {
            let nodes: NodesByName = list.into_iter().map(|n| (n.name_any(), n)).collect();
            each!(Machine, "Machine", api => ctx.read(&api), machine::reconcile, &nodes);
        }
        Err(error) => {
            tracing::debug!(kind = "Node", error = %error, "list failed");
            merge(Action::after(Duration::from_secs(5)));
        }
    }
    next
}

/// Every object of a kind the orchestrator keeps no cache of, listed afresh.
async fn list_all<K: Clone + serde::de::DeserializeOwned + std::fmt::Debug>(
    api: &Api<K>,
) -> Result<Vec<K>, kube::Error> {
    Ok(api.list(&ListParams::default()).await?.items)
}

#[cfg(test)]
mod tests {
    use inplace_api::keys::MachinePhase;
    use k8s_openapi::api::core::v1::NodeCondition;

    use super::*;

    /// A Machine event wakes a pass unless all it changed is the mirrored conditions.
    #[test]
    fn only_a_change_the_controllers_read_wakes_a_pass() {
        let mut machine: Machine = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m-0", "namespace": "ns", "resourceVersion": "5", "labels": {"node": "n-0"}},
            "spec": {},
            "status": {"currentStatus": {"phase": "Running"}},
        }))
        .unwrap();
        let before = machine_fingerprint(&machine);
        let status = machine.status.as_mut().unwrap();
        status.conditions.push(NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        });
        machine.metadata.resource_version = Some("6".into());
        assert_eq!(
            machine_fingerprint(&machine),
            before,
            "mirrored conditions and bookkeeping"
        );
        machine.status.as_mut().unwrap().current_status.phase = Some(MachinePhase::InPlaceUpdating);
        assert_ne!(machine_fingerprint(&machine), before, "the phase");
        let phase_changed = machine_fingerprint(&machine);
        machine
            .metadata
            .labels
            .get_or_insert_default()
            .insert("selected".into(), "true".into());
        assert_ne!(machine_fingerprint(&machine), phase_changed, "a label");
    }
}
