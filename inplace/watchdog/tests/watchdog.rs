//! Integration tests of the dependency watchdog against the embedded API server, in virtual time.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_watchdog::Config;
use inplace_watchdog::scale::ANNOTATION_REPLICAS;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, NodeStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::json;

const NS: &str = "kube-system";

struct Cluster {
    client: Client,
    clock: Clock,
    /// Nodes whose leases are no longer renewed.
    dead: Arc<Mutex<BTreeSet<String>>>,
}

impl Cluster {
    async fn new(nodes: &[&str]) -> Self {
        let clock = Clock::simulated("2026-01-01T00:00:00Z".parse().unwrap());
        let server = ApiServer::new(clock.clone());
        let client = server.admin_client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in inplace_api::crd::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let cluster = Self { client, clock, dead: Arc::default() };
        for name in nodes {
            cluster.add_node(name).await;
        }
        for (name, replicas) in [("machine-controller-manager", 1), ("cluster-autoscaler", 1), ("kube-controller-manager", 2)] {
            let deployment = Deployment {
                metadata: ObjectMeta { name: Some(name.into()), namespace: Some(NS.into()), ..Default::default() },
                spec: Some(DeploymentSpec {
                    replicas: Some(replicas),
                    selector: LabelSelector { match_labels: Some([("app".to_owned(), name.to_owned())].into()), ..Default::default() },
                    template: serde_json::from_value(json!({
                        "metadata": { "labels": { "app": name } },
                        "spec": { "containers": [{ "name": "c", "image": "x" }] }
                    }))
                    .unwrap(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            Api::<Deployment>::namespaced(cluster.client.clone(), NS).create(&PostParams::default(), &deployment).await.unwrap();
        }
        cluster
    }

    async fn add_node(&self, name: &str) {
        let node = Node { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
        Api::<Node>::all(self.client.clone()).create(&PostParams::default(), &node).await.unwrap();
        let machine = json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine",
            "metadata": { "name": format!("m-{name}"), "namespace": NS, "labels": { "node": name } },
            "spec": {}
        });
        let gvk = kube::api::GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "Machine");
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(self.client.clone(), NS, &kube::api::ApiResource::from_gvk(&gvk));
        api.create(&PostParams::default(), &serde_json::from_value(machine).unwrap()).await.unwrap();
        self.set_condition(name, "Ready", "True", "KubeletReady").await;
        self.renew(name).await;
    }

    async fn renew(&self, name: &str) {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(LeaseSpec { renew_time: Some(MicroTime(self.clock.now())), ..Default::default() }),
        };
        let api: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        api.patch(name, &PatchParams::apply("kubelet").force(), &Patch::Apply(&lease)).await.unwrap();
    }

    async fn set_condition(&self, node: &str, type_: &str, status: &str, reason: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let mut current = api.get(node).await.unwrap();
        let conditions = current.status.get_or_insert_with(NodeStatus::default).conditions.get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != type_);
        conditions.push(NodeCondition { type_: type_.into(), status: status.into(), reason: Some(reason.into()), ..Default::default() });
        api.replace_status(node, &PostParams::default(), &current).await.unwrap();
    }

    /// Kubelets renewing every 10 s, except dead ones.
    fn start_kubelets(&self, nodes: Vec<String>) -> tokio::task::JoinHandle<()> {
        let (client, clock, dead) = (self.client.clone(), self.clock.clone(), self.dead.clone());
        tokio::spawn(async move {
            let cluster = Cluster { client, clock: clock.clone(), dead: dead.clone() };
            loop {
                let dead_now = dead.lock().unwrap().clone();
                for n in nodes.iter().filter(|n| !dead_now.contains(*n)) {
                    cluster.renew(n).await;
                }
                clock.sleep(Duration::from_secs(10)).await;
            }
        })
    }

    fn start_watchdog(&self) -> tokio::task::JoinHandle<()> {
        let (client, clock) = (self.client.clone(), self.clock.clone());
        let config = Config { namespace: NS.into(), machine_namespace: NS.into(), ..Config::default() };
        tokio::spawn(async move { inplace_watchdog::run(client, clock, config).await.unwrap() })
    }

    async fn replicas(&self, name: &str) -> (i32, Option<String>) {
        let d = Api::<Deployment>::namespaced(self.client.clone(), NS).get(name).await.unwrap();
        let annotation = d.annotations().get(ANNOTATION_REPLICAS).cloned();
        (d.spec.unwrap().replicas.unwrap(), annotation)
    }

    async fn status(&self) -> std::collections::BTreeMap<String, String> {
        Api::<ConfigMap>::namespaced(self.client.clone(), NS).get("dependency-watchdog-status").await.unwrap().data.unwrap()
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i}")).collect()
}

#[tokio::test(start_paused = true)]
async fn nodes_under_update_with_expired_leases_do_not_trigger_a_scale_down() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    // Three nodes reboot for their update (ReadyForUpdate) or failed it: their leases expire.
    cluster.set_condition("n0", "InPlaceUpdate", "True", "ReadyForUpdate").await;
    cluster.set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate").await;
    cluster.set_condition("n2", "InPlaceUpdate", "True", "UpdateFailed").await;
    cluster.dead.lock().unwrap().extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(cluster.replicas("machine-controller-manager").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ScaleUp", "{status:?}");
    assert_eq!(status["candidates"], "n3,n4");
}

#[tokio::test(start_paused = true)]
async fn the_same_number_of_dead_nodes_not_under_update_scales_down_in_order_and_back() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    cluster.clock.sleep(Duration::from_secs(30)).await;
    // Three nodes really die; one of them is NotReady, which still counts.
    cluster.set_condition("n2", "Ready", "False", "KubeletNotReady").await;
    cluster.dead.lock().unwrap().extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(cluster.replicas("machine-controller-manager").await, (0, Some("1".into())));
    assert_eq!(cluster.replicas("cluster-autoscaler").await, (0, Some("1".into())));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (0, Some("2".into())));
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
    let events = Api::<k8s_openapi::api::core::v1::Event>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let mut events = events;
    events.sort_by_key(|e| e.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok()));
    let order: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ScaledDown"))
        .map(|e| e.involved_object.name.clone().unwrap())
        .collect();
    assert_eq!(order, ["machine-controller-manager", "cluster-autoscaler", "kube-controller-manager"]);
    // The nodes come back: replicas restored, annotations gone.
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.replicas("machine-controller-manager").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
}

#[tokio::test(start_paused = true)]
async fn a_single_candidate_never_scales_down() {
    let cluster = Cluster::new(&["n0", "n1"]).await;
    cluster.set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate").await;
    let _watchdog = cluster.start_watchdog();
    // No kubelets: both leases expire, but only n0 is a candidate.
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(cluster.replicas("machine-controller-manager").await, (1, None));
    assert_eq!(cluster.status().await["decision"], "Skip");
}
