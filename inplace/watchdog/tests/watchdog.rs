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

use faults::{Record, Seen, Verdict, faulty_client, hook};

// The orchestrator's tests hold the fault-injecting client; the watchdog uses the same one.
#[path = "../../orchestrator/tests/support/faults.rs"]
#[expect(
    dead_code,
    reason = "the watchdog's tests use only part of the fault client"
)]
mod faults;

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
    cluster
        .set_condition("n0", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n2", "InPlaceUpdate", "True", "UpdateFailed")
        .await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ScaleUp", "{status:?}");
    assert_eq!(status["candidates"], "n3,n4");
}

/// Machines come from a watch, not a list per probe (as DWD reads them through its cache): a
/// Machine that fails after the watchdog started takes its node out of the next probe, and a new
/// node's Machine makes it a candidate, with the Machines listed once.
#[tokio::test(start_paused = true)]
async fn machines_are_read_from_a_watch_and_their_changes_reach_the_next_probe() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let forward = hook(|_: Seen| async { Verdict::Forward });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), forward, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(30)).await;
    assert_eq!(cluster.status().await["candidates"], "n0,n1,n2,n3,n4");

    // The Machines of n0 and n1 fail; then the leases of n0, n1 and n2 expire. Without the
    // failures that would be 3 of 5 (a scale-down); with them it is 1 of 3.
    let gvk = kube::api::GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "Machine");
    let machines: Api<kube::api::DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        NS,
        &kube::api::ApiResource::from_gvk(&gvk),
    );
    for node in ["n0", "n1"] {
        let failed = json!({"status": {"currentStatus": {"phase": "Failed"}}});
        machines
            .patch_status(
                &format!("m-{node}"),
                &PatchParams::default(),
                &Patch::Merge(&failed),
            )
            .await
            .unwrap();
    }
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    let status = cluster.status().await;
    assert_eq!(status["candidates"], "n2,n3,n4", "{status:?}");
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );

    // A node added later is a candidate at the next probe.
    cluster.add_node("n5").await;
    cluster.clock.sleep(Duration::from_secs(20)).await;
    assert_eq!(cluster.status().await["candidates"], "n2,n3,n4,n5");

    const MACHINES: &str = "/apis/machine.sapcloud.io/v1alpha1/namespaces/kube-system/machines";
    let lists = log
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path == MACHINES && !r.watch)
        .count();
    assert_eq!(lists, 1, "the Machines are listed once, then watched");
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
    cluster
        .set_condition("n2", "Ready", "False", "KubeletNotReady")
        .await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
    let events = Api::<k8s_openapi::api::core::v1::Event>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let mut events = events;
    events.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    });
    let order: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ScaledDown"))
        .map(|e| e.involved_object.name.clone().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );
    // The nodes come back: replicas restored, annotations gone.
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
}

#[tokio::test(start_paused = true)]
async fn a_single_candidate_never_scales_down() {
    let cluster = Cluster::new(&["n0", "n1"]).await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    let _watchdog = cluster.start_watchdog();
    // No kubelets: both leases expire, but only n0 is a candidate.
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.status().await["decision"], "Skip");
}

/// Names of the dependents scaled by ScaledDown Events, oldest first.
async fn scaled_down(cluster: &Cluster) -> Vec<String> {
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

async fn events_with_reason(cluster: &Cluster, reason: &str) -> usize {
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

#[tokio::test(start_paused = true)]
async fn expired_leases_of_nodes_under_update_are_ignored_but_as_many_real_deaths_scale_down_and_recovery_restores()
 {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    cluster.clock.sleep(Duration::from_secs(30)).await;

    // 1. Three of five nodes are under in-place update (rebooting, or failed) and renew nothing:
    //    3/5 = 0.6 would reach the threshold if they counted.
    cluster
        .set_condition("n0", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n2", "InPlaceUpdate", "True", "UpdateFailed")
        .await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    for _ in 0..30 {
        cluster.clock.sleep(Duration::from_secs(10)).await;
        assert_eq!(
            cluster.replicas("machine-controller-manager").await,
            (1, None),
            "no scale-down for nodes under update"
        );
    }
    let status = cluster.status().await;
    assert_eq!(
        (
            status["decision"].as_str(),
            status["candidates"].as_str(),
            status["expired"].as_str()
        ),
        ("ScaleUp", "n3,n4", "")
    );
    assert!(
        status["excluded"].contains("n0: under in-place update"),
        "{status:?}"
    );
    assert!(scaled_down(&cluster).await.is_empty());

    // 2. The update is over (conditions gone, leases renewed); then the same number of nodes not
    //    under update really die.
    for node in ["n0", "n1", "n2"] {
        cluster
            .set_condition(node, "InPlaceUpdate", "False", "UpdateSuccessful")
            .await;
    }
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.status().await["decision"], "ScaleUp");
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n2".to_owned(), "n3".to_owned(), "n4".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    let status = cluster.status().await;
    assert_eq!(
        (status["decision"].as_str(), status["expired"].as_str()),
        ("ScaleDown", "n2,n3,n4")
    );
    assert_eq!(
        scaled_down(&cluster).await,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );

    // 3. They come back: the remembered replicas are restored, the annotations removed.
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("cluster-autoscaler").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    assert_eq!(events_with_reason(&cluster, "ScaledUp").await, 3);
}

/// A fault hook that answers 429 to requests matching `matches` while `throttled` is set.
fn throttle(throttled: Arc<Mutex<bool>>, matches: fn(&Seen) -> bool) -> faults::Hook {
    hook(move |seen: Seen| {
        let throttled = throttled.clone();
        async move {
            if *throttled.lock().unwrap() && matches(&seen) {
                Verdict::Fail(429, "too many requests, please try again later".to_owned())
            } else {
                Verdict::Forward
            }
        }
    })
}

fn count(log: &Mutex<Vec<Record>>, method: http::Method, path: &str) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

#[tokio::test(start_paused = true)]
async fn throttled_probe_backs_off_and_decides_nothing_until_the_throttling_ends() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    let throttled = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let client = faulty_client(
        cluster.client.clone(),
        throttle(throttled.clone(), |s| s.path == LEASES),
        log.clone(),
    );
    let config = Config {
        throttle_backoff: Duration::from_secs(60),
        ..Cluster::config()
    };
    let _watchdog = cluster.start_watchdog_with(client, config);

    // Three of five leases expire while every lease list is answered with 429.
    cluster.clock.sleep(Duration::from_secs(350)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None),
        "no decision without a lease probe"
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("throttled: backing off"),
        "{}",
        status["message"]
    );
    assert_eq!(
        events_with_reason(&cluster, "ProbeFailed").await,
        1,
        "one Event for the failing probe, not one per probe"
    );
    // Every 429 waits out the back-off (60 s) on top of the probe interval (10 s): one try per 70 s
    // (at 0, 70, …, 350 s), where an unthrottled prober would have tried 36 times.
    let tries = count(&log, http::Method::GET, LEASES);
    assert!((4..=6).contains(&tries), "{tries} lease lists in 350 s");

    // The throttling ends: the next probe decides, and the real outage scales down.
    *throttled.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
}

#[tokio::test(start_paused = true)]
async fn throttled_scaling_backs_off_and_completes_in_order_without_losing_replicas() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let throttled = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    const AUTOSCALER: &str = "/apis/apps/v1/namespaces/kube-system/deployments/cluster-autoscaler";
    let writes = |s: &Seen| s.is_write() && s.path.starts_with(AUTOSCALER);
    let client = faulty_client(
        cluster.client.clone(),
        throttle(throttled.clone(), writes),
        log.clone(),
    );
    let config = Config {
        throttle_backoff: Duration::from_secs(60),
        ..Cluster::config()
    };
    let _watchdog = cluster.start_watchdog_with(client, config);
    cluster.clock.sleep(Duration::from_secs(30)).await;

    // A real outage, but scaling the second dependent is throttled.
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(400)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into())),
        "the first dependent is down"
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (1, None),
        "the throttled one is untouched"
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (2, None),
        "in order: nothing after the throttled one"
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("cluster-autoscaler") && status["message"].contains("throttled"),
        "{}",
        status["message"]
    );
    let tries = count(&log, http::Method::PUT, AUTOSCALER);
    assert!(
        (3..=7).contains(&tries),
        "{tries} throttled writes in 400 s: the prober backs off between them"
    );

    // The throttling ends: the rest go down in order, the first one keeps its remembered replicas.
    *throttled.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    assert_eq!(
        scaled_down(&cluster).await,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("cluster-autoscaler").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
}

#[tokio::test(start_paused = true)]
async fn failing_api_server_probe_skips_the_lease_probe_and_scales_nothing() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    let failing = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let down = failing.clone();
    let version = hook(move |seen: Seen| {
        let down = down.clone();
        async move {
            if *down.lock().unwrap() && seen.path == "/version" {
                Verdict::Fail(500, "etcd is unavailable".to_owned())
            } else {
                Verdict::Forward
            }
        }
    });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), version, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("failed to probe the API server"),
        "{}",
        status["message"]
    );
    assert_eq!(
        count(
            &log,
            http::Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        ),
        0,
        "leases are probed only after the API server"
    );
    assert!(
        count(&log, http::Method::GET, "/version") >= 20,
        "the API server probe is retried every probe interval"
    );

    *failing.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(30)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn scaling_that_conflicts_with_a_concurrent_writer_is_retried_and_keeps_the_replicas() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    // Another writer changes each dependent between the watchdog's read and its first write.
    let admin = cluster.client.clone();
    let raced: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let writes = Arc::new(Mutex::new(0usize));
    let race = hook(move |seen: Seen| {
        let (admin, raced, writes) = (admin.clone(), raced.clone(), writes.clone());
        async move {
            if seen.method == http::Method::PUT && seen.path.contains("/deployments/") {
                let lose = {
                    let mut raced = raced.lock().unwrap();
                    if raced.remove(&seen.path) {
                        false
                    } else {
                        raced.insert(seen.path.clone())
                    }
                };
                if lose {
                    let n = {
                        let mut writes = writes.lock().unwrap();
                        *writes += 1;
                        *writes
                    };
                    let patch = json!({ "metadata": { "labels": { "touched-by": format!("writer-{n}") } } });
                    let request = http::Request::patch(seen.path.as_str())
                        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
                        .body(serde_json::to_vec(&patch).unwrap())
                        .unwrap();
                    admin
                        .request_text(request)
                        .await
                        .expect("the concurrent write lands");
                }
            }
            Verdict::Forward
        }
    });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), race, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(30)).await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    let conflicts = log.lock().unwrap().iter().filter(|r| r.code == 409).count();
    assert_eq!(
        conflicts, 6,
        "every scale-down and scale-up write lost one race and was retried"
    );
    assert_eq!(
        events_with_reason(&cluster, "ProbeFailed").await,
        0,
        "a conflict is retried at once, not a failed probe"
    );
}

/// A write of one watchdog instance: when, and to what.
#[derive(Debug, Clone)]
struct Write {
    at: jiff::Timestamp,
    path: String,
}

/// A client whose writes (other than its bids for the leader Lease) land in `log`.
fn recording_client(cluster: &Cluster, log: Arc<Mutex<Vec<Write>>>) -> Client {
    let clock = cluster.clock.clone();
    let record = hook(move |seen: Seen| {
        let (log, clock) = (log.clone(), clock.clone());
        async move {
            let bid = seen
                .path
                .ends_with(&format!("/leases/{}", inplace_watchdog::LEADER_LEASE_NAME))
                || seen.path.ends_with("/leases");
            if seen.is_write() && !bid {
                log.lock().unwrap().push(Write {
                    at: clock.now(),
                    path: format!("{} {}", seen.method, seen.path),
                });
            }
            Verdict::Forward
        }
    });
    faulty_client(cluster.client.clone(), record, Arc::default())
}

fn elected(identity: &str) -> Config {
    Config {
        leader_election: Some(inplace_watchdog::LeaderElection {
            identity: identity.to_owned(),
            ..inplace_watchdog::LeaderElection::new(inplace_watchdog::LEADER_LEASE_NAME, NS)
        }),
        ..Cluster::config()
    }
}

async fn leader_lease(cluster: &Cluster) -> Option<Lease> {
    Api::<Lease>::namespaced(cluster.client.clone(), NS)
        .get_opt(inplace_watchdog::LEADER_LEASE_NAME)
        .await
        .unwrap()
}

/// Two watchdogs: only the Lease holder probes, scales and writes its status; when it dies, the
/// other scales the dependents back, and not before the dead one's Lease lapsed.
#[tokio::test(start_paused = true)]
async fn of_two_watchdogs_only_the_leader_scales_and_the_other_takes_over_once_its_lease_lapsed() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let logs: [Arc<Mutex<Vec<Write>>>; 2] = Default::default();
    let mut tasks = vec![
        cluster.start_watchdog_with(recording_client(&cluster, logs[0].clone()), elected("a")),
        cluster.start_watchdog_with(recording_client(&cluster, logs[1].clone()), elected("b")),
    ];
    cluster.clock.sleep(Duration::from_secs(30)).await;
    let lease = leader_lease(&cluster)
        .await
        .expect("the leader Lease exists");
    let leader = match lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
    {
        Some("a") => 0,
        Some("b") => 1,
        other => panic!("the Lease is held by {other:?}"),
    };
    let follower = 1 - leader;

    // A real outage: three of five nodes die; the dependents go to zero.
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    let follower_writes = logs[follower].lock().unwrap().clone();
    assert!(
        follower_writes.is_empty(),
        "the watchdog without the Lease wrote: {follower_writes:?}"
    );
    let scaled_by_leader = logs[leader]
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.path.contains("/deployments/"))
        .count();
    assert!(
        scaled_by_leader >= 3,
        "the leader scaled the dependents down"
    );

    // The leader dies; the nodes come back. The follower scales up, once the Lease lapsed.
    let dead = tasks.remove(leader);
    dead.abort();
    let _ = dead.await;
    let last = leader_lease(&cluster).await.unwrap().spec.unwrap();
    let lapsed = last
        .renew_time
        .unwrap()
        .0
        .checked_add(Duration::from_secs(15))
        .unwrap();
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    let follower_writes = logs[follower].lock().unwrap().clone();
    assert!(
        follower_writes
            .iter()
            .any(|w| w.path.contains("/deployments/")),
        "the new leader scaled the dependents back"
    );
    let early: Vec<&Write> = follower_writes.iter().filter(|w| w.at < lapsed).collect();
    assert!(
        early.is_empty(),
        "the follower wrote before the leader's Lease lapsed at {lapsed}: {early:?}"
    );
    let new = leader_lease(&cluster).await.unwrap().spec.unwrap();
    assert_eq!(new.holder_identity.as_deref(), Some(["a", "b"][follower]));
    assert_eq!(new.lease_transitions, Some(1));
}
