//! Graceful pod deletion, finalizers, propagation policies, garbage collection, namespaces.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{code, create_pod, server};

#[tokio::test(start_paused = true)]
async fn bound_pods_stay_terminating_until_their_kubelet_confirms() {
    let server = server();
    let client = server.admin_client();
    create_pod(&client, "bound", json!({}), Some("n1")).await;
    create_pod(&client, "unbound", json!({}), None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        code(pods.get("unbound").await).0,
        404,
        "an unbound pod goes at once"
    );

    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = pods.get("bound").await.unwrap();
    assert_eq!(
        terminating
            .metadata
            .deletion_timestamp
            .unwrap()
            .0
            .to_string(),
        "2025-01-01T00:00:30Z"
    );
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
    assert!(
        pods.get("bound").await.is_ok(),
        "no kubelet confirmed: still terminating"
    );
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(code(pods.get("bound").await).0, 404);
}

#[tokio::test(start_paused = true)]
async fn finalizers_hold_deletion_until_removed() {
    let server = server();
    let maps: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "cm", "finalizers": ["example.com/hold"]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    maps.delete("cm", &DeleteParams::default()).await.unwrap();
    let held = maps.get("cm").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let error = maps
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "new"]}})),
        )
        .await;
    assert_eq!(code(error).0, 422, "no new finalizers while deleting");
    maps.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(maps.get("cm").await).0, 404);
}

async fn owner_with_pods(client: &kube::Client) -> DaemonSet {
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "ds"}},
        "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}))
    .unwrap();
    let ds = sets.create(&PostParams::default(), &ds).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["ds-a", "ds-b"] {
        let mut pod = crate::pod_json(name, json!({"app": "ds"}), None);
        pod.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds",
            "uid": ds.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true})).unwrap()]);
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    ds
}

#[tokio::test(start_paused = true)]
async fn propagation_policies_and_garbage_collection() {
    let server = server();
    let client = server.admin_client();
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let count = || async {
        pods.list(&ListParams::default().labels("app=ds"))
            .await
            .unwrap()
            .items
            .len()
    };

    owner_with_pods(&client).await;
    sets.delete("ds", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(count().await, 0, "background: dependents collected");

    owner_with_pods(&client).await;
    sets.delete("ds", &DeleteParams::orphan()).await.unwrap();
    assert_eq!(code(sets.get("ds").await).0, 404);
    let orphans = pods
        .list(&ListParams::default().labels("app=ds"))
        .await
        .unwrap();
    assert_eq!(orphans.items.len(), 2);
    assert!(orphans.items.iter().all(|p| {
        p.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    }));
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=ds"),
    )
    .await
    .unwrap();
    assert_eq!(count().await, 0, "deletecollection");

    owner_with_pods(&client).await;
    let mut bound = pods.get("ds-a").await.unwrap();
    bound.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.replace("ds-a", &PostParams::default(), &bound)
        .await
        .unwrap();
    sets.delete("ds", &DeleteParams::foreground())
        .await
        .unwrap();
    let waiting = sets.get("ds").await.unwrap();
    assert!(
        waiting
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_owned()),
        "the owner waits for its dependents"
    );
    assert_eq!(code(pods.get("ds-b").await).0, 404);
    pods.patch(
        "ds-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        code(sets.get("ds").await).0,
        404,
        "the owner goes after its last dependent"
    );
}

#[tokio::test(start_paused = true)]
async fn deleting_a_namespace_removes_its_content() {
    let server = server();
    let client = server.admin_client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cm"}})).unwrap(),
    )
    .await
    .unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(namespaces.get("team").await).0, 404);
    assert_eq!(code(maps.get("cm").await).0, 404);
    assert_eq!(
        code(namespaces.delete("default", &DeleteParams::default()).await).0,
        403
    );
}
