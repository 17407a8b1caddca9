//! etcd and kube-apiserver: what they serve, how node identities are confined, and how the
//! control plane starts, fails and stops.

use crate::support::*;

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
        panic!(
            "expected kube-apiserver to exit, got: {}",
            error_chain(&error)
        );
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
        error_chain(&error)
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
        error_chain(&error)
    );
    assert!(
        error.to_string().contains("ci/install-local-control-plane"),
        "{error}"
    );
}
