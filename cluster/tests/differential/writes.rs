//! Patches (merge, JSON, strategic), server-side apply with two managers, and graceful deletion
//! with finalizers.

use crate::support::*;

#[tokio::test]
async fn merge_json_and_strategic_patches_on_nodes_and_pods() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({ "pool": "a", "zone": "z1" }))),
        StatusCode::CREATED,
    )
    .await;
    let status = format!("{NODES}/node-a/status");
    let conditions = r#"{"status":{"conditions":[
        {"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"},
        {"type":"InPlaceUpdate","status":"True","reason":"CandidateForUpdate","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    pair.expect(Call::patch(&status, STRATEGIC, conditions), StatusCode::OK)
        .await;
    // Strategic merge: conditions merge by type.
    let selected = r#"{"status":{"conditions":[{"type":"InPlaceUpdate","status":"True","reason":"SelectedForUpdate","lastHeartbeatTime":"2024-01-01T00:01:00Z","lastTransitionTime":"2024-01-01T00:01:00Z"}]}}"#;
    pair.expect(Call::patch(&status, STRATEGIC, selected), StatusCode::OK)
        .await;
    // Delete one condition by its merge key.
    pair.expect(
        Call::patch(
            &status,
            STRATEGIC,
            r#"{"status":{"conditions":[{"type":"InPlaceUpdate","$patch":"delete"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    // A merge patch replaces the list.
    pair.expect(Call::patch(&status, MERGE, selected), StatusCode::OK)
        .await;
    // JSON patch: test, add, replace, remove; labels with escaped keys.
    let node_path = format!("{NODES}/node-a");
    pair.expect(Call::patch(&node_path, JSON_PATCH, r#"[{"op":"test","path":"/metadata/labels/pool","value":"a"},{"op":"add","path":"/metadata/labels/node.machine.sapcloud.io~1candidate-for-update","value":"true"},{"op":"replace","path":"/metadata/labels/zone","value":"z2"},{"op":"remove","path":"/metadata/labels/pool"}]"#), StatusCode::OK).await;
    pair.expect(
        Call::patch(
            &node_path,
            JSON_PATCH,
            r#"[{"op":"test","path":"/metadata/labels/zone","value":"nope"}]"#,
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::patch(
            &node_path,
            JSON_PATCH,
            r#"[{"op":"remove","path":"/metadata/labels/absent"}]"#,
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    // Merge patch with null deletes; taints are atomic under strategic merge.
    pair.expect(Call::patch(&node_path, MERGE, r#"{"metadata":{"labels":{"zone":null}},"spec":{"unschedulable":true,"taints":[{"key":"a","effect":"NoSchedule"}]}}"#), StatusCode::OK).await;
    pair.expect(
        Call::patch(
            &node_path,
            STRATEGIC,
            r#"{"spec":{"taints":[{"key":"b","effect":"NoExecute"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let pods = ns_path("default", "pods");
    let mut two = pod("web", Some("node-a"));
    two["spec"]["containers"] = json!([{ "name": "app", "image": "busybox:1.36" }, { "name": "side", "image": "busybox:1.36", "env": [{ "name": "A", "value": "1" }] }]);
    pair.expect(Call::post(&pods, two), StatusCode::CREATED)
        .await;
    let web = format!("{pods}/web");
    // Strategic merge: containers merge by name (image is mutable on a pod).
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"spec":{"containers":[{"name":"side","image":"busybox:1.37"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"metadata":{"annotations":{"a":"1"},"finalizers":["rackproof.test/one"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"metadata":{"finalizers":["rackproof.test/two"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            MERGE,
            r#"{"metadata":{"finalizers":["rackproof.test/one","rackproof.test/two"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            JSON_PATCH,
            r#"[{"op":"replace","path":"/spec/containers/0/image","value":"busybox:1.37"}]"#,
        ),
        StatusCode::OK,
    )
    .await;
    let pod_status = r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}"#;
    pair.expect(
        Call::patch(format!("{web}/status"), STRATEGIC, pod_status),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{web}/status"),
            STRATEGIC,
            r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Draining"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(&web, MERGE, r#"{"metadata":{"finalizers":null}}"#),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn server_side_apply_with_two_managers_and_a_conflict() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let a = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    owner: a\ndata:\n  shared: from-a\n  a: '1'\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=a"), APPLY, a),
        StatusCode::CREATED,
    )
    .await;
    let b = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: '2'\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=b"), APPLY, b),
        StatusCode::OK,
    )
    .await;
    let b_conflict = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: '2'\n  shared: from-b\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=b"), APPLY, b_conflict),
        StatusCode::CONFLICT,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{cms}/applied?fieldManager=b&force=true"),
            APPLY,
            b_conflict,
        ),
        StatusCode::OK,
    )
    .await;
    // a drops `a`: the field is removed because a alone owned it.
    let a2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    owner: a\ndata:\n  shared: from-b\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=a"), APPLY, a2),
        StatusCode::OK,
    )
    .await;
    // An update by a third manager (merge patch) shows up as an Update entry.
    pair.expect(
        Call::patch(
            format!("{cms}/applied?fieldManager=c"),
            MERGE,
            r#"{"data":{"c":"3"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/applied")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(format!("{cms}/missing-manager"), APPLY, a),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;

    let apply_node =
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: applied-node\n  labels:\n    pool: a\n";
    pair.expect(
        Call::patch(
            format!("{NODES}/applied-node?fieldManager=agent"),
            APPLY,
            apply_node,
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn graceful_pod_deletion_and_finalizers() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    let pods = ns_path("default", "pods");
    // Bound pod: graceful deletion leaves it Terminating until deleted with grace period 0.
    pair.expect(
        Call::post(&pods, pod("bound", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 30 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/bound")), StatusCode::OK)
        .await;
    // A second graceful delete with a longer period does not extend it.
    pair.expect(Call::delete(format!("{pods}/bound"), None), StatusCode::OK)
        .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/bound")), StatusCode::NOT_FOUND)
        .await;
    // Unbound pod: deleted at once.
    pair.expect(Call::post(&pods, pod("unbound", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::delete(format!("{pods}/unbound"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/unbound")), StatusCode::NOT_FOUND)
        .await;
    // Finalizers hold an object after deletion until removed.
    let cms = ns_path("default", "configmaps");
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "held", "finalizers": ["rackproof.test/hold"] } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::delete(format!("{cms}/held"), None), StatusCode::OK)
        .await;
    pair.expect(Call::get(format!("{cms}/held")), StatusCode::OK)
        .await;
    // Adding a finalizer while deleting is forbidden; changing data is allowed.
    pair.expect(
        Call::patch(format!("{cms}/held"), MERGE, r#"{"data":{"x":"y"}}"#),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{cms}/held"),
            MERGE,
            r#"{"metadata":{"finalizers":[]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/held")), StatusCode::NOT_FOUND)
        .await;
    // Pod with a finalizer and grace 0: stays until the finalizer goes.
    let mut held = pod("held", Some("node-a"));
    held["metadata"]["finalizers"] = json!(["rackproof.test/hold"]);
    pair.expect(Call::post(&pods, held), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::delete(
            format!("{pods}/held"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/held")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/held"),
            JSON_PATCH,
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/held")), StatusCode::NOT_FOUND)
        .await;
    pair.finish().await;
}
