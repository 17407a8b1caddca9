//! Workload fixtures for drain tests: Running/Ready pods bound to a node, a DaemonSet pod, a
//! mirror pod and PodDisruptionBudgets, plus small readers of Machine and Node state.

use inplace_api::crd::{Machine, MachineDeployment};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Lab, NS};

/// How a test pod is owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodKind {
    /// A plain workload pod labelled `app=<app>`.
    Workload,
    /// Owned by the DaemonSet `agent-ds` (created on first use).
    DaemonSet,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`).
    Mirror,
}

impl Lab {
    /// Sets the deployment's `drainTimeout` (an MCM setting: copied down, no rollout).
    pub(crate) async fn set_drain_timeout(&self, deployment: &str, timeout: &str) {
        let api: Api<MachineDeployment> = Api::namespaced(self.client.clone(), NS);
        let patch = json!({ "spec": { "template": { "spec": { "drainTimeout": timeout } } } });
        api.patch(deployment, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch drainTimeout");
        self.wait_for(
            "the drain timeout to reach every machine",
            std::time::Duration::from_secs(120),
            || async {
                self.machines()
                    .await
                    .iter()
                    .all(|m| m.spec.drain_timeout.as_deref() == Some(timeout))
                    .then_some(())
            },
        )
        .await;
    }

    /// Sets the deployment's `maxEvictRetries` (an MCM setting: copied down, no rollout).
    pub(crate) async fn set_max_evict_retries(&self, deployment: &str, retries: i32) {
        let api: Api<MachineDeployment> = Api::namespaced(self.client.clone(), NS);
        let patch = json!({ "spec": { "template": { "spec": { "maxEvictRetries": retries } } } });
        api.patch(deployment, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch maxEvictRetries");
        self.wait_for(
            "maxEvictRetries to reach every machine",
            std::time::Duration::from_secs(120),
            || async {
                self.machines()
                    .await
                    .iter()
                    .all(|m| m.spec.max_evict_retries == Some(retries))
                    .then_some(())
            },
        )
        .await;
    }

    /// Creates a Running, Ready pod `name` bound to `node`.
    pub(crate) async fn create_pod(&self, node: &str, name: &str, app: &str, kind: PodKind) {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "namespace": NS, "labels": { "app": app } },
            "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "registry.example/app:1" }] }
        });
        match kind {
            PodKind::Workload => {}
            PodKind::DaemonSet => {
                let owner = self.daemonset_owner().await;
                pod["metadata"]["ownerReferences"] = json!([owner]);
            }
            PodKind::Mirror => {
                pod["metadata"]["annotations"] = json!({ "kubernetes.io/config.mirror": "static" });
            }
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let pod: Pod = serde_json::from_value(pod).expect("pod fixture");
        let mut pod = api
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        pod.status = Some(
            serde_json::from_value(json!({
                "phase": "Running",
                "conditions": [{ "type": "Ready", "status": "True" }]
            }))
            .expect("pod status fixture"),
        );
        api.replace_status(name, &PostParams::default(), &pod)
            .await
            .expect("pod status");
    }

    async fn daemonset_owner(&self) -> OwnerReference {
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), NS);
        let ds = match api.get_opt("agent-ds").await.expect("read daemonset") {
            Some(ds) => ds,
            None => {
                let ds: DaemonSet = serde_json::from_value(json!({
                    "apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": { "name": "agent-ds", "namespace": NS },
                    "spec": {
                        "selector": { "matchLabels": { "app": "agent" } },
                        "template": { "metadata": { "labels": { "app": "agent" } }, "spec": { "containers": [{ "name": "c", "image": "x:1" }] } }
                    }
                }))
                .expect("daemonset fixture");
                api.create(&PostParams::default(), &ds)
                    .await
                    .expect("create daemonset")
            }
        };
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: ds.name_any(),
            uid: ds.uid().expect("daemonset uid"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// A PodDisruptionBudget over `app=<app>` that allows `max_unavailable` disruptions.
    pub(crate) async fn create_pdb(&self, name: &str, app: &str, max_unavailable: i32) {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": name, "namespace": NS },
            "spec": { "maxUnavailable": max_unavailable, "selector": { "matchLabels": { "app": app } } }
        }))
        .expect("pdb fixture");
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &pdb)
            .await
            .expect("create pdb");
    }

    pub(crate) async fn delete_pdb(&self, name: &str) {
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), NS)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete pdb");
    }

    pub(crate) async fn pdb(&self, name: &str) -> PodDisruptionBudget {
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap()
    }

    /// Pods bound to `node` (terminating ones included).
    pub(crate) async fn pods_on(&self, node: &str) -> Vec<Pod> {
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        pods.into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect()
    }

    /// The Machine bound to `node`.
    pub(crate) async fn machine_of(&self, node: &str) -> Machine {
        self.machines()
            .await
            .into_iter()
            .find(|m| m.node_name() == Some(node))
            .unwrap_or_else(|| panic!("no machine for node {node}"))
    }

    /// The `InPlaceUpdate` condition's reason and transition time on `node`.
    pub(crate) async fn condition(&self, node: &str) -> Option<(String, Timestamp)> {
        let node = self.node(node).await;
        let condition = node
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "InPlaceUpdate")?;
        Some((condition.reason?, condition.last_transition_time?.0))
    }

    /// Waits (at most `limit`, virtual) until `node`'s in-place update condition has `reason`;
    /// returns when it took that reason.
    pub(crate) async fn condition_reached(
        &self,
        node: &str,
        reason: &str,
        limit: std::time::Duration,
    ) -> Timestamp {
        self.wait_for(reason, limit, || async {
            self.condition(node)
                .await
                .filter(|(now, _)| now == reason)
                .map(|(_, at)| at)
        })
        .await
    }

    /// Events whose message mentions `text`, with the given reason.
    pub(crate) async fn events_about(
        &self,
        reason: &str,
        text: &str,
    ) -> Vec<k8s_openapi::api::core::v1::Event> {
        self.events_with_reason(reason)
            .await
            .into_iter()
            .filter(|e| e.message.as_deref().is_some_and(|m| m.contains(text)))
            .collect()
    }
}
