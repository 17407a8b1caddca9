//! The ReplicaSet controller and the scheduler, as far as the lab's workloads need them: each
//! `pods` workload is a ReplicaSet (`cluster::setup`), and when fewer of its pods exist than its
//! replicas (a drain evicted one), a replacement is created, bound at once to the Ready,
//! schedulable, untainted node with the fewest of the ReplicaSet's pods. The node's kubelet then
//! starts it. Orphan pods the selector matches are adopted (their owner reference set), as the
//! real controller does: the workloads' pods are made before their ReplicaSet. A ReplicaSet gets
//! replacements only once it was seen with all its replicas, so pods the watch has not shown
//! yet are never doubled. Excess pods are left alone: nothing in the lab makes too many.
//!
//! It runs as the `kube-controller-manager` dependent (the real ReplicaSet controller is part of
//! it), on the embedded server and on a local control plane (which runs no scheduler); an
//! existing cluster runs its own controllers and scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use rackproof_clock::Clock;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::partial::{self, partial_of};
use crate::engine::cluster::setup::{self, WORKLOAD_NAMESPACE};

/// How often the controller looks again while a ReplicaSet is short (no node took its pod).
const RESYNC: Duration = Duration::from_secs(1);

/// How long a pod the controller created counts while the watch has not shown it yet (the real
/// controller's expectations).
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// A Node as the scheduler reads it: whether it takes new pods.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NodePlacement {
    #[serde(deserialize_with = "partial::identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<PlacementSpec>,
    #[serde(default)]
    status: Option<PlacementStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct PlacementSpec {
    #[serde(default)]
    unschedulable: Option<bool>,
    #[serde(default)]
    taints: Vec<Taint>,
}

#[derive(Debug, Clone, Deserialize)]
struct Taint {
    #[serde(default)]
    effect: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct PlacementStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Deserialize)]
struct Condition {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    status: String,
}

partial_of!(NodePlacement, Node);

/// A Pod as the controller reads it: its labels, owners, whether it is going, and its node
/// (decoding whole pods at every status write was most of what the controller cost).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WorkloadPod {
    #[serde(deserialize_with = "partial::ownership")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<PodBinding>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodBinding {
    #[serde(default)]
    node_name: Option<String>,
}

partial_of!(WorkloadPod, Pod);

impl NodePlacement {
    /// Whether a new pod may be bound to it: Ready, not cordoned, without a taint that keeps
    /// pods off (the workloads tolerate none).
    fn takes_pods(&self) -> bool {
        let ready = self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        let Some(spec) = &self.spec else {
            return ready;
        };
        ready
            && spec.unschedulable != Some(true)
            && !spec
                .taints
                .iter()
                .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
    }
}

/// Runs until dropped.
pub(crate) async fn run(client: Client, clock: Clock) {
    let (replica_sets, rs_writer) = reflector::store::<ReplicaSet>();
    let (pods, pod_writer) = reflector::store::<WorkloadPod>();
    let (nodes, node_writer) = reflector::store::<NodePlacement>();
    let wake = Arc::new(Notify::new());
    let follow_replica_sets = reflector::reflector(
        rs_writer,
        watcher::watcher(
            Api::<ReplicaSet>::namespaced(client.clone(), WORKLOAD_NAMESPACE),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| {
        wake.notify_one();
        async {}
    });
    let follow_pods = reflector::reflector(
        pod_writer,
        watcher::watcher(
            Api::<WorkloadPod>::namespaced(client.clone(), WORKLOAD_NAMESPACE),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|event| {
        if event.as_ref().is_ok_and(wakes) {
            wake.notify_one();
        }
        async {}
    });
    let follow_nodes = reflector::reflector(
        node_writer,
        watcher::watcher(
            Api::<NodePlacement>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| async {});
    let controller = Controller {
        client,
        clock,
        replica_sets,
        pods,
        nodes,
        expected: BTreeMap::new(),
        next: 1,
        settled: BTreeSet::new(),
        wake: wake.clone(),
    };
    tokio::join!(
        follow_replica_sets,
        follow_pods,
        follow_nodes,
        controller.run()
    );
}

struct Controller {
    client: Client,
    clock: Clock,
    replica_sets: Store<ReplicaSet>,
    pods: Store<WorkloadPod>,
    nodes: Store<NodePlacement>,
    /// Pods created and not yet seen in the store: name → (ReplicaSet uid, node, when).
    expected: BTreeMap<String, (String, String, Instant)>,
    /// The next replacement's number (names are `{replicaset}-r{n}`).
    next: u64,
    /// The ReplicaSets (uids) seen with all their replicas: only those get replacements, so a
    /// ReplicaSet whose adopted pods the watch has not shown yet gets no pods of its own.
    settled: BTreeSet<String>,
    /// Woken by ReplicaSet events and the pod events that can leave one short.
    wake: Arc<Notify>,
}

/// Whether a pod event can leave a ReplicaSet short of pods or with an orphan to adopt: a pod
/// going, or gone without having been seen going (a pod seen with its deletion timestamp
/// already stopped counting then), one without a controller, the end of a (re)list. A new pod
/// or a status write cannot.
fn wakes(event: &watcher::Event<WorkloadPod>) -> bool {
    match event {
        watcher::Event::Delete(pod) => pod.metadata.deletion_timestamp.is_none(),
        watcher::Event::InitDone => true,
        watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
            pod.metadata.deletion_timestamp.is_some()
                || !pod
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true))
        }
        watcher::Event::Init => false,
    }
}

impl Controller {
    async fn run(mut self) {
        for ready in [
            self.replica_sets.wait_until_ready().await,
            self.pods.wait_until_ready().await,
            self.nodes.wait_until_ready().await,
        ] {
            if ready.is_err() {
                return;
            }
        }
        // A first look, then one after each pod event that can leave a ReplicaSet short (and
        // every RESYNC while one is).
        let mut short = true;
        loop {
            if short {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = self.clock.sleep(RESYNC) => {}
                }
            } else {
                self.wake.notified().await;
            }
            short = false;
            let mut replica_sets = self.replica_sets.state();
            replica_sets.sort_by_key(|rs| rs.name_any());
            for replica_set in replica_sets {
                short |= self.sync(&replica_set).await;
            }
        }
    }

    /// Adopts the ReplicaSet's orphans and replaces its missing pods. Whether it needs another
    /// look (pods still missing, or not yet seen with all its replicas).
    async fn sync(&mut self, replica_set: &ReplicaSet) -> bool {
        let (name, Some(uid)) = (replica_set.name_any(), replica_set.uid()) else {
            return false;
        };
        let Some(spec) = &replica_set.spec else {
            return false;
        };
        let Some(selector) = spec
            .selector
            .match_labels
            .as_ref()
            .filter(|s| !s.is_empty())
        else {
            return false;
        };
        let matches =
            |pod: &WorkloadPod| selector.iter().all(|(k, v)| pod.labels().get(k) == Some(v));
        if !self.expected.is_empty() {
            let now = self.clock.instant();
            let pods = &self.pods;
            self.expected.retain(|pod, (_, _, at)| {
                let seen = pods
                    .get(&reflector::ObjectRef::new(pod).within(WORKLOAD_NAMESPACE))
                    .is_some();
                !seen && now.duration_since(*at) < EXPECTATION_TIMEOUT
            });
        }
        // The active pods: the ones it controls (adopting orphans), not being deleted, and the
        // expected ones.
        let mut active = Vec::new();
        for pod in self.pods.state() {
            if pod.metadata.deletion_timestamp.is_some() || !matches(&pod) {
                continue;
            }
            match pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
            {
                Some(owner) if owner.uid == uid => {}
                Some(_) => continue,
                None => {
                    if !self.adopt(&pod, replica_set, &uid).await {
                        continue;
                    }
                }
            }
            active.push(pod);
        }
        let expected = self.expected.values().filter(|(owner, ..)| *owner == uid);
        let replicas = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
        let missing = replicas.saturating_sub(active.len() + expected.clone().count());
        if missing == 0 {
            self.settled.insert(uid.clone());
        }
        if !self.settled.contains(&uid) {
            return true;
        }
        if missing == 0 {
            return false;
        }
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        let nodes = active
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .chain(expected.map(|(_, node, _)| node.clone()));
        for node in nodes {
            *per_node.entry(node).or_default() += 1;
        }
        for _ in 0..missing {
            let Some(node) = self.place(&per_node) else {
                tracing::debug!(replicaset = %name, "no node takes pods; waiting");
                return true;
            };
            if !self.create(replica_set, &uid, &node).await {
                return true;
            }
            *per_node.entry(node).or_default() += 1;
        }
        false
    }

    /// The node a new pod goes to: the one taking pods with the fewest of the ReplicaSet's.
    fn place(&self, per_node: &BTreeMap<String, usize>) -> Option<String> {
        let nodes = self.nodes.state();
        let node = nodes
            .iter()
            .filter(|n| n.takes_pods())
            .filter_map(|n| n.metadata.name.as_deref())
            .min_by_key(|&n| (per_node.get(n).copied().unwrap_or(0), n))?;
        Some(node.to_owned())
    }

    /// Sets the ReplicaSet as the orphan `pod`'s controller. Whether it now is.
    async fn adopt(&self, pod: &WorkloadPod, replica_set: &ReplicaSet, uid: &str) -> bool {
        let owner = owner(replica_set, uid);
        let patch = json!({"metadata": {"ownerReferences": [owner]}});
        let api: Api<Pod> = Api::namespaced(self.client.clone(), WORKLOAD_NAMESPACE);
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), error = %rackproof_std::error_chain(&e), "failed to adopt the pod");
                false
            }
        }
    }

    /// Creates a replacement of the ReplicaSet's on `node`, read afresh first: the watch may not
    /// have shown a cordon yet, and a pod bound to a node being drained could outlive the drain.
    /// Whether it was created.
    async fn create(&mut self, replica_set: &ReplicaSet, uid: &str, node: &str) -> bool {
        let fresh = Api::<NodePlacement>::all(self.client.clone())
            .get(node)
            .await;
        if !fresh.is_ok_and(|n| n.takes_pods()) {
            return false;
        }
        let app = replica_set.name_any();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), WORKLOAD_NAMESPACE);
        let name = format!("{app}-r{}", self.next);
        self.next += 1;
        let mut pod = setup::pod(name.clone(), &app, node);
        pod.metadata.labels = replica_set
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref()?.metadata.as_ref()?.labels.clone())
            .or(pod.metadata.labels);
        pod.metadata.owner_references = Some(vec![owner(replica_set, uid)]);
        match api.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                tracing::info!(pod = %name, node = %node, replicaset = %app, "replacement pod created");
                self.expected.insert(
                    name,
                    (uid.to_owned(), node.to_owned(), self.clock.instant()),
                );
                true
            }
            Err(e) => {
                tracing::warn!(pod = %name, node = %node, error = %rackproof_std::error_chain(&e), "failed to create a replacement pod");
                false
            }
        }
    }
}

fn owner(replica_set: &ReplicaSet, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: "ReplicaSet".to_owned(),
        name: replica_set.name_any(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(spec: serde_json::Value, ready: &str) -> NodePlacement {
        serde_json::from_value(json!({"metadata": {"name": "n", "resourceVersion": "7",
            "managedFields": [{"manager": "kubelet"}]}, "spec": spec,
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, "reason": "KubeletReady"}]}}))
        .expect("a served Node decodes")
    }

    #[test]
    fn only_ready_uncordoned_untainted_nodes_take_pods() {
        assert!(node(json!({}), "True").takes_pods());
        assert!(
            node(
                json!({"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}),
                "True"
            )
            .takes_pods(),
            "a preference is no rule"
        );
        assert!(!node(json!({}), "False").takes_pods());
        assert!(!node(json!({}), "Unknown").takes_pods());
        assert!(!node(json!({"unschedulable": true}), "True").takes_pods());
        assert!(
            !node(
                json!({"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}),
                "True"
            )
            .takes_pods()
        );
        assert!(
            !node(
                json!({"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}),
                "True"
            )
            .takes_pods()
        );
        let bare: NodePlacement = serde_json::from_value(json!({"metadata": {"name": "m"}}))
            .expect("a Node without spec or status decodes");
        assert!(
            !bare.takes_pods(),
            "a node that never reported takes nothing"
        );
    }

    #[test]
    fn only_pod_events_that_can_leave_a_replica_set_short_wake_the_controller() {
        let pod = |meta: serde_json::Value| -> WorkloadPod {
            serde_json::from_value(json!({ "metadata": meta })).expect("a pod decodes")
        };
        let owned = json!({"name": "p", "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": true}]});
        let mut going = owned.clone();
        going["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let orphan = json!({"name": "o"});
        assert!(
            !wakes(&watcher::Event::Apply(pod(owned.clone()))),
            "a new or updated pod"
        );
        assert!(
            wakes(&watcher::Event::Apply(pod(going.clone()))),
            "a pod going"
        );
        assert!(
            wakes(&watcher::Event::Apply(pod(orphan))),
            "an orphan to adopt"
        );
        assert!(
            !wakes(&watcher::Event::Delete(pod(going))),
            "gone after it was seen going"
        );
        assert!(
            wakes(&watcher::Event::Delete(pod(owned))),
            "gone without being seen going"
        );
        assert!(
            wakes(&watcher::Event::<WorkloadPod>::InitDone),
            "a relist's end"
        );
    }
}
