//! Merge, JSON, strategic merge patches and server-side apply.

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{create_pod, raw, server};

#[tokio::test(start_paused = true)]
async fn merge_json_and_strategic_patches() {
    let server = server();
    let client = server.admin_client();
    create_pod(&client, "p", json!({"a": "1", "b": "2"}), Some("n1")).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let params = PatchParams::default();
    let merged = pods
        .patch(
            "p",
            &params,
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "c": "3"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged
            .metadata
            .labels
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        vec![
            ("b".to_owned(), "2".to_owned()),
            ("c".to_owned(), "3".to_owned())
        ]
    );

    let path = "/api/v1/namespaces/default/pods/p";
    let ops = json!([{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}])
        .to_string()
        .into_bytes();
    let (status, jsoned) = raw(&client, "PATCH", path, "application/json-patch+json", ops).await;
    assert_eq!(
        (status, &jsoned["metadata"]["annotations"]["x"]),
        (200, &json!("y"))
    );
    let failing = json!([{"op": "test", "path": "/metadata/name", "value": "other"}])
        .to_string()
        .into_bytes();
    assert_eq!(
        raw(
            &client,
            "PATCH",
            path,
            "application/json-patch+json",
            failing
        )
        .await
        .0,
        422
    );

    let strategic = pods
        .patch("p", &params, &Patch::Strategic(json!({"spec": {"containers": [{"name": "side", "image": "s:1"}, {"name": "main", "image": "busybox:2"}]}})))
        .await
        .unwrap();
    let containers: Vec<(String, String)> = strategic
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| (c.name, c.image.unwrap()))
        .collect();
    assert_eq!(
        containers,
        vec![
            ("side".into(), "s:1".into()),
            ("main".into(), "busybox:2".into())
        ],
        "the patch's order, as kube's strategic merge"
    );

    let status = pods
        .patch_status("p", &params, &Patch::Strategic(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]}})))
        .await
        .unwrap();
    assert_eq!(
        status
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .len(),
        2
    );
    let status = pods
        .patch_status(
            "p",
            &params,
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    let conditions: Vec<(String, String)> = status
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        vec![
            ("Ready".into(), "False".into()),
            ("Initialized".into(), "True".into())
        ]
    );

    let nodes: Api<Node> = Api::all(client.clone());
    nodes.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})).unwrap()).await.unwrap();
    let node = nodes.patch("n1", &params, &Patch::Strategic(json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "unschedulable": true}}))).await.unwrap();
    let taints: Vec<String> = node
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(
        taints,
        vec!["b"],
        "taints are an atomic list, as in Kubernetes"
    );

    let (status, body) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/strategic-merge-patch+json",
        b"[1,2]".to_vec(),
    )
    .await;
    assert_eq!((status, body["reason"].as_str()), (400, Some("BadRequest")));
    let (status, _) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(status, 415);
    let (status, _) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/nope",
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(start_paused = true)]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let server = server();
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let config = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data});
    let created = maps
        .patch(
            "cm",
            &PatchParams::apply("alice"),
            &Patch::Apply(config(json!({"a": "1", "b": "2"}))),
        )
        .await
        .unwrap();
    let managed = created.metadata.managed_fields.unwrap();
    assert_eq!(
        (
            managed[0].manager.as_deref(),
            managed[0].operation.as_deref()
        ),
        (Some("alice"), Some("Apply"))
    );
    assert_eq!(
        managed[0].time.as_ref().unwrap().0.to_string(),
        crate::EPOCH
    );

    let error = maps
        .patch(
            "cm",
            &PatchParams::apply("bob"),
            &Patch::Apply(config(json!({"a": "changed"}))),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected a conflict")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("conflict with \"alice\"") && status.message.contains(".data.a"),
        "{}",
        status.message
    );

    let same = maps
        .patch(
            "cm",
            &PatchParams::apply("bob"),
            &Patch::Apply(config(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        same.data.as_ref().unwrap()["a"],
        "1",
        "applying an equal value shares ownership"
    );
    let forced = maps
        .patch(
            "cm",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(config(json!({"a": "bob"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "bob");
    // alice drops `b` from her configuration: nobody else owns it, so it goes.
    let after = maps
        .patch(
            "cm",
            &PatchParams::apply("alice"),
            &Patch::Apply(config(json!({}))),
        )
        .await
        .unwrap();
    assert_eq!(
        after.data.unwrap().into_iter().collect::<Vec<_>>(),
        vec![("a".to_owned(), "bob".to_owned())]
    );

    // An Update by another manager then conflicts with bob's apply.
    maps.patch(
        "cm",
        &PatchParams {
            field_manager: Some("carol".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"data": {"a": "carol"}})),
    )
    .await
    .unwrap();
    let error = maps
        .patch(
            "cm",
            &PatchParams::apply("bob"),
            &Patch::Apply(config(json!({"a": "bob"}))),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, kube::Error::Api(ref s) if s.code == 409 && s.message.contains("conflict with \"carol\" using v1")),
        "{error:?}"
    );
    let (status, _) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        "application/apply-patch+yaml",
        b"data: {}".to_vec(),
    )
    .await;
    assert_eq!(
        status, 422,
        "apply needs a fieldManager (422 Invalid on PatchOptions, as kube-apiserver)"
    );
}
