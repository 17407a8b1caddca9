//! Integration tests of the dependency watchdog against the embedded API server, in virtual time.
//!
//! `main.rs` holds the simulated [`Cluster`] (nodes, leases, dependents) the test modules share.

mod api_faults;
mod leader;
mod scale_down;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_watchdog::Config;
use inplace_watchdog::scale::ANNOTATION_REPLICAS;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rackproof_clock::Clock;
use rackproof_test_support::kube::simulated_cluster;
use serde_json::json;

pub(crate) const NS: &str = "kube-system";

pub(crate) struct Cluster {
    client: Client,
    clock: Clock,
    /// Nodes whose leases are no longer renewed.
    dead: Arc<Mutex<BTreeSet<String>>>,
}

impl Cluster {
    async fn new(nodes: &[&str]) -> Self {
        let (_server, client, clock) = simulated_cluster().await;
        let cluster = Self {
            client,
            clock,
            dead: Arc::default(),
        };
        for name in nodes {
            cluster.add_node(name).await;
        }
        for (name, replicas) in [
            ("machine-controller-manager", 1),
            ("cluster-autoscaler", 1),
            ("kube-controller-manager", 2),
        ] {
            let deployment = Deployment {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some(NS.into()),
                    ..Default::default()
                },
                spec: Some(DeploymentSpec {
                    replicas: Some(replicas),
                    selector: LabelSelector {
                        match_labels: Some([("app".to_owned(), name.to_owned())].into()),
                        ..Default::default()
                    },
                    template: serde_json::from_value(json!({
                        "metadata": { "labels": { "app": name } },
                        "spec": { "containers": [{ "name": "c", "image": "x" }] }
                    }))
                    .unwrap(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            Api::<Deployment>::namespaced(cluster.client.clone(), NS)
                .create(&PostParams::default(), &deployment)
                .await
                .unwrap();
        }
        cluster
    }

    async fn add_node(&self, name: &str) {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        let machine = json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine",
            "metadata": { "name": format!("m-{name}"), "namespace": NS, "labels": { "node": name } },
            "spec": {}
        });
        let gvk = kube::api::GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "Machine");
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            NS,
            &kube::api::ApiResource::from_gvk(&gvk),
        );
        api.create(
            &PostParams::default(),
            &serde_json::from_value(machine).unwrap(),
        )
        .await
        .unwrap();
        self.set_condition(name, "Ready", "True", "KubeletReady")
            .await;
        self.renew(name).await;
    }

    async fn renew(&self, name: &str) {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(self.clock.now())),
                ..Default::default()
            }),
        };
        let api: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        api.patch(
            name,
            &PatchParams::apply("kubelet").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap();
    }

    async fn set_condition(&self, node: &str, type_: &str, status: &str, reason: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let mut current = api.get(node).await.unwrap();
        let conditions = current
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != type_);
        conditions.push(NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..Default::default()
        });
        api.replace_status(node, &PostParams::default(), &current)
            .await
            .unwrap();
    }

    /// Kubelets renewing every 10 s, except dead ones.
    fn start_kubelets(&self, nodes: Vec<String>) -> tokio::task::JoinHandle<()> {
        let (client, clock, dead) = (self.client.clone(), self.clock.clone(), self.dead.clone());
        tokio::spawn(async move {
            let cluster = Cluster {
                client,
                clock: clock.clone(),
                dead: dead.clone(),
            };
            loop {
                let dead_now = dead.lock().unwrap().clone();
                for n in nodes.iter().filter(|n| !dead_now.contains(*n)) {
                    cluster.renew(n).await;
                }
                clock.sleep(Duration::from_secs(10)).await;
            }
        })
    }

    fn config() -> Config {
        Config {
            namespace: NS.into(),
            machine_namespace: NS.into(),
            ..Config::default()
        }
    }

    fn start_watchdog(&self) -> tokio::task::JoinHandle<()> {
        self.start_watchdog_with(self.client.clone(), Self::config())
    }

    /// Starts the watchdog with its own client (e.g. a fault-injecting one) and configuration.
    fn start_watchdog_with(&self, client: Client, config: Config) -> tokio::task::JoinHandle<()> {
        let clock = self.clock.clone();
        tokio::spawn(async move { inplace_watchdog::run(client, clock, config).await.unwrap() })
    }

    async fn replicas(&self, name: &str) -> (i32, Option<String>) {
        let d = Api::<Deployment>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap();
        let annotation = d.annotations().get(ANNOTATION_REPLICAS).cloned();
        (d.spec.unwrap().replicas.unwrap(), annotation)
    }

    async fn status(&self) -> std::collections::BTreeMap<String, String> {
        Api::<ConfigMap>::namespaced(self.client.clone(), NS)
            .get("dependency-watchdog-status")
            .await
            .unwrap()
            .data
            .unwrap()
    }
}

pub(crate) fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i}")).collect()
}

/// Names of the dependents scaled by ScaledDown Events, oldest first.
pub(crate) async fn scaled_down(cluster: &Cluster) -> Vec<String> {
    let mut events = Api::<k8s_openapi::api::core::v1::Event>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    events.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    });
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ScaledDown"))
        .map(|e| e.involved_object.name.clone().unwrap())
        .collect()
}

pub(crate) async fn events_with_reason(cluster: &Cluster, reason: &str) -> usize {
    let events = Api::<k8s_openapi::api::core::v1::Event>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .count()
}
