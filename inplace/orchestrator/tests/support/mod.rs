//! Test doubles for the orchestrator's integration tests: the embedded API server in virtual time,
//! a tiny machine provider that binds Machines to Nodes, a kubelet stand-in (Ready condition,
//! Lease, completing pod deletions) and a fake node agent that answers `ReadyForUpdate`.

#![expect(dead_code, reason = "not every test uses every helper")]

pub(crate) mod pool;
pub(crate) mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::crd::{
    ClassSpec, InPlaceUpdateMachineDeployment, Machine, MachineDeployment, MachineDeploymentSpec,
    MachineDeploymentStrategy, MachineDeploymentStrategyType, MachineSet, MachineTemplateSpec,
    TemplateMetadata,
};
use inplace_api::keys::{
    ANNOTATION_CHECKSUM_APPLIED_OSC, ANNOTATION_CHECKSUM_DOWNLOADED_OSC,
    ANNOTATION_UPDATE_FAILED_REASON, CONDITION_IN_PLACE_UPDATE, LABEL_SELECTED_FOR_UPDATE,
    LABEL_UPDATE_RESULT, REASON_READY_FOR_UPDATE,
};
use inplace_api::strategy::OrchestrationType;
use inplace_orchestrator::Config;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, NodeStatus, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, MicroTime, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use rackproof_test_support::kube::simulated_cluster;
use serde_json::json;
use tokio::task::JoinHandle;

pub(crate) const NS: &str = "default";
pub(crate) const POOL: &str = "pool-a";

/// What the fake agent does when a node becomes `ReadyForUpdate`.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Success,
    Fail(String),
    /// Total failure: the node never reports anything.
    Silent,
}

/// The simulated lab: API server, clock, and the behaviour of the doubles.
#[derive(Clone)]
pub(crate) struct Lab {
    pub(crate) server: ApiServer,
    pub(crate) client: Client,
    pub(crate) clock: Clock,
    /// Per node: what the agent reports (default success).
    pub(crate) outcomes: Arc<Mutex<BTreeMap<String, Outcome>>>,
    /// How long the agent takes to "update" a node.
    pub(crate) update_time: Duration,
    /// Nodes whose kubelet is dead (no heartbeat).
    pub(crate) dead: Arc<Mutex<BTreeSet<String>>>,
    /// The OSC Secret (namespace, name) the agent applies, if any: when a node becomes
    /// `ReadyForUpdate` the agent plans the Secret's checksum as it is then, and reports it with
    /// its success as the real agent does (annotation `checksum/cloud-config-data`).
    pub(crate) osc: Arc<Mutex<Option<(String, String)>>>,
    /// Per node: the `ReadyForUpdate` transition the agent planned for, and the checksum planned.
    planned: Arc<Mutex<BTreeMap<String, PlannedUpdate>>>,
}

/// The `ReadyForUpdate` transition an agent planned for, and the OSC checksum it planned.
type PlannedUpdate = (Timestamp, Option<String>);

impl Lab {
    pub(crate) async fn new() -> Self {
        let (server, client, clock) = simulated_cluster().await;
        Self {
            server,
            client,
            clock,
            outcomes: Arc::default(),
            update_time: Duration::from_secs(30),
            dead: Arc::default(),
            osc: Arc::default(),
            planned: Arc::default(),
        }
    }

    pub(crate) fn config() -> Config {
        Config {
            namespace: NS.to_owned(),
            ..Config::default()
        }
    }

    /// Starts the orchestrator as a task the test can abort.
    pub(crate) fn start_orchestrator(&self, config: Config) -> JoinHandle<()> {
        let (client, clock) = (self.client.clone(), self.clock.clone());
        tokio::spawn(async move {
            inplace_orchestrator::run(client, clock, config)
                .await
                .expect("orchestrator config is valid");
        })
    }

    /// Starts the orchestrator with its own client (e.g. a fault-injecting one).
    pub(crate) fn start_orchestrator_with(&self, client: Client, config: Config) -> JoinHandle<()> {
        let clock = self.clock.clone();
        tokio::spawn(async move {
            inplace_orchestrator::run(client, clock, config)
                .await
                .expect("orchestrator config is valid");
        })
    }

    /// Starts the machine provider, kubelets and agent.
    pub(crate) fn start_doubles(&self) -> JoinHandle<()> {
        let lab = self.clone();
        tokio::spawn(async move {
            loop {
                lab.tick().await;
                lab.clock.sleep(Duration::from_secs(1)).await;
            }
        })
    }

    async fn tick(&self) {
        let now = self.clock.now();
        let machines: Api<Machine> = Api::namespaced(self.client.clone(), NS);
        let nodes: Api<Node> = Api::all(self.client.clone());
        // Machine provider: bind every unbound Machine to a new Node named after it.
        for machine in machines.list(&ListParams::default()).await.unwrap().items {
            if machine.node_name().is_some() || machine.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let node_name = format!("node-{}", machine.name_any());
            let node = Node {
                metadata: ObjectMeta {
                    name: Some(node_name.clone()),
                    labels: Some(
                        [("worker.gardener.cloud/pool".to_owned(), POOL.to_owned())].into(),
                    ),
                    ..Default::default()
                },
                ..Default::default()
            };
            let _ = nodes.create(&PostParams::default(), &node).await;
            let patch = json!({ "metadata": { "labels": { "node": node_name } } });
            machines
                .patch(
                    &machine.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .unwrap();
        }
        let dead = self.dead.lock().unwrap().clone();
        for node in nodes.list(&ListParams::default()).await.unwrap().items {
            let name = node.name_any();
            if dead.contains(&name) {
                continue;
            }
            // Kubelet: Ready condition and lease.
            self.heartbeat(&node, now).await;
            // Agent: answer ReadyForUpdate after the update time.
            let ready_since = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_IN_PLACE_UPDATE))
                .filter(|c| c.reason.as_deref() == Some(REASON_READY_FOR_UPDATE))
                .and_then(|c| c.last_transition_time.clone());
            let planned = match ready_since.as_ref() {
                Some(since) if node.labels().get(LABEL_UPDATE_RESULT).is_none() => {
                    Some(self.plan(&name, since.0).await)
                }
                _ => None,
            };
            if let Some(since) = ready_since
                && node.labels().get(LABEL_UPDATE_RESULT).is_none()
                && since.0.checked_add(self.update_time).unwrap() <= now
            {
                let outcome = self
                    .outcomes
                    .lock()
                    .unwrap()
                    .get(&name)
                    .cloned()
                    .unwrap_or(Outcome::Success);
                let patch = match outcome {
                    Outcome::Success => json!({ "metadata": {
                        "labels": { LABEL_UPDATE_RESULT: "successful" },
                        "annotations": { ANNOTATION_CHECKSUM_APPLIED_OSC: planned.flatten() } } }),
                    Outcome::Fail(reason) => json!({ "metadata": {
                        "labels": { LABEL_UPDATE_RESULT: "failed" },
                        "annotations": { ANNOTATION_UPDATE_FAILED_REASON: reason } } }),
                    Outcome::Silent => continue,
                };
                nodes
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .unwrap();
            }
        }
        // Kubelet: complete graceful deletions of pods on live nodes.
        let pods: Api<Pod> = Api::all(self.client.clone());
        for pod in pods.list(&ListParams::default()).await.unwrap().items {
            let on_live = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| !dead.contains(n));
            if pod.metadata.deletion_timestamp.is_some() && on_live {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace().unwrap());
                let _ = api
                    .delete(
                        &pod.name_any(),
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        },
                    )
                    .await;
            }
        }
    }

    /// The checksum the agent planned for the `ReadyForUpdate` of `node` at `since`: the OSC
    /// Secret's as it was when the agent first saw that transition.
    async fn plan(&self, node: &str, since: Timestamp) -> Option<String> {
        if let Some((at, checksum)) = self.planned.lock().unwrap().get(node)
            && *at == since
        {
            return checksum.clone();
        }
        let osc = self.osc.lock().unwrap().clone();
        let checksum = match osc {
            Some((namespace, name)) => Api::<Secret>::namespaced(self.client.clone(), &namespace)
                .get_opt(&name)
                .await
                .unwrap()
                .and_then(|s| {
                    s.annotations()
                        .get(ANNOTATION_CHECKSUM_DOWNLOADED_OSC)
                        .cloned()
                }),
            None => None,
        };
        self.planned
            .lock()
            .unwrap()
            .insert(node.to_owned(), (since, checksum.clone()));
        checksum
    }

    async fn heartbeat(&self, node: &Node, now: Timestamp) {
        let name = node.name_any();
        let nodes: Api<Node> = Api::all(self.client.clone());
        for _ in 0..5 {
            let Ok(mut current) = nodes.get(&name).await else {
                return;
            };
            let status = current.status.get_or_insert_with(NodeStatus::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            let ready = NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: conditions
                    .iter()
                    .find(|c| c.type_ == "Ready" && c.status == "True")
                    .and_then(|c| c.last_transition_time.clone())
                    .or(Some(Time(now))),
                ..Default::default()
            };
            conditions.retain(|c| c.type_ != "Ready");
            conditions.push(ready);
            match nodes
                .replace_status(&name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(_) => return,
            }
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.clone()),
                renew_time: Some(MicroTime(now)),
                lease_duration_seconds: Some(40),
                ..Default::default()
            }),
        };
        let _ = leases
            .patch(
                &name,
                &PatchParams::apply("kubelet").force(),
                &Patch::Apply(&lease),
            )
            .await;
    }

    /// Stops a node's kubelet without anyone noticing: heartbeats and lease renewals stop, and
    /// its `Ready=True` stays (as when kube-controller-manager is not running to mark it).
    pub(crate) fn stop_kubelet(&self, name: &str) {
        self.dead.lock().unwrap().insert(name.to_owned());
    }

    /// Marks a node's kubelet dead: Ready turns Unknown, heartbeats and lease renewals stop.
    pub(crate) async fn kill_node(&self, name: &str) {
        self.dead.lock().unwrap().insert(name.to_owned());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut node = nodes.get(name).await.unwrap();
        let conditions = node
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        for c in conditions.iter_mut().filter(|c| c.type_ == "Ready") {
            c.status = "Unknown".into();
            c.reason = Some("NodeStatusUnknown".into());
        }
        nodes
            .replace_status(name, &PostParams::default(), &node)
            .await
            .unwrap();
    }

    pub(crate) async fn create_deployment(
        &self,
        name: &str,
        replicas: i32,
        class: &str,
        max_unavailable: i32,
        max_surge: i32,
        orchestration: OrchestrationType,
    ) {
        let labels: BTreeMap<String, String> = [("pool".to_owned(), name.to_owned())].into();
        let spec = MachineDeploymentSpec {
            replicas,
            selector: Some(LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            }),
            template: MachineTemplateSpec {
                metadata: TemplateMetadata {
                    labels,
                    ..Default::default()
                },
                spec: inplace_api::crd::MachineSpec {
                    class: Some(ClassSpec {
                        kind: "MachineClass".into(),
                        name: class.into(),
                        ..Default::default()
                    }),
                    in_place_update_timeout: Some("10m".into()),
                    drain_timeout: Some("2h".into()),
                    max_evict_retries: Some(3),
                    ..Default::default()
                },
            },
            strategy: MachineDeploymentStrategy {
                type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
                rolling_update: None,
                in_place_update: Some(InPlaceUpdateMachineDeployment {
                    max_unavailable: Some(IntOrString::Int(max_unavailable)),
                    max_surge: Some(IntOrString::Int(max_surge)),
                    orchestration_type: Some(orchestration),
                }),
            },
            ..Default::default()
        };
        let md = MachineDeployment::new(name, spec);
        let api: Api<MachineDeployment> = Api::namespaced(self.client.clone(), NS);
        api.create(&PostParams::default(), &md)
            .await
            .expect("create machinedeployment");
    }

    /// Changes the deployment's template (a new machine class): the update trigger.
    pub(crate) async fn change_template(&self, name: &str, class: &str) {
        let api: Api<MachineDeployment> = Api::namespaced(self.client.clone(), NS);
        let patch = json!({ "spec": { "template": { "spec": { "class": { "kind": "MachineClass", "name": class } } } } });
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch machinedeployment");
    }

    /// Makes the Secret `namespace/name` the OSC the agent applies and the deployment's template
    /// names (annotation `rackproof.dev/osc-secret`, as the WorkerPool controller renders it),
    /// with the checksum `checksum`. Call again to change the checksum.
    pub(crate) async fn set_osc(
        &self,
        deployment: &str,
        namespace: &str,
        name: &str,
        checksum: &str,
    ) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": namespace,
                "annotations": { ANNOTATION_CHECKSUM_DOWNLOADED_OSC: checksum } },
        }))
        .unwrap();
        if secrets.get_opt(name).await.unwrap().is_some() {
            let patch = json!({ "metadata": { "annotations": { ANNOTATION_CHECKSUM_DOWNLOADED_OSC: checksum } } });
            secrets
                .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        } else {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
        *self.osc.lock().unwrap() = Some((namespace.to_owned(), name.to_owned()));
        let reference = format!("{namespace}/{name}");
        let md = self.deployment(deployment).await;
        if md
            .spec
            .template
            .metadata
            .annotations
            .get(inplace_orchestrator::workerpool::ANNOTATION_OSC_SECRET)
            != Some(&reference)
        {
            let patch = json!({ "spec": { "template": { "metadata": { "annotations": {
                inplace_orchestrator::workerpool::ANNOTATION_OSC_SECRET: reference } } } } });
            Api::<MachineDeployment>::namespaced(self.client.clone(), NS)
                .patch(deployment, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    }

    pub(crate) async fn machines(&self) -> Vec<Machine> {
        Api::<Machine>::namespaced(self.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    pub(crate) async fn sets(&self) -> Vec<MachineSet> {
        Api::<MachineSet>::namespaced(self.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    pub(crate) async fn nodes(&self) -> Vec<Node> {
        Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    pub(crate) async fn node(&self, name: &str) -> Node {
        Api::<Node>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    pub(crate) async fn deployment(&self, name: &str) -> MachineDeployment {
        Api::<MachineDeployment>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap()
    }

    pub(crate) async fn events(&self) -> Vec<Event> {
        Api::<Event>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    pub(crate) async fn events_with_reason(&self, reason: &str) -> Vec<Event> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    pub(crate) async fn label_node(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = json!({ "metadata": { "labels": { key: value } } });
        Api::<Node>::all(self.client.clone())
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Polls `check` every virtual second until it returns `Some`, or panics after `limit`.
    pub(crate) async fn wait_for<T, F, Fut>(&self, what: &str, limit: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let start = self.clock.now();
        loop {
            if let Some(value) = check().await {
                return value;
            }
            if self.clock.now().duration_since(start).as_secs() as u64 > limit.as_secs() {
                panic!("timed out after {limit:?} (virtual) waiting for {what}");
            }
            self.clock.sleep(Duration::from_secs(1)).await;
        }
    }

    /// Starts a monitor that records the largest number of nodes labelled selected-for-update
    /// (excluding failed nodes when `count_failed` is false) seen at once.
    pub(crate) fn monitor_selected(&self) -> (Arc<Mutex<usize>>, JoinHandle<()>) {
        let max = Arc::new(Mutex::new(0usize));
        let lab = self.clone();
        let seen = max.clone();
        let handle = tokio::spawn(async move {
            loop {
                let nodes = lab.nodes().await;
                let selected = nodes
                    .iter()
                    .filter(|n| n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE))
                    .count();
                {
                    let mut max = seen.lock().unwrap();
                    *max = (*max).max(selected);
                }
                lab.clock.sleep(Duration::from_millis(500)).await;
            }
        });
        (max, handle)
    }

    /// Waits until `replicas` Machines are Running.
    pub(crate) async fn wait_running(&self, replicas: usize) {
        self.wait_for("machines to run", Duration::from_secs(600), || async {
            let machines = self.machines().await;
            let running = machines
                .iter()
                .filter(|m| m.phase().map(|p| p.as_str()) == Some("Running"))
                .count();
            (running == replicas && machines.len() == replicas).then_some(())
        })
        .await;
    }

    /// Waits until every Machine is owned by the set for the current template and no node carries
    /// in-place labels, taints or cordons.
    pub(crate) async fn wait_rolled_out(&self, class: &str, replicas: usize, limit: Duration) {
        self.wait_for("the rollout to complete", limit, || async {
            let sets = self.sets().await;
            if sets.len() != 1
                || sets[0]
                    .spec
                    .template
                    .spec
                    .class
                    .as_ref()
                    .map(|c| c.name.as_str())
                    != Some(class)
            {
                return None;
            }
            let machines = self.machines().await;
            if machines.len() != replicas
                || machines
                    .iter()
                    .any(|m| m.phase().map(|p| p.as_str()) != Some("Running"))
            {
                return None;
            }
            let uid = sets[0].uid().unwrap();
            if machines
                .iter()
                .any(|m| m.owner_references().iter().all(|o| o.uid != uid))
            {
                return None;
            }
            let nodes = self.nodes().await;
            let clean = nodes.iter().all(|n| {
                n.labels()
                    .keys()
                    .all(|k| !k.starts_with("node.machine.sapcloud.io/"))
                    && !n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false)
            });
            clean.then_some(())
        })
        .await;
    }
}

pub(crate) fn is_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

pub(crate) fn condition_reason(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CONDITION_IN_PLACE_UPDATE)?
        .reason
        .clone()
}
