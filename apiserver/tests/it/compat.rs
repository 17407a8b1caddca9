//! Behaviour matched to kube-apiserver by the differential suite (`rackproof-cluster`), checked
//! here without a real control plane: delete answers, validation causes, apply conflicts,
//! admission defaults, status-subresource metadata, omitted empty fields, watch events when the
//! last finalizer goes.

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use crate::{create_pod, raw, server};

const JSON: &str = "application/json";

#[tokio::test(start_paused = true)]
async fn deletes_answer_status_or_the_object_as_kube_apiserver() {
    let server = server();
    let client = server.admin_client();
    let cm = json!({"metadata": {"name": "cm"}}).to_string().into_bytes();
    assert_eq!(
        raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            JSON,
            cm
        )
        .await
        .0,
        201
    );
    let (code, body) = raw(
        &client,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/cm",
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (body["kind"].as_str(), body["status"].as_str()),
        (Some("Status"), Some("Success")),
        "{body}"
    );
    assert_eq!(body["details"]["name"], "cm");
    assert_eq!(body["details"]["kind"], "configmaps");
    assert!(
        body["details"].get("group").is_none(),
        "the core group is left out: {body}"
    );
    assert!(body["details"]["uid"].is_string());

    // Pods answer the deleted pod, stamped as deleted now with grace period 0.
    create_pod(&client, "unbound", json!({}), None).await;
    let (code, body) = raw(
        &client,
        "DELETE",
        "/api/v1/namespaces/default/pods/unbound",
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "Pod", "{body}");
    assert_eq!(body["metadata"]["deletionTimestamp"], crate::EPOCH);
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 0);

    // An object held by a finalizer answers itself.
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
        .to_string()
        .into_bytes();
    raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        held,
    )
    .await;
    let (_, body) = raw(
        &client,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/held",
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(body["kind"], "ConfigMap", "{body}");
}

fn cause_reasons(body: &Value) -> Vec<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| {
                    (
                        c["reason"].as_str().unwrap_or_default().to_owned(),
                        c["field"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn invalid_objects_get_kube_apiservers_causes() {
    let server = server();
    let client = server.admin_client();
    for labels in [
        json!({"bad key!": "v"}),
        json!({"a/b/c": "v"}),
        json!({"-x": "v"}),
        json!({"ok": "bad value!"}),
        json!({"ok": "x".repeat(64)}),
    ] {
        let node = json!({"metadata": {"name": "n", "labels": labels}})
            .to_string()
            .into_bytes();
        let (code, body) = raw(&client, "POST", "/api/v1/nodes", JSON, node).await;
        assert_eq!(code, 422, "{labels}: {body}");
        assert_eq!(
            cause_reasons(&body),
            [("FieldValueInvalid".to_owned(), "metadata.labels".to_owned())],
            "{labels}"
        );
    }
    let fine =
        json!({"metadata": {"name": "n", "labels": {"example.com/Name_1.x": "", "a": "A-b_c.9"}}})
            .to_string()
            .into_bytes();
    assert_eq!(
        raw(&client, "POST", "/api/v1/nodes", JSON, fine).await.0,
        201
    );
    let bad_annotation = json!({"metadata": {"name": "m", "annotations": {"no spaces": "v"}}})
        .to_string()
        .into_bytes();
    assert_eq!(
        raw(&client, "POST", "/api/v1/nodes", JSON, bad_annotation)
            .await
            .0,
        422
    );

    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        b"{\"metadata\":{}}".to_vec(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        cause_reasons(&body),
        [("FieldValueRequired".to_owned(), "metadata.name".to_owned())]
    );
    assert!(
        body["details"].get("name").is_none(),
        "an empty name is left out: {body}"
    );

    let apply = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n".to_vec();
    let (code, body) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        "application/apply-patch+yaml",
        apply,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        (
            body["details"]["kind"].as_str(),
            body["details"]["group"].as_str()
        ),
        (Some("PatchOptions"), Some("meta.k8s.io"))
    );
    assert_eq!(
        cause_reasons(&body),
        [("FieldValueRequired".to_owned(), "fieldManager".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn apply_conflicts_name_only_their_causes() {
    let server = server();
    let client = server.admin_client();
    let path = "/api/v1/namespaces/default/configmaps/applied";
    let a = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  shared: a\n"
        .to_vec();
    assert_eq!(
        raw(
            &client,
            "PATCH",
            &format!("{path}?fieldManager=a"),
            "application/apply-patch+yaml",
            a
        )
        .await
        .0,
        201
    );
    let b = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  shared: b\n"
        .to_vec();
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("{path}?fieldManager=b"),
        "application/apply-patch+yaml",
        b,
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        cause_reasons(&body),
        [("FieldManagerConflict".to_owned(), ".data.shared".to_owned())]
    );
    let details = body["details"].as_object().unwrap();
    assert_eq!(
        details.keys().collect::<Vec<_>>(),
        ["causes"],
        "no name, group or kind: {body}"
    );
}

#[tokio::test(start_paused = true)]
async fn admission_defaults_pods_and_taints_new_nodes() {
    let server = server();
    let client = server.admin_client();
    let pod = create_pod(&client, "p", json!({}), None).await;
    let spec = pod.spec.unwrap();
    assert_eq!(
        (spec.priority, spec.preemption_policy.as_deref()),
        (Some(0), Some("PreemptLowerPriority"))
    );
    let tolerations: Vec<(String, Option<i64>)> = spec
        .tolerations
        .unwrap()
        .into_iter()
        .map(|t| (t.key.unwrap(), t.toleration_seconds))
        .collect();
    assert_eq!(
        tolerations,
        [
            ("node.kubernetes.io/not-ready".to_owned(), Some(300)),
            ("node.kubernetes.io/unreachable".to_owned(), Some(300))
        ]
    );

    let mut critical = crate::pod_json("critical", json!({}), None);
    let critical_spec = critical.spec.as_mut().unwrap();
    critical_spec.priority_class_name = Some("system-node-critical".into());
    critical_spec.tolerations = Some(vec![
        serde_json::from_value(json!({"operator": "Exists"})).unwrap(),
    ]);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &critical)
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(created.priority, Some(2_000_001_000));
    assert_eq!(
        created.tolerations.unwrap().len(),
        1,
        "a pod tolerating everything gets no defaults"
    );
    let mut unknown = crate::pod_json("unknown", json!({}), None);
    unknown.spec.as_mut().unwrap().priority_class_name = Some("nope".into());
    assert_eq!(
        crate::code(pods.create(&PostParams::default(), &unknown).await).0,
        403
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap(),
        )
        .await
        .unwrap();
    let taints: Vec<(String, String)> = node
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect();
    assert_eq!(
        taints,
        [(
            "node.kubernetes.io/not-ready".to_owned(),
            "NoSchedule".to_owned()
        )]
    );
    assert_eq!(
        node.status.unwrap().node_info.unwrap().kubelet_version,
        "",
        "zero-valued nodeInfo is written"
    );
    assert!(
        node.metadata.managed_fields.is_none(),
        "admission and zero values are not owned by the client"
    );
}

#[tokio::test(start_paused = true)]
async fn status_writes_of_built_in_kinds_carry_metadata() {
    let server = server();
    let client = server.admin_client();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap(),
        )
        .await
        .unwrap();
    let patched = nodes
        .patch_status(
            "n",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"x": "y"}}, "spec": {"unschedulable": true}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["x"], "y");
    assert_eq!(
        patched.spec.unwrap().unschedulable,
        None,
        "spec is not written through status"
    );
}

#[tokio::test(start_paused = true)]
async fn empty_maps_and_lists_of_built_in_kinds_are_left_out() {
    let server = server();
    let client = server.admin_client();
    let body = json!({"metadata": {"name": "cm", "labels": {}, "finalizers": []}, "data": {}})
        .to_string()
        .into_bytes();
    let (code, created) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        body,
    )
    .await;
    assert_eq!(code, 201);
    assert!(
        created.get("data").is_none()
            && created["metadata"].get("labels").is_none()
            && created["metadata"].get("finalizers").is_none(),
        "{created}"
    );
    assert!(
        created["metadata"].get("managedFields").is_none(),
        "empty fields are not owned: {created}"
    );
}

#[tokio::test(start_paused = true)]
async fn managed_fields_mark_added_maps_and_lists_as_kube_apiserver() {
    let server = server();
    let client = server.admin_client();
    let body = json!({"metadata": {"generateName": "cm-", "labels": {"a": "1"}, "finalizers": ["example.com/x"]}, "data": {"k": "v"}}).to_string().into_bytes();
    let (_, created) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        body,
    )
    .await;
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:a": {}}, "f:finalizers": {".": {}, "v:\"example.com/x\"": {}}}, "f:data": {".": {}, "f:k": {}}}),
        "{created}"
    );
    let name = created["metadata"]["name"].as_str().unwrap();
    let patch = json!({"data": {"k2": "v"}}).to_string().into_bytes();
    let (_, patched) = raw(
        &client,
        "PATCH",
        &format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=other"),
        "application/merge-patch+json",
        patch,
    )
    .await;
    let other = patched["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "other")
        .cloned()
        .unwrap();
    assert_eq!(
        other["fieldsV1"],
        json!({"f:data": {"f:k2": {}}}),
        "a map that was there already is not added again"
    );

    let pods = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}).to_string().into_bytes();
    assert_eq!(
        raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/pods",
            JSON,
            pods
        )
        .await
        .0,
        201
    );
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        .to_string()
        .into_bytes();
    let (_, pod) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        "application/merge-patch+json",
        status,
    )
    .await;
    assert_eq!(pod["status"]["conditions"][0]["lastProbeTime"], Value::Null);
    let entry = pod["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subresource"] == "status")
        .cloned()
        .unwrap();
    assert_eq!(
        entry["fieldsV1"]["f:status"]["f:conditions"],
        json!({".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}})
    );
}

/// What the heartbeat's Lease renewals rely on: an update that leaves managedFields out keeps
/// every writer's entry and records its own, as kube-apiserver does.
#[tokio::test(start_paused = true)]
async fn an_update_without_managed_fields_keeps_them_and_records_the_writer() {
    let server = server();
    let client = server.admin_client();
    let body = json!({"metadata": {"name": "cm", "labels": {"a": "1"}}, "data": {"k": "v"}})
        .to_string()
        .into_bytes();
    let (_, created) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldManager=first",
        JSON,
        body,
    )
    .await;
    let mut update = created.clone();
    update["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    update["data"]["k2"] = json!("w");
    let (code, updated) = raw(
        &client,
        "PUT",
        "/api/v1/namespaces/default/configmaps/cm?fieldManager=second",
        JSON,
        update.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{updated}");
    let entries = updated["metadata"]["managedFields"].as_array().unwrap();
    let fields = |manager: &str| {
        entries
            .iter()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"].clone())
    };
    assert_eq!(
        fields("first"),
        Some(
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:data": {".": {}, "f:k": {}}})
        ),
        "{updated}"
    );
    assert_eq!(
        fields("second"),
        Some(json!({"f:data": {"f:k2": {}}})),
        "{updated}"
    );
}

#[tokio::test(start_paused = true)]
async fn removing_the_last_finalizer_sends_only_deleted() {
    let server = server();
    let maps: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    let created = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "cm", "finalizers": ["example.com/hold"]}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    maps.delete("cm", &DeleteParams::default()).await.unwrap();
    let answer = maps
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(
        answer.metadata.finalizers.is_none(),
        "the writer gets what it wrote"
    );
    let params = WatchParams::default().disable_bookmarks().timeout(5);
    let events: Vec<_> = maps
        .watch(&params, &created.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<(&str, Option<Vec<String>>)> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Modified(o) => ("MODIFIED", o.metadata.finalizers.clone()),
            WatchEvent::Deleted(o) => ("DELETED", o.metadata.finalizers.clone()),
            _ => ("OTHER", None),
        })
        .collect();
    let hold = Some(vec!["example.com/hold".to_owned()]);
    assert_eq!(
        kinds,
        [("MODIFIED", hold.clone()), ("DELETED", hold)],
        "DELETED carries the object as last stored"
    );
}
