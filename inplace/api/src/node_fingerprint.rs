//! When a Node event is worth a reconcile pass: the fingerprint of what the orchestrator and the
//! node agent read of a Node.
//!
//! Kubelet heartbeats rewrite every Node every few seconds (condition heartbeat times, the
//! resourceVersion, managedFields); a controller that ran a pass on each would run all the time
//! with a thousand nodes. Both components compare this fingerprint of each Node event with the
//! last one they saw and wake only when it differs.
//!
//! It is one fingerprint for both because the question is the same ("did anything a controller
//! acts on change?") and missing a change is the costly mistake: a pass that finds nothing to do
//! costs a read of a cache, a missed one leaves a node waiting for the next resync. So it covers
//! the union of what either reads:
//!
//! - the uid (the agent: a Node deleted and created again under the same name is a new Node whose
//!   Lease and labels start over),
//! - labels and annotations (both: the update labels, the protection annotations),
//! - the cordon and the deletion mark (the orchestrator: drain and Machine state),
//! - each condition's type, status and reason (both: `InPlaceUpdate` walks its reasons).
//!
//! Not the condition heartbeat and transition times or messages, the resourceVersion, or
//! anything else the kubelet reports (addresses, capacity, node info, images).

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::Node;

/// What a controller reads of `node`, hashed: two events with equal fingerprints differ only in
/// what no controller acts on. Comparable within one process only (`DefaultHasher`).
pub fn node_fingerprint(node: &Node) -> u64 {
    let mut hasher = DefaultHasher::new();
    node.metadata.uid.hash(&mut hasher);
    node.metadata.labels.hash(&mut hasher);
    node.metadata.annotations.hash(&mut hasher);
    node.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .hash(&mut hasher);
    for condition in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        (&condition.type_, &condition.status, &condition.reason).hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    /// A Ready worker node as a kubelet keeps it, with an update in progress.
    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {
                "name": "worker-0",
                "uid": "3d1c2f5e-0000-4000-8000-000000000001",
                "resourceVersion": "100",
                "labels": {"worker.gardener.cloud/pool": "pool-a"},
                "annotations": {"node.machine.sapcloud.io/trigger-deletion-by-mcm": "false"},
            },
            "spec": {"providerID": "rackproof://worker-0"},
            "status": {
                "conditions": [
                    {
                        "type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    },
                    {
                        "type": "InPlaceUpdate", "status": "True", "reason": "SelectedForUpdate",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    },
                ],
                "nodeInfo": {
                    "machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1",
                    "osImage": "Debian", "containerRuntimeVersion": "containerd://1.7",
                    "kubeletVersion": "v1.35.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }))
        .unwrap()
    }

    fn conditions(node: &mut Node) -> &mut Vec<k8s_openapi::api::core::v1::NodeCondition> {
        node.status.as_mut().unwrap().conditions.as_mut().unwrap()
    }

    /// `change` applied to a fresh node, and whether its fingerprint moved.
    fn detected(change: impl FnOnce(&mut Node)) -> bool {
        let before = node();
        let mut after = node();
        change(&mut after);
        node_fingerprint(&before) != node_fingerprint(&after)
    }

    #[test]
    fn a_kubelet_heartbeat_is_not_a_change() {
        assert!(!detected(|node| {
            node.metadata.resource_version = Some("101".into());
            let later = Time("2026-01-01T00:00:10Z".parse().unwrap());
            for condition in conditions(node) {
                condition.last_heartbeat_time = Some(later.clone());
                condition.last_transition_time = Some(later.clone());
                condition.message = Some("still ready".into());
            }
            node.status
                .as_mut()
                .unwrap()
                .node_info
                .as_mut()
                .unwrap()
                .boot_id = "b2".into();
        }));
    }

    #[test]
    fn a_node_created_again_under_the_same_name_is_a_change() {
        assert!(detected(|node| {
            node.metadata.uid = Some("3d1c2f5e-0000-4000-8000-000000000002".into());
        }));
    }

    #[test]
    fn a_label_or_an_annotation_is_a_change() {
        assert!(detected(|node| {
            node.metadata.labels.get_or_insert_default().insert(
                "node.machine.sapcloud.io/update-result".into(),
                "successful".into(),
            );
        }));
        assert!(detected(|node| {
            node.metadata.annotations.get_or_insert_default().insert(
                "cluster-autoscaler.kubernetes.io/scale-down-disabled".into(),
                "true".into(),
            );
        }));
    }

    #[test]
    fn a_cordon_is_a_change() {
        assert!(detected(|node| {
            node.spec.get_or_insert_default().unschedulable = Some(true);
        }));
    }

    #[test]
    fn a_deletion_mark_is_a_change() {
        assert!(detected(|node| {
            node.metadata.deletion_timestamp = Some(Time("2026-01-01T00:01:00Z".parse().unwrap()));
        }));
    }

    #[test]
    fn a_condition_status_reason_or_new_type_is_a_change() {
        assert!(detected(|node| conditions(node)[0].status = "False".into()));
        assert!(detected(|node| {
            conditions(node)[1].reason = Some("ReadyForUpdate".into());
        }));
        assert!(detected(|node| {
            conditions(node).push(k8s_openapi::api::core::v1::NodeCondition {
                type_: "MemoryPressure".into(),
                status: "False".into(),
                ..Default::default()
            });
        }));
    }
}
