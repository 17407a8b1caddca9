//! Create, get, list (selectors, pagination), update (conflicts, generation, status).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::{EPOCH, code, create_pod, server};

#[tokio::test(start_paused = true)]
async fn create_sets_metadata_from_the_clock_and_generate_name() {
    let server = server();
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    tokio::time::sleep(std::time::Duration::from_secs(90)).await;
    let mut pod = crate::pod_json("", json!({}), None);
    pod.metadata.name = None;
    pod.metadata.generate_name = Some("web-".into());
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.metadata.creation_timestamp.unwrap().0.to_string(),
        "2025-01-01T00:01:30Z"
    );
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let fetched = pods.get(&name).await.unwrap();
    assert_eq!(
        fetched.metadata.resource_version,
        created.metadata.resource_version
    );
    let _ = EPOCH;
}

#[tokio::test(start_paused = true)]
async fn create_errors_have_kubernetes_codes() {
    let server = server();
    let client = server.admin_client();
    create_pod(&client, "a", json!({}), None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        code(
            pods.create(
                &PostParams::default(),
                &crate::pod_json("a", json!({}), None)
            )
            .await
        ),
        (409, "AlreadyExists".into())
    );
    assert_eq!(
        code(
            pods.create(
                &PostParams::default(),
                &crate::pod_json("Bad_Name", json!({}), None)
            )
            .await
        ),
        (422, "Invalid".into())
    );
    let mut no_containers = crate::pod_json("b", json!({}), None);
    no_containers.spec.as_mut().unwrap().containers.clear();
    assert_eq!(
        code(pods.create(&PostParams::default(), &no_containers).await).0,
        422
    );
    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "missing");
    assert_eq!(
        code(
            elsewhere
                .create(
                    &PostParams::default(),
                    &crate::pod_json("c", json!({}), None)
                )
                .await
        ),
        (404, "NotFound".into())
    );
    assert_eq!(code(pods.get("nope").await), (404, "NotFound".into()));
}

#[tokio::test(start_paused = true)]
async fn list_filters_with_every_selector_operator_and_paginates() {
    let server = server();
    let client = server.admin_client();
    create_pod(
        &client,
        "a",
        json!({"app": "web", "tier": "front"}),
        Some("n1"),
    )
    .await;
    create_pod(&client, "b", json!({"app": "web"}), Some("n2")).await;
    create_pod(&client, "c", json!({"app": "db"}), None).await;
    create_pod(&client, "d", json!({}), None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let names = |list: kube::api::ObjectList<Pod>| {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    for (selector, expected) in [
        ("app=web", vec!["a", "b"]),
        ("app==db", vec!["c"]),
        ("app!=web", vec!["c", "d"]),
        ("app in (db,web),tier", vec!["a"]),
        ("app notin (web)", vec!["c", "d"]),
        ("app", vec!["a", "b", "c"]),
        ("!app", vec!["d"]),
    ] {
        assert_eq!(
            names(
                pods.list(&ListParams::default().labels(selector))
                    .await
                    .unwrap()
            ),
            expected,
            "{selector}"
        );
    }
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        vec!["a"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName="))
                .await
                .unwrap()
        ),
        vec!["c", "d"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("status.phase=Pending,metadata.name!=a"))
                .await
                .unwrap()
        ),
        vec!["b", "c", "d"]
    );
    assert_eq!(
        code(
            pods.list(&ListParams::default().fields("spec.image=x"))
                .await
        ),
        (400, "BadRequest".into())
    );
    assert_eq!(
        code(pods.list(&ListParams::default().labels("app in web")).await),
        (400, "BadRequest".into())
    );

    let first = pods.list(&ListParams::default().limit(3)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    assert_eq!(first.metadata.remaining_item_count, Some(1));
    assert_eq!(names(first), vec!["a", "b", "c"]);
    let second = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert!(second.metadata.continue_.is_none());
    assert_eq!(names(second), vec!["d"]);
    assert_eq!(
        code(
            pods.list(&ListParams::default().continue_token("garbage"))
                .await
        )
        .0,
        400
    );

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "n2"}, "spec": {"unschedulable": true}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let unschedulable = nodes
        .list(&ListParams::default().fields("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(unschedulable.items.len(), 1);
    assert_eq!(
        nodes
            .list(&ListParams::default().fields("spec.unschedulable=false"))
            .await
            .unwrap()
            .items[0]
            .metadata
            .name
            .as_deref(),
        Some("n1")
    );
    let all: Api<Pod> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.namespace=default"))
            .await
            .unwrap()
            .items
            .len(),
        4
    );
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn updates_check_resource_versions_and_bump_generation_on_spec_changes_only() {
    let server = server();
    let client = server.admin_client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let created = deployments
        .create(&PostParams::default(), &deployment("d", 1))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
    let labelled = deployments
        .replace("d", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    assert_eq!(
        code(
            deployments
                .replace("d", &PostParams::default(), &created)
                .await
        ),
        (409, "Conflict".into())
    );
    let mut scaled = labelled.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(3);
    scaled.status = Some(serde_json::from_value(json!({"replicas": 7})).unwrap());
    let scaled = deployments
        .replace("d", &PostParams::default(), &scaled)
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    assert_eq!(
        scaled.status.as_ref().and_then(|s| s.replicas),
        None,
        "the main resource ignores status"
    );
    let mut with_status = scaled.clone();
    with_status.status =
        Some(serde_json::from_value(json!({"replicas": 3, "readyReplicas": 3})).unwrap());
    with_status.spec.as_mut().unwrap().replicas = Some(10);
    let updated = deployments
        .replace_status("d", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(updated.status.unwrap().ready_replicas, Some(3));
    assert_eq!(
        updated.spec.unwrap().replicas,
        Some(3),
        "a status write leaves spec alone"
    );
    assert_eq!(updated.metadata.generation, Some(2));
    let unchanged = deployments
        .replace(
            "d",
            &PostParams::default(),
            &deployments.get("d").await.unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        unchanged.metadata.resource_version, updated.metadata.resource_version,
        "a no-op update writes nothing"
    );

    let scale = deployments.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=d"));
    let patched = deployments
        .patch_scale(
            "d",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.spec.unwrap().replicas,
        None,
        "zero replicas are omitted from a Scale (omitempty)"
    );
    assert_eq!(
        deployments.get("d").await.unwrap().spec.unwrap().replicas,
        Some(0)
    );
}

#[tokio::test(start_paused = true)]
async fn secrets_encode_string_data() {
    let server = server();
    let secrets: Api<Secret> = Api::namespaced(server.admin_client(), "default");
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "hello"}}))
            .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.data.unwrap()["k"].0, b"hello");
    assert!(created.string_data.is_none());
}

#[tokio::test(start_paused = true)]
async fn lists_of_the_pods_on_a_node_follow_binding_deletion_namespaces_and_pages() {
    let server = server();
    let client = server.admin_client();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let other: Api<Pod> = Api::namespaced(client.clone(), "other");
    let all: Api<Pod> = Api::all(client.clone());
    for (name, node) in [
        ("a", Some("n1")),
        ("b", Some("n2")),
        ("c", Some("n1")),
        ("d", None),
        ("e", Some("n1")),
    ] {
        create_pod(&client, name, json!({}), node).await;
    }
    other
        .create(
            &PostParams::default(),
            &crate::pod_json("x", json!({}), Some("n1")),
        )
        .await
        .unwrap();
    let names = |list: kube::api::ObjectList<Pod>| {
        list.items
            .into_iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.unwrap(),
                    p.metadata.name.unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let on_n1 = ListParams::default().fields("spec.nodeName=n1");
    assert_eq!(
        names(pods.list(&on_n1).await.unwrap()),
        ["default/a", "default/c", "default/e"]
    );
    assert_eq!(
        names(all.list(&on_n1).await.unwrap()),
        ["default/a", "default/c", "default/e", "other/x"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("spec.nodeName=n1,metadata.namespace!=default"))
                .await
                .unwrap()
        ),
        ["other/x"]
    );
    assert!(
        pods.list(&ListParams::default().fields("spec.nodeName=n9"))
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Pages of two, continued across namespaces.
    let first = all.list(&on_n1.clone().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    assert_eq!(names(first), ["default/a", "default/c"]);
    assert_eq!(
        names(
            all.list(&on_n1.clone().limit(2).continue_token(&token))
                .await
                .unwrap()
        ),
        ["default/e", "other/x"]
    );

    // Deleted pods leave the node's list; a pod bound later joins it.
    pods.delete("c", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let d = pods.get("d").await.unwrap();
    let mut bound = d.clone();
    bound.spec.as_mut().unwrap().node_name = Some("n1".to_owned());
    pods.replace("d", &PostParams::default(), &bound)
        .await
        .unwrap();
    assert_eq!(
        names(pods.list(&on_n1).await.unwrap()),
        ["default/a", "default/d", "default/e"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName="))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );
}
