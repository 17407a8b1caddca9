//! kube-controller-manager's controllers (node lifecycle, disruption, garbage collector,
//! namespace), and stopping and starting it.

use rackproof_test_support::processes::processes_mentioning;

use crate::support::*;

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
            error_chain(&error)
        );
    };
    assert_eq!(*program, "kube-controller-manager");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains("no-such-flag"), "{text}");
    let dir = log.parent().unwrap();
    let left = processes_mentioning(&dir.display().to_string());
    assert!(
        left.is_empty(),
        "processes of the failed control plane survived: {left:?}"
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
        error_chain(&error)
    );
    assert!(
        error.to_string().contains("ci/install-local-control-plane"),
        "{error}"
    );
}
