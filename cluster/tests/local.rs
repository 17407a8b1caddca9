//! The `local` provider against the real etcd, kube-apiserver and kube-controller-manager v1.20.2.
//!
//! These tests need `etcd` (Debian `etcd-server`) and the kube-apiserver and
//! kube-controller-manager built by `ci/build-kube-apiserver`; without them they fail, naming
//! `ci/install-local-control-plane`. The controller manager runs with short grace periods; waits
//! poll the API until a deadline.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use rackproof_clock::Clock;
use rackproof_cluster::local::{
    ControllerManagerOptions, Decision, Error, LocalControlPlane, LocalOptions, NodeAuthorizer,
    User,
};
use serde_json::json;

async fn start(options: LocalOptions) -> LocalControlPlane {
    LocalControlPlane::start(options)
        .await
        .unwrap_or_else(|error| panic!("{}", report(&error)))
}

fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn process_exists(pid: u32) -> bool {
    // A zombie still has a /proc entry; a reaped process has none.
    Path::new(&format!("/proc/{pid}")).exists()
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[tokio::test]
async fn serves_core_objects_leases_crds_and_custom_resources() {
    let plane = start(LocalOptions::default()).await;
    let client = plane.client();
    let post = PostParams::default();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "rackproof" } })),
        )
        .await
        .unwrap();

    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "node-a" } })),
        )
        .await
        .unwrap();
    assert!(node.metadata.uid.is_some());

    let pods: Api<Pod> = Api::namespaced(client.clone(), "rackproof");
    let pod = json!({
        "metadata": { "name": "app" },
        "spec": { "nodeName": "node-a", "containers": [{ "name": "app", "image": "busybox" }] },
    });
    pods.create(&post, &from_json(pod)).await.unwrap();
    assert_eq!(
        pods.get("app")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref(),
        Some("node-a")
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = json!({
        "metadata": { "name": "node-a" },
        "spec": { "holderIdentity": "node-a", "leaseDurationSeconds": 40 },
    });
    leases.create(&post, &from_json(lease)).await.unwrap();
    assert_eq!(
        leases
            .get("node-a")
            .await
            .unwrap()
            .spec
            .unwrap()
            .lease_duration_seconds,
        Some(40)
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "metadata": { "name": "widgets.rackproof.test" },
        "spec": {
            "group": "rackproof.test",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "properties": { "size": { "type": "integer" } },
                    }},
                }},
            }],
        },
    });
    crds.create(&post, &from_json(crd)).await.unwrap();
    let clock = Clock::wall();
    let established = clock
        .timeout(Duration::from_secs(30), async {
            loop {
                let crd = crds.get("widgets.rackproof.test").await.unwrap();
                let conditions = crd
                    .status
                    .and_then(|status| status.conditions)
                    .unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    break;
                }
                clock.sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
    assert!(established.is_ok(), "the CRD never became Established");

    let resource = ApiResource {
        group: "rackproof.test".to_owned(),
        version: "v1".to_owned(),
        api_version: "rackproof.test/v1".to_owned(),
        kind: "Widget".to_owned(),
        plural: "widgets".to_owned(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "rackproof", &resource);
    let widget: DynamicObject = from_json(json!({
        "apiVersion": "rackproof.test/v1",
        "kind": "Widget",
        "metadata": { "name": "w1" },
        "spec": { "size": 3, "unknown": "pruned" },
    }));
    // The first custom-resource create is where an unpatched reflect2 crashes under Go ≥ 1.18.
    widgets.create(&post, &widget).await.unwrap();
    let stored = widgets.get("w1").await.unwrap();
    assert_eq!(
        stored.data["spec"],
        json!({ "size": 3 }),
        "the unknown field is pruned"
    );

    plane.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_node_identity_may_write_its_own_node_and_lease_only() {
    let plane = start(LocalOptions::default().with_nodes(["node-a", "node-b"])).await;
    let admin: Api<Node> = Api::all(plane.client());
    for name in ["node-a", "node-b"] {
        admin
            .create(
                &PostParams::default(),
                &from_json(json!({ "metadata": { "name": name } })),
            )
            .await
            .unwrap();
    }

    let node_a = plane.client_as(&User::node("node-a")).await.unwrap();
    let nodes: Api<Node> = Api::all(node_a.clone());
    let label = |value: &str| {
        Patch::Merge(json!({ "metadata": { "labels": { "rackproof.test/touched": value } } }))
    };
    nodes
        .patch("node-a", &PatchParams::default(), &label("yes"))
        .await
        .unwrap();
    let own = admin.get("node-a").await.unwrap();
    assert_eq!(
        own.metadata.labels.unwrap()["rackproof.test/touched"],
        "yes"
    );

    let other = nodes
        .patch("node-b", &PatchParams::default(), &label("no"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&other), Some(403), "{other}");
    let untouched = admin.get("node-b").await.unwrap();
    assert!(
        !untouched
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("rackproof.test/touched")
    );

    let leases: Api<Lease> = Api::namespaced(node_a, "kube-node-lease");
    let lease = |name: &str| -> Lease {
        from_json(json!({ "metadata": { "name": name }, "spec": { "holderIdentity": name } }))
    };
    leases
        .create(&PostParams::default(), &lease("node-a"))
        .await
        .unwrap();
    let foreign = leases
        .create(&PostParams::default(), &lease("node-b"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&foreign), Some(403), "{foreign}");

    let unknown = plane.kubeconfig(&User::node("node-c")).unwrap_err();
    assert!(matches!(unknown, Error::UnknownUser { .. }), "{unknown}");
    let admin_kubeconfig =
        std::fs::read_to_string(plane.kubeconfig(&User::Admin).unwrap()).unwrap();
    assert!(admin_kubeconfig.contains(plane.url()), "{admin_kubeconfig}");
}

#[tokio::test]
async fn a_node_reads_a_secret_only_when_the_node_authorizer_allows_it() {
    // The authorizer allows node-a one Secret; the Node authorizer alone would allow none.
    let authorizer = NodeAuthorizer::new(|access| async move {
        let wanted = (
            access.user.as_str(),
            access.resource.as_str(),
            access.namespace.as_str(),
            access.name.as_str(),
        );
        if wanted == ("system:node:node-a", "secrets", "lab", "osc-a")
            && matches!(access.verb.as_str(), "get" | "list" | "watch")
        {
            Decision::Allow
        } else {
            Decision::NoOpinion(format!("{} has no Machine naming this Secret", access.user))
        }
    });
    let options = LocalOptions {
        node_authorizer: Some(authorizer),
        ..LocalOptions::default().with_nodes(["node-a", "node-b"])
    };
    let plane = start(options).await;
    let namespaces: Api<Namespace> = Api::all(plane.client());
    namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": "lab" } })),
        )
        .await
        .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(plane.client(), "lab");
    for name in ["osc-a", "osc-b"] {
        secrets
            .create(
                &PostParams::default(),
                &from_json(json!({ "metadata": { "name": name }, "stringData": { "k": name } })),
            )
            .await
            .unwrap();
    }
    let as_node = |name: &'static str| {
        let plane = &plane;
        async move {
            let client = plane.client_as(&User::node(name)).await.unwrap();
            Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, "lab")
        }
    };
    let node_a = as_node("node-a").await;
    let read = node_a.get("osc-a").await.unwrap();
    assert!(read.data.unwrap_or_default().contains_key("k"));
    let by_name = ListParams::default().fields("metadata.name=osc-a");
    assert_eq!(node_a.list(&by_name).await.unwrap().items.len(), 1);

    let other_pool = node_a.get("osc-b").await.unwrap_err();
    assert_eq!(status_code(&other_pool), Some(403), "{other_pool}");
    assert!(
        other_pool
            .to_string()
            .contains("has no Machine naming this Secret"),
        "the webhook's reason reaches the caller: {other_pool}"
    );
    let all = node_a.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(status_code(&all), Some(403), "{all}");
    let node_b = as_node("node-b").await;
    let foreign = node_b.get("osc-a").await.unwrap_err();
    assert_eq!(status_code(&foreign), Some(403), "{foreign}");
}

#[tokio::test]
async fn drop_kills_both_processes_and_removes_the_directory() {
    let plane = start(LocalOptions::default()).await;
    let pids = plane.pids();
    let dir = plane.dir().to_owned();
    assert!(process_exists(pids.etcd) && process_exists(pids.kube_apiserver));
    assert!(dir.join("kube-apiserver.log").exists());

    drop(plane);
    assert!(
        !process_exists(pids.etcd),
        "etcd (pid {}) survived the drop",
        pids.etcd
    );
    assert!(
        !process_exists(pids.kube_apiserver),
        "kube-apiserver (pid {}) survived the drop",
        pids.kube_apiserver
    );
    assert!(!dir.exists(), "{} survived the drop", dir.display());
}

#[tokio::test]
async fn shutdown_kills_both_processes_and_removes_the_directory() {
    let plane = start(LocalOptions::default()).await;
    let pids = plane.pids();
    let dir = plane.dir().to_owned();

    plane.shutdown().await.unwrap();
    assert!(
        !process_exists(pids.etcd),
        "etcd (pid {}) survived shutdown",
        pids.etcd
    );
    assert!(
        !process_exists(pids.kube_apiserver),
        "kube-apiserver (pid {}) survived shutdown",
        pids.kube_apiserver
    );
    assert!(!dir.exists(), "{} survived shutdown", dir.display());
}

#[tokio::test]
async fn a_failed_startup_keeps_the_logs_and_names_them() {
    let options = LocalOptions {
        extra_apiserver_args: vec!["--no-such-flag".to_owned()],
        ..LocalOptions::default()
    };
    let error = LocalControlPlane::start(options).await.unwrap_err();
    let Error::Exited { program, log, .. } = &error else {
        panic!("expected kube-apiserver to exit, got: {}", report(&error));
    };
    assert_eq!(*program, "kube-apiserver");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains("no-such-flag"), "{text}");
    let dir = log.parent().unwrap();
    assert!(dir.join("etcd.log").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn an_invalid_node_name_is_an_error() {
    let error = LocalControlPlane::start(LocalOptions::default().with_nodes(["Bad,Name"]))
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidNodeName(_)),
        "{}",
        report(&error)
    );
}

#[tokio::test]
async fn a_missing_kube_apiserver_names_the_install_command() {
    let options = LocalOptions {
        kube_apiserver: Some("/nonexistent/kube-apiserver".into()),
        ..LocalOptions::default()
    };
    let error = LocalControlPlane::start(options).await.unwrap_err();
    assert!(
        matches!(error, Error::KubeApiserverNotFound { .. }),
        "{}",
        report(&error)
    );
    assert!(
        error.to_string().contains("ci/install-local-control-plane"),
        "{error}"
    );
}

// --- kube-controller-manager -------------------------------------------------------------------

/// How long a node may go unrenewed before the controller manager marks it.
const GRACE: Duration = Duration::from_secs(3);
/// How long any controller-manager outcome is waited for.
const OUTCOME_DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

fn with_controller_manager() -> LocalOptions {
    LocalOptions::default().with_controller_manager(ControllerManagerOptions {
        node_monitor_period: Duration::from_millis(500),
        node_monitor_grace_period: GRACE,
        node_startup_grace_period: GRACE * 2,
        pod_eviction_timeout: Duration::from_secs(10),
        ..ControllerManagerOptions::default()
    })
}

/// Polls `probe` until it returns `Some`, failing the test with `what` after `deadline`.
async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let clock = Clock::wall();
    let outcome = clock
        .timeout(deadline, async {
            loop {
                if let Some(value) = probe().await {
                    return value;
                }
                clock.sleep(POLL).await;
            }
        })
        .await;
    outcome.unwrap_or_else(|_| panic!("{what}: not seen within {deadline:?}"))
}

/// Now as a Lease's `renewTime` (microseconds) and as a condition's timestamp (seconds).
fn micro_time_now() -> serde_json::Value {
    serde_json::to_value(MicroTime(Clock::wall().now())).unwrap()
}

fn time_now() -> serde_json::Value {
    serde_json::to_value(Time(Clock::wall().now())).unwrap()
}

/// A Node that posted `Ready=True`, and its Lease, renewed now.
async fn create_ready_node_with_lease(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": name } })),
        )
        .await
        .unwrap();
    let ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": time_now(), "lastTransitionTime": time_now(),
    }]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(ready))
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = json!({
        "metadata": { "name": name },
        "spec": { "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro_time_now() },
    });
    leases
        .create(&PostParams::default(), &from_json(lease))
        .await
        .unwrap();
}

/// Renews the Lease of `name` every 300 ms until aborted.
fn keep_renewing(client: &kube::Client, name: &str) -> tokio::task::JoinHandle<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let name = name.to_owned();
    tokio::spawn(async move {
        let clock = Clock::wall();
        loop {
            let renew = json!({ "spec": { "renewTime": micro_time_now() } });
            leases
                .patch(&name, &PatchParams::default(), &Patch::Merge(renew))
                .await
                .unwrap();
            clock.sleep(Duration::from_millis(300)).await;
        }
    })
}

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
        .map(|condition| condition.status.clone())
}

fn taints(node: &Node) -> Vec<(String, String)> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|taint| (taint.key, taint.effect))
        .collect()
}

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Waits until `name` is `Ready=Unknown` with the unreachable `NoExecute` taint.
async fn wait_until_marked_unreachable(nodes: &Api<Node>, name: &str) -> Node {
    wait_for(
        &format!("node {name} Ready=Unknown with the {UNREACHABLE}:NoExecute taint"),
        OUTCOME_DEADLINE,
        || async {
            let node = nodes.get(name).await.unwrap();
            let marked = ready_status(&node).as_deref() == Some("Unknown")
                && taints(&node).contains(&(UNREACHABLE.to_owned(), "NoExecute".to_owned()));
            marked.then_some(node)
        },
    )
    .await
}

#[tokio::test]
async fn a_node_whose_lease_lapses_goes_unknown_and_unreachable_while_a_renewing_one_stays_ready() {
    let plane = start(with_controller_manager()).await;
    let client = plane.client();
    create_ready_node_with_lease(&client, "renewing").await;
    create_ready_node_with_lease(&client, "lapsing").await;
    let renewer = keep_renewing(&client, "renewing");

    let nodes: Api<Node> = Api::all(client.clone());
    let lapsed = wait_until_marked_unreachable(&nodes, "lapsing").await;
    assert!(
        taints(&lapsed).contains(&(UNREACHABLE.to_owned(), "NoSchedule".to_owned())),
        "{:?}",
        taints(&lapsed)
    );

    // More than a grace period has passed for both nodes by now; the renewing one stays Ready.
    let renewing = nodes.get("renewing").await.unwrap();
    assert_eq!(ready_status(&renewing).as_deref(), Some("True"));
    assert_eq!(taints(&renewing), Vec::new());
    renewer.abort();
    plane.shutdown().await.unwrap();
}

/// Creates `pod`, retrying while the namespace's `default` ServiceAccount or its token is not
/// there yet (the `ServiceAccount` admission plugin refuses the pod until then).
async fn create_pod(pods: &Api<Pod>, pod: serde_json::Value) -> Pod {
    let pod: Pod = from_json(pod);
    wait_for(
        "the pod admitted with the namespace's default ServiceAccount",
        OUTCOME_DEADLINE,
        || async {
            match pods.create(&PostParams::default(), &pod).await {
                Ok(created) => Some(created),
                // Forbidden while the account is missing, ServerTimeout while its token is.
                Err(kube::Error::Api(status))
                    if matches!(status.reason.as_str(), "Forbidden" | "ServerTimeout")
                        && status.message.contains("service account") =>
                {
                    None
                }
                Err(error) => panic!("creating a pod failed: {error}"),
            }
        },
    )
    .await
}

async fn mark_pod_ready(pods: &Api<Pod>, name: &str) {
    let running = json!({ "status": {
        "phase": "Running",
        "conditions": [{ "type": "Ready", "status": "True" }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(running))
        .await
        .unwrap();
}

fn pdb_resource() -> ApiResource {
    // kube-apiserver 1.20 serves PodDisruptionBudgets in policy/v1beta1 only.
    ApiResource {
        group: "policy".to_owned(),
        version: "v1beta1".to_owned(),
        api_version: "policy/v1beta1".to_owned(),
        kind: "PodDisruptionBudget".to_owned(),
        plural: "poddisruptionbudgets".to_owned(),
    }
}

/// `(currentHealthy, desiredHealthy, disruptionsAllowed, expectedPods)` once the status has them.
fn pdb_counts(pdb: &DynamicObject) -> Option<(i64, i64, i64, i64)> {
    let status = pdb.data.get("status")?;
    let count = |field: &str| status.get(field).and_then(serde_json::Value::as_i64);
    Some((
        count("currentHealthy")?,
        count("desiredHealthy")?,
        count("disruptionsAllowed").unwrap_or(0),
        count("expectedPods")?,
    ))
}

#[tokio::test]
async fn a_pod_disruption_budget_gets_its_status_from_the_matching_pods() {
    let plane = start(with_controller_manager()).await;
    let client = plane.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": "budget" } })),
        )
        .await
        .unwrap();
    let pdbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "budget", &pdb_resource());
    let pdb: DynamicObject = from_json(json!({
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": { "name": "web" },
        "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "web" } } },
    }));
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "budget");
    for (name, app) in [
        ("web-0", "web"),
        ("web-1", "web"),
        ("web-2", "web"),
        ("db-0", "db"),
    ] {
        let pod = create_pod(
            &pods,
            json!({
                "metadata": { "name": name, "labels": { "app": app } },
                "spec": { "containers": [{ "name": "app", "image": "busybox" }] },
            }),
        )
        .await;
        // Admitted by the ServiceAccount plugin: the controller manager made the account's token.
        let spec = pod.spec.unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some("default"));
        assert!(
            spec.volumes
                .unwrap_or_default()
                .iter()
                .any(|volume| volume.name.starts_with("default-token-")),
            "{name} has no service-account token volume"
        );
    }
    for name in ["web-0", "web-1", "db-0"] {
        mark_pod_ready(&pods, name).await;
    }

    let counts = |expected: (i64, i64, i64, i64)| {
        let pdbs = pdbs.clone();
        async move {
            wait_for(
                &format!("PDB status (current, desired, allowed, expected) = {expected:?}"),
                OUTCOME_DEADLINE,
                || async {
                    (pdb_counts(&pdbs.get("web").await.unwrap()) == Some(expected)).then_some(())
                },
            )
            .await;
        }
    };
    counts((2, 2, 0, 3)).await;
    mark_pod_ready(&pods, "web-2").await;
    counts((3, 2, 1, 3)).await;
    plane.shutdown().await.unwrap();
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_dependents_only() {
    let plane = start(with_controller_manager()).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(plane.client(), "default");
    let post = PostParams::default();
    let owner = configmaps
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "owner" } })),
        )
        .await
        .unwrap();
    let owner_ref = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid.unwrap(),
    }]);
    for name in ["dependent-1", "dependent-2"] {
        configmaps
            .create(
                &post,
                &from_json(json!({ "metadata": { "name": name, "ownerReferences": owner_ref } })),
            )
            .await
            .unwrap();
    }
    configmaps
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "bystander" } })),
        )
        .await
        .unwrap();

    configmaps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    wait_for(
        "both dependents garbage-collected",
        OUTCOME_DEADLINE,
        || async {
            let left = configmaps.list(&ListParams::default()).await.unwrap();
            let names: Vec<String> = left
                .items
                .into_iter()
                .filter_map(|configmap| configmap.metadata.name)
                .filter(|name| name.starts_with("dependent-"))
                .collect();
            names.is_empty().then_some(())
        },
    )
    .await;
    assert!(configmaps.get("bystander").await.is_ok());
    plane.shutdown().await.unwrap();
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_objects_and_then_the_namespace() {
    let plane = start(with_controller_manager()).await;
    let client = plane.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let post = PostParams::default();
    namespaces
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "doomed" } })),
        )
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    configmaps
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "content" } })),
        )
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "doomed");
    leases
        .create(
            &post,
            &from_json(json!({ "metadata": { "name": "content" }, "spec": {} })),
        )
        .await
        .unwrap();

    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("namespace doomed gone", OUTCOME_DEADLINE, || async {
        match namespaces.get("doomed").await {
            Err(error) if status_code(&error) == Some(404) => Some(()),
            Ok(_) => None,
            Err(error) => panic!("reading namespace doomed failed: {error}"),
        }
    })
    .await;
    let configmap = configmaps.get("content").await.unwrap_err();
    assert_eq!(status_code(&configmap), Some(404), "{configmap}");
    let lease = leases.get("content").await.unwrap_err();
    assert_eq!(status_code(&lease), Some(404), "{lease}");

    let pids = plane.pids();
    let manager = pids
        .kube_controller_manager
        .expect("the controller manager runs");
    assert!(plane.dir().join("kube-controller-manager.log").exists());
    drop(plane);
    for (program, pid) in [
        ("etcd", pids.etcd),
        ("kube-apiserver", pids.kube_apiserver),
        ("kube-controller-manager", manager),
    ] {
        assert!(
            !process_exists(pid),
            "{program} (pid {pid}) survived the drop"
        );
    }
}

#[tokio::test]
async fn a_stopped_controller_manager_marks_nothing_and_a_restarted_one_resumes() {
    let mut plane = start(with_controller_manager()).await;
    let client = plane.client();
    let first = plane
        .pids()
        .kube_controller_manager
        .expect("the controller manager runs");
    assert!(process_exists(first));
    plane.start_controller_manager().await.unwrap();
    assert_eq!(
        plane.pids().kube_controller_manager,
        Some(first),
        "starting a running controller manager starts nothing"
    );

    plane.stop_controller_manager().await.unwrap();
    assert!(
        !process_exists(first),
        "kube-controller-manager (pid {first}) survived its stop"
    );
    assert_eq!(plane.pids().kube_controller_manager, None);
    assert_eq!(plane.controller_manager_url(), None);
    plane.stop_controller_manager().await.unwrap();

    // The API server keeps serving; a node's lease lapses with nobody watching. A renewing node
    // keeps the zone from looking wholly down (then the controller withholds NoExecute taints).
    create_ready_node_with_lease(&client, "renewing").await;
    create_ready_node_with_lease(&client, "lapsing").await;
    let renewer = keep_renewing(&client, "renewing");
    let nodes: Api<Node> = Api::all(client.clone());
    let window = GRACE * 2 + Duration::from_secs(2);
    let clock = Clock::wall();
    let watched = clock
        .timeout(window, async {
            loop {
                let node = nodes.get("lapsing").await.unwrap();
                assert_eq!(ready_status(&node).as_deref(), Some("True"));
                // kube-apiserver's TaintNodesByCondition admission adds `not-ready:NoSchedule`
                // on create; only the controller manager would add `unreachable`.
                assert!(
                    !taints(&node).iter().any(|(key, _)| key == UNREACHABLE),
                    "{:?}",
                    taints(&node)
                );
                clock.sleep(POLL).await;
            }
        })
        .await;
    assert!(
        watched.is_err(),
        "the observation window ends by its deadline"
    );

    plane.start_controller_manager().await.unwrap();
    let second = plane
        .pids()
        .kube_controller_manager
        .expect("the controller manager runs again");
    assert_ne!(second, first);
    assert!(plane.controller_manager_url().is_some());
    wait_until_marked_unreachable(&nodes, "lapsing").await;
    renewer.abort();

    let pids = plane.pids();
    plane.shutdown().await.unwrap();
    for (program, pid) in [
        ("etcd", pids.etcd),
        ("kube-apiserver", pids.kube_apiserver),
        ("kube-controller-manager", second),
    ] {
        assert!(
            !process_exists(pid),
            "{program} (pid {pid}) survived shutdown"
        );
    }
}

/// PIDs of processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(needle)
                .then_some(pid)
        })
        .collect()
}

#[tokio::test]
async fn a_controller_manager_that_fails_to_start_takes_the_control_plane_down_with_it() {
    let mut options = with_controller_manager();
    if let Some(manager) = options.controller_manager.as_mut() {
        manager.extra_args.push("--no-such-flag".to_owned());
    }
    let error = LocalControlPlane::start(options).await.unwrap_err();
    let Error::Exited { program, log, .. } = &error else {
        panic!(
            "expected kube-controller-manager to exit, got: {}",
            report(&error)
        );
    };
    assert_eq!(*program, "kube-controller-manager");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains("no-such-flag"), "{text}");
    let dir = log.parent().unwrap();
    assert_eq!(
        processes_mentioning(&dir.display().to_string()),
        Vec::<u32>::new(),
        "processes of the failed control plane survived"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_missing_kube_controller_manager_names_the_install_command() {
    let options = LocalOptions::default().with_controller_manager(ControllerManagerOptions {
        binary: Some("/nonexistent/kube-controller-manager".into()),
        ..ControllerManagerOptions::default()
    });
    let error = LocalControlPlane::start(options).await.unwrap_err();
    assert!(
        matches!(error, Error::KubeControllerManagerNotFound { .. }),
        "{}",
        report(&error)
    );
    assert!(
        error.to_string().contains("ci/install-local-control-plane"),
        "{error}"
    );
}
