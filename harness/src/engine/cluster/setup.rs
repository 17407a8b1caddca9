//! Putting a scenario's starting objects into the cluster: the CRDs, the namespaces, the image
//! catalog, the watchdog's dependents and the worker pool; later, once the nodes are up, the
//! workloads on them (pods, PodDisruptionBudgets, DaemonSet pods, pods with local storage).
//! Every object carries the run's labels (none, but on an existing cluster; there the run's
//! namespaces exist already, and CRDs the cluster has with the same definition are used).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, Namespace, Pod, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use rackproof_clock::Clock;

use crate::engine::cluster::objects::{self, DEPENDENTS, NAMESPACE};
use crate::engine::run::pool_size;
use crate::scenario::{Scenario, Workload};

/// Namespace of the workload pods.
pub(crate) const WORKLOAD_NAMESPACE: &str = "apps";

/// Why the workloads are not in place.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkloadsError {
    #[error(transparent)]
    Place(#[from] SetupError),
    #[error("failed to list the workload pods or their ReplicaSets")]
    List(#[source] kube::Error),
    #[error("workload pods did not start, or their ReplicaSet did not adopt them, within {within}: {}", waiting.join(", "))]
    NotRunning {
        within: String,
        waiting: Vec<String>,
    },
}

/// A failed setup request.
#[derive(Debug, thiserror::Error)]
#[error("failed to {what}")]
pub(crate) struct SetupError {
    what: String,
    #[source]
    source: kube::Error,
}

/// The run's labels (empty where the cluster is the run's own).
type Labels = BTreeMap<String, String>;

/// Creates `object` with `labels`.
async fn create<K>(
    api: &Api<K>,
    object: &K,
    labels: &Labels,
    what: impl Into<String>,
) -> Result<K, SetupError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let labelled;
    let object = if labels.is_empty() {
        object
    } else {
        let mut copy = object.clone();
        let meta = copy.meta_mut();
        meta.labels
            .get_or_insert_with(BTreeMap::new)
            .extend(labels.clone());
        labelled = copy;
        &labelled
    };
    api.create(&PostParams::default(), object)
        .await
        .map_err(|source| SetupError {
            what: what.into(),
            source,
        })
}

/// Creates `object` unless it exists: on an existing cluster, the run's namespaces (made when it
/// took the cluster) and the CRDs the cluster has with the same definition (checked then).
async fn create_unless_there<K>(
    api: &Api<K>,
    object: &K,
    labels: &Labels,
    what: String,
) -> Result<(), SetupError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match create(api, object, labels, what).await {
        Err(SetupError {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 409 && !labels.is_empty() => Ok(()),
        other => other.map(|_| ()),
    }
}

/// How long a pod's creation is retried while its namespace's `default` ServiceAccount or its
/// token does not exist yet (a real cluster's controller manager makes them just after the
/// namespace; kube-apiserver's ServiceAccount admission refuses pods until then).
const SERVICE_ACCOUNT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Creates `pod`, retrying while the namespace's service account is not ready (see
/// [`SERVICE_ACCOUNT_WAIT`]).
async fn create_pod(
    api: &Api<Pod>,
    clock: &Clock,
    pod: &Pod,
    labels: &Labels,
    what: String,
) -> Result<Pod, SetupError> {
    let started = clock.instant();
    loop {
        match create(api, pod, labels, what.clone()).await {
            Err(SetupError {
                source: kube::Error::Api(status),
                ..
            }) if service_account_not_ready(&status.message)
                && clock.since(started) < SERVICE_ACCOUNT_WAIT =>
            {
                clock.sleep(std::time::Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

/// kube-apiserver's ServiceAccount admission refusals while the account or its token is missing.
fn service_account_not_ready(message: &str) -> bool {
    message.contains("error looking up service account")
        || message.contains("No API token found for service account")
}

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The cluster as the scenario starts it, before any machine exists.
pub(crate) async fn cluster(
    client: &Client,
    clock: &Clock,
    scenario: &Scenario,
    labels: &Labels,
) -> Result<(), SetupError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in inplace_api::crd::crds() {
        let name = crd.name_any();
        create_unless_there(&crds, &crd, labels, format!("install CRD {name}")).await?;
    }
    if !labels.is_empty() {
        wait_established(&crds, clock).await?;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [NAMESPACE, WORKLOAD_NAMESPACE] {
        let what = format!("create namespace {name}");
        create_unless_there(&namespaces, &namespace(name), labels, what).await?;
    }
    let catalogs = Api::all(client.clone());
    let catalog = objects::image_catalog(scenario);
    create(&catalogs, &catalog, labels, "create the image catalog").await?;
    let deployments = Api::namespaced(client.clone(), NAMESPACE);
    for name in DEPENDENTS {
        let what = format!("create deployment {NAMESPACE}/{name}");
        create(&deployments, &objects::dependent(name), labels, what).await?;
    }
    let pools = Api::namespaced(client.clone(), NAMESPACE);
    for pool in scenario.pools() {
        let object = objects::worker_pool(pool, pool_size(scenario, pool), clock.now());
        let what = format!("create worker pool {}", pool.name);
        create(&pools, &object, labels, what).await?;
    }
    Ok(())
}

/// How long a CRD may take to be served after its creation.
const ESTABLISHED_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until the CRDs are served (`Established`): a custom resource created before is
/// refused with NotFound. kube-apiserver establishes a CRD within a second.
async fn wait_established(
    crds: &Api<CustomResourceDefinition>,
    clock: &Clock,
) -> Result<(), SetupError> {
    let started = clock.instant();
    for crd in inplace_api::crd::crds() {
        let name = crd.name_any();
        loop {
            let got = crds.get(&name).await.map_err(|source| SetupError {
                what: format!("read CRD {name}"),
                source,
            })?;
            let established = got
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established || clock.since(started) > ESTABLISHED_WITHIN {
                break;
            }
            clock.sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), app.to_owned())])
}

pub(crate) fn pod(name: String, app: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(WORKLOAD_NAMESPACE.to_owned()),
            labels: Some(labels(app)),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            containers: vec![container(app)],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// Creates `pdb` as `policy/v1`, or as `policy/v1beta1` where the server has no `policy/v1`
/// (Kubernetes before 1.21; the spec's fields used here are the same).
async fn create_pdb(
    client: &Client,
    pdb: &PodDisruptionBudget,
    labels: &Labels,
) -> Result<(), SetupError> {
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let mut pdb = pdb.clone();
    pdb.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels.clone());
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    match api.create(&PostParams::default(), &pdb).await {
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("policy", "v1beta1", "PodDisruptionBudget"),
                "poddisruptionbudgets",
            );
            let mut value = serde_json::to_value(&pdb).unwrap_or_default();
            value["apiVersion"] = "policy/v1beta1".into();
            let object: DynamicObject = serde_json::from_value(value).map_err(|e| SetupError {
                what: format!("create PodDisruptionBudget {name} as policy/v1beta1"),
                source: kube::Error::SerdeError(e),
            })?;
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), WORKLOAD_NAMESPACE, &resource);
            create(
                &api,
                &object,
                labels,
                format!("create PodDisruptionBudget {name} (policy/v1beta1)"),
            )
            .await
            .map(|_| ())
        }
        Err(source) => Err(SetupError {
            what: format!("create PodDisruptionBudget {name}"),
            source,
        }),
        Ok(_) => Ok(()),
    }
}

/// The workloads, created once, when the pools' nodes are up: the scenario's on every node of
/// `members` (by pool), each pool's own on its members.
pub(crate) async fn workloads(
    client: &Client,
    clock: &Clock,
    scenario: &Scenario,
    members: &BTreeMap<String, Vec<String>>,
    run_labels: &Labels,
) -> Result<(), SetupError> {
    let every: Vec<String> = members.values().flatten().cloned().collect();
    place(client, clock, &scenario.workloads, &every, run_labels).await?;
    for pool in scenario.pools() {
        if let Some(nodes) = members.get(&pool.name) {
            place(client, clock, &pool.workloads, nodes, run_labels).await?;
        }
    }
    Ok(())
}

/// `workloads` on `nodes`.
async fn place(
    client: &Client,
    clock: &Clock,
    workloads: &[Workload],
    nodes: &[String],
    run_labels: &Labels,
) -> Result<(), SetupError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    for workload in workloads {
        match workload {
            Workload::Pods(w) => {
                if let Some(max_unavailable) = w.pdb_max_unavailable {
                    let pdb = PodDisruptionBudget {
                        metadata: ObjectMeta {
                            name: Some(w.name.clone()),
                            ..ObjectMeta::default()
                        },
                        spec: Some(PodDisruptionBudgetSpec {
                            max_unavailable: Some(IntOrString::Int(
                                i32::try_from(max_unavailable).unwrap_or(i32::MAX),
                            )),
                            selector: Some(selector(&w.name)),
                            ..PodDisruptionBudgetSpec::default()
                        }),
                        ..PodDisruptionBudget::default()
                    };
                    create_pdb(client, &pdb, run_labels).await?;
                }
                for node in nodes {
                    for i in 1..=w.per_node {
                        let pod = pod(format!("{}-{node}-{i}", w.name), &w.name, node);
                        create_pod(
                            &pods,
                            clock,
                            &pod,
                            run_labels,
                            format!("create pod {} on {node}", w.name),
                        )
                        .await?;
                    }
                }
                // After its pods, which it adopts: made first, it would make pods of its own.
                let replicas = nodes.len() * w.per_node as usize;
                replica_set(client, &w.name, replicas, run_labels).await?;
            }
            Workload::DaemonSet(w) => {
                let daemon_set = DaemonSet {
                    metadata: ObjectMeta {
                        name: Some(w.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(DaemonSetSpec {
                        selector: selector(&w.name),
                        template: template(&w.name, run_labels),
                        ..DaemonSetSpec::default()
                    }),
                    ..DaemonSet::default()
                };
                let api = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
                let what = format!("create DaemonSet {}", w.name);
                let created = create(&api, &daemon_set, run_labels, what).await?;
                let owner = OwnerReference {
                    api_version: "apps/v1".to_owned(),
                    kind: "DaemonSet".to_owned(),
                    name: w.name.clone(),
                    uid: created.uid().unwrap_or_default(),
                    controller: Some(true),
                    ..OwnerReference::default()
                };
                for node in nodes {
                    let mut pod = pod(format!("{}-{node}", w.name), &w.name, node);
                    pod.metadata.owner_references = Some(vec![owner.clone()]);
                    create_pod(
                        &pods,
                        clock,
                        &pod,
                        run_labels,
                        format!("create DaemonSet pod {} on {node}", w.name),
                    )
                    .await?;
                }
            }
            Workload::LocalStorage(w) => {
                for node in nodes {
                    let mut pod = pod(format!("{}-{node}", w.name), &w.name, node);
                    if let Some(spec) = pod.spec.as_mut() {
                        spec.volumes = Some(vec![Volume {
                            name: "scratch".to_owned(),
                            empty_dir: Some(EmptyDirVolumeSource::default()),
                            ..Volume::default()
                        }]);
                    }
                    create_pod(
                        &pods,
                        clock,
                        &pod,
                        run_labels,
                        format!("create pod {} with local storage on {node}", w.name),
                    )
                    .await?;
                }
            }
        }
    }
    Ok(())
}

/// The ReplicaSet that controls a `pods` workload's pods, made after them: it adopts them (sets
/// itself as their controller), as a real ReplicaSet controller adopts the orphans its selector
/// matches. A real cluster's disruption controller takes a budget's expected pods from it (a
/// budget with `maxUnavailable` over pods without a controller allows no disruption), and the
/// ReplicaSet controller replaces an evicted pod on another node (on the embedded server and a
/// local control plane, Rackproof's stand-in: `components::workloads`).
async fn replica_set(
    client: &Client,
    name: &str,
    replicas: usize,
    run_labels: &Labels,
) -> Result<(), SetupError> {
    let replica_set = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(i32::try_from(replicas).unwrap_or(i32::MAX)),
            selector: selector(name),
            template: Some(template(name, run_labels)),
            ..ReplicaSetSpec::default()
        }),
        ..ReplicaSet::default()
    };
    let api = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    create(
        &api,
        &replica_set,
        run_labels,
        format!("create ReplicaSet {name}"),
    )
    .await
    .map(|_| ())
}

/// The selector of a workload's pods.
fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(app)),
        ..LabelSelector::default()
    }
}

/// The pod template of a workload's controller. On a shared cluster the pods it makes carry the
/// run's labels, and its scheduler places them on the run's nodes alone (a node selector on the
/// run label).
fn template(app: &str, run_labels: &Labels) -> PodTemplateSpec {
    let node_selector = run_labels
        .get(crate::engine::cluster::existing::RUN_LABEL)
        .map(|run| {
            BTreeMap::from([(
                crate::engine::cluster::existing::RUN_LABEL.to_owned(),
                run.clone(),
            )])
        });
    let mut pod_labels = labels(app);
    pod_labels.extend(run_labels.clone());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            node_selector,
            containers: vec![container(app)],
            ..PodSpec::default()
        }),
    }
}

fn container(app: &str) -> Container {
    Container {
        name: app.to_owned(),
        image: Some(format!("{app}:lab")),
        ..Container::default()
    }
}

/// Waits until every workload pod runs and is Ready (the nodes' kubelets started them), and each
/// pod of a ReplicaSet has it as its controller (adopted), so a PodDisruptionBudget counts them
/// as healthy before anything is drained.
pub(crate) async fn wait_workloads_running(
    client: &Client,
    clock: &rackproof_clock::Clock,
    within: std::time::Duration,
) -> Result<(), WorkloadsError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let deadline = clock.instant() + within;
    loop {
        let controlled: std::collections::BTreeSet<String> = replica_sets
            .list(&kube::api::ListParams::default())
            .await
            .map_err(WorkloadsError::List)?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        let list = pods
            .list(&kube::api::ListParams::default())
            .await
            .map_err(WorkloadsError::List)?;
        let waiting: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                let orphan = p
                    .labels()
                    .get("app")
                    .is_some_and(|app| controlled.contains(app))
                    && !p
                        .owner_references()
                        .iter()
                        .any(|o| o.controller == Some(true));
                !ready(p) || orphan
            })
            .map(ResourceExt::name_any)
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if clock.instant() >= deadline {
            return Err(WorkloadsError::NotRunning {
                within: rackproof_clock::format_duration(within),
                waiting,
            });
        }
        clock.sleep(std::time::Duration::from_secs(1)).await;
    }
}

fn ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Running")
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}
