//! The node lifecycle controller, kube-controller-manager's part that matters here: a node whose
//! Lease was not renewed for the node-monitor grace period gets `Ready=Unknown`
//! (`NodeStatusUnknown`), as `kubelet stopped posting node status`. It runs as the
//! `kube-controller-manager` dependent, so it stops when the watchdog scales that to zero.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use rackproof_clock::Clock;
use serde_json::json;

/// kube-controller-manager's `--node-monitor-period`.
const MONITOR_PERIOD: Duration = Duration::from_secs(5);

/// Runs until dropped.
pub async fn run(client: Client, clock: Clock, grace: Duration) {
    let (nodes, node_writer) = reflector::store::<Node>();
    let (leases, lease_writer) = reflector::store::<Lease>();
    let node_stream = reflector::reflector(node_writer, watcher::watcher(Api::<Node>::all(client.clone()), watcher::Config::default()))
        .default_backoff()
        .for_each(|_| async {});
    let lease_api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease_stream = reflector::reflector(lease_writer, watcher::watcher(lease_api, watcher::Config::default()))
        .default_backoff()
        .for_each(|_| async {});
    let monitor = monitor(client, clock, grace, nodes, leases);
    tokio::join!(node_stream, lease_stream, monitor);
}

async fn monitor(client: Client, clock: Clock, grace: Duration, nodes: Store<Node>, leases: Store<Lease>) {
    let api: Api<Node> = Api::all(client);
    let mut ticks = clock.interval(MONITOR_PERIOD);
    loop {
        ticks.tick().await;
        let now = clock.now();
        for node in nodes.state() {
            let name = node.name_any();
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == "True");
            if !ready {
                continue;
            }
            let lease = leases.get(&ObjectRef::<Lease>::new(&name).within("kube-node-lease"));
            let renewed = lease.and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
            let Some(renewed) = renewed else { continue };
            if now.duration_since(renewed).unsigned_abs() <= grace {
                continue;
            }
            let time = Time(now);
            let patch = json!({"status": {"conditions": [{
                "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastHeartbeatTime": node.status.as_ref().and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready")).and_then(|c| c.last_heartbeat_time.clone()),
                "lastTransitionTime": time,
            }]}});
            if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                tracing::warn!(node = %name, error = %e, "failed to mark the node NotReady");
            }
        }
    }
}
