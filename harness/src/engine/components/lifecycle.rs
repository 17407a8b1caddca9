//! The node lifecycle controller, kube-controller-manager's part that matters here: a node whose
//! Lease was not renewed for the node-monitor grace period gets `Ready=Unknown`
//! (`NodeStatusUnknown`), as `kubelet stopped posting node status`; and a node's NoSchedule
//! taints follow its `Ready` condition (`node.kubernetes.io/not-ready` while `False`, which
//! every new Node starts with, `unreachable` while `Unknown`, none while `True`), so the
//! scheduler's stand-in (`workloads`) places pods on Ready nodes only. It runs as the
//! `kube-controller-manager` dependent, so it stops when the watchdog scales that to zero.
//!
//! Its watches decode only what it reads ([`NodeReadiness`], [`LeaseRenewal`]): every renewal of
//! every Lease reaches it, and decoding each whole (managedFields above all) was a cost of its own
//! in a 1,000-node rollout.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use rackproof_clock::Clock;

use super::partial::{self, partial_of};
use serde::Deserialize;
use serde_json::json;

/// A Node as the controller reads it: its `Ready` condition and its taints.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NodeReadiness {
    #[serde(deserialize_with = "partial::identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<TaintsSpec>,
    #[serde(default)]
    status: Option<ReadinessStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct TaintsSpec {
    #[serde(default)]
    taints: Option<Vec<Taint>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ReadinessStatus {
    #[serde(default)]
    conditions: Vec<ReadyCondition>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadyCondition {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    last_heartbeat_time: Option<Time>,
}

impl NodeReadiness {
    fn taints(&self) -> &[Taint] {
        self.spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
    }

    /// The node's taints as the node lifecycle controller's NoSchedule pass leaves them: the
    /// `not-ready` taint while `Ready` is `False`, the `unreachable` one while it is `Unknown`,
    /// neither while it is `True`; `None` when they are so already.
    fn tainted_by_condition(&self) -> Option<Vec<Taint>> {
        let wanted = match self.ready().map(|c| c.status.as_str()) {
            Some("True") => None,
            Some("False") => Some(TAINT_NOT_READY),
            Some(_) => Some(TAINT_UNREACHABLE),
            // A node that has not reported yet keeps the taint it was created with.
            None => return None,
        };
        let by_condition = |t: &Taint| {
            t.effect == "NoSchedule" && (t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE)
        };
        let current: Vec<&str> = self
            .taints()
            .iter()
            .filter(|t| by_condition(t))
            .map(|t| t.key.as_str())
            .collect();
        if current == wanted.into_iter().collect::<Vec<_>>() {
            return None;
        }
        let mut taints: Vec<Taint> = self
            .taints()
            .iter()
            .filter(|t| !by_condition(t))
            .cloned()
            .collect();
        taints.extend(wanted.map(|key| Taint {
            key: key.to_owned(),
            effect: "NoSchedule".to_owned(),
            rest: serde_json::Map::new(),
        }));
        Some(taints)
    }

    /// The `Ready` condition, if the node has one.
    fn ready(&self) -> Option<&ReadyCondition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
    }
}

/// A taint, its other fields (value, timeAdded) kept as they are.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
struct Taint {
    key: String,
    effect: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

/// The NoSchedule taints the node lifecycle controller keeps by the `Ready` condition (the API
/// server's admission puts the first on every new Node).
const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// A node Lease as the controller reads it: when it was renewed.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct LeaseRenewal {
    #[serde(deserialize_with = "partial::identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<RenewalSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RenewalSpec {
    #[serde(default)]
    renew_time: Option<MicroTime>,
}

partial_of!(NodeReadiness, Node);
partial_of!(LeaseRenewal, Lease);

/// kube-controller-manager's `--node-monitor-period`.
const MONITOR_PERIOD: Duration = Duration::from_secs(5);

/// Runs until dropped.
pub(crate) async fn run(client: Client, clock: Clock, grace: Duration) {
    let (nodes, node_writer) = reflector::store::<NodeReadiness>();
    let (leases, lease_writer) = reflector::store::<LeaseRenewal>();
    let node_stream = reflector::reflector(
        node_writer,
        watcher::watcher(
            Api::<NodeReadiness>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| async {});
    let lease_api: Api<LeaseRenewal> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease_stream = reflector::reflector(
        lease_writer,
        watcher::watcher(lease_api, watcher::Config::default()),
    )
    .default_backoff()
    .for_each(|_| async {});
    let monitor = monitor(client, clock, grace, nodes, leases);
    tokio::join!(node_stream, lease_stream, monitor);
}

async fn monitor(
    client: Client,
    clock: Clock,
    grace: Duration,
    nodes: Store<NodeReadiness>,
    leases: Store<LeaseRenewal>,
) {
    let api: Api<Node> = Api::all(client);
    let mut ticks = clock.interval(MONITOR_PERIOD);
    loop {
        ticks.tick().await;
        let now = clock.now();
        for node in nodes.state() {
            let name = node.name_any();
            if let Some(taints) = node.tainted_by_condition() {
                let patch = json!({"spec": {"taints": taints}});
                if let Err(e) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!(node = %name, error = %e, "failed to update the node's NoSchedule taints");
                }
            }
            let Some(ready) = node.ready().filter(|c| c.status == "True") else {
                continue;
            };
            let lease =
                leases.get(&ObjectRef::<LeaseRenewal>::new(&name).within("kube-node-lease"));
            let renewed = lease.and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
            let Some(renewed) = renewed else { continue };
            if now.duration_since(renewed).unsigned_abs() <= grace {
                continue;
            }
            let time = Time(now);
            let patch = json!({"status": {"conditions": [{
                "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastHeartbeatTime": ready.last_heartbeat_time,
                "lastTransitionTime": time,
            }]}});
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                tracing::warn!(node = %name, error = %e, "failed to mark the node NotReady");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Objects as the API server serves them, managedFields and all, decode into what the
    /// controller reads, and keep what a watch and the store need (name, namespace,
    /// resourceVersion).
    #[test]
    fn partial_objects_decode_from_served_objects() {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-1", "uid": "u1", "resourceVersion": "42", "labels": {"a": "b"},
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
            "spec": {"unschedulable": true},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:10Z", "reason": "KubeletReady"}],
                "nodeInfo": {"osImage": "Rackproof 1.0.0"}}});
        let node: NodeReadiness = serde_json::from_value(node).expect("a served Node decodes");
        assert_eq!(node.name_any(), "node-1");
        assert_eq!(node.resource_version().as_deref(), Some("42"));
        let ready = node.ready().expect("the Ready condition");
        assert_eq!(ready.status, "True");
        assert_eq!(
            ready
                .last_heartbeat_time
                .as_ref()
                .map(|t| t.0.to_string())
                .as_deref(),
            Some("2026-01-01T00:00:10Z")
        );

        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "node-1", "namespace": "kube-node-lease", "resourceVersion": "43",
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:20.000000Z"}});
        let lease: LeaseRenewal = serde_json::from_value(lease).expect("a served Lease decodes");
        assert_eq!(
            ObjectRef::from_obj(&lease),
            ObjectRef::<LeaseRenewal>::new("node-1").within("kube-node-lease")
        );
        assert_eq!(
            lease
                .spec
                .and_then(|s| s.renew_time)
                .map(|t| t.0.to_string())
                .as_deref(),
            Some("2026-01-01T00:00:20Z")
        );

        let bare: NodeReadiness = serde_json::from_value(json!({"metadata": {"name": "node-2"}}))
            .expect("a Node without status decodes");
        assert!(bare.ready().is_none());
    }

    fn node(ready: &str, taints: serde_json::Value) -> NodeReadiness {
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}),
        )
        .expect("a Node decodes")
    }

    fn keys(taints: Option<Vec<Taint>>) -> Option<Vec<String>> {
        taints.map(|t| {
            t.into_iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        })
    }

    #[test]
    fn no_schedule_taints_follow_the_ready_condition_and_keep_the_others() {
        let new = json!([{"key": TAINT_NOT_READY, "effect": "NoSchedule"},
            {"key": "dedicated", "value": "lab", "effect": "NoExecute"}]);
        assert_eq!(
            keys(node("True", new.clone()).tainted_by_condition()),
            Some(vec!["dedicated:NoExecute".to_owned()]),
            "a Ready node loses the not-ready taint"
        );
        let kept = node("True", new.clone()).tainted_by_condition().unwrap();
        assert_eq!(
            kept[0].rest.get("value"),
            Some(&json!("lab")),
            "values are kept"
        );
        assert_eq!(
            keys(node("False", new.clone()).tainted_by_condition()),
            None,
            "tainted already"
        );
        assert_eq!(
            keys(node("Unknown", new).tainted_by_condition()),
            Some(vec![
                "dedicated:NoExecute".to_owned(),
                format!("{TAINT_UNREACHABLE}:NoSchedule")
            ]),
            "an unreachable node swaps not-ready for unreachable"
        );
        assert_eq!(keys(node("True", json!(null)).tainted_by_condition()), None);
        assert_eq!(
            keys(node("False", json!(null)).tainted_by_condition()),
            Some(vec![format!("{TAINT_NOT_READY}:NoSchedule")])
        );
    }
}
