//! Reads and writes of built-in objects: CRUD, status and scale subresources, selectors, optimistic
//! concurrency and error statuses.

use crate::support::*;

#[tokio::test]
async fn crud_of_namespaces_configmaps_secrets_and_leases() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(
            NS,
            json!({ "metadata": { "name": "crud", "labels": { "team": "a" } } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::get(format!("{NS}/crud")), StatusCode::OK)
        .await;
    pair.expect(
        Call::post(NS, json!({ "metadata": { "name": "crud" } })),
        StatusCode::CONFLICT,
    )
    .await;

    let cms = ns_path("crud", "configmaps");
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "settings" }, "data": { "a": "1" } });
    pair.expect(Call::post(&cms, cm), StatusCode::CREATED).await;
    let (embedded, real) = pair
        .expect(Call::get(format!("{cms}/settings")), StatusCode::OK)
        .await;
    // Update with each server's own resourceVersion: a full PUT.
    for (client, reply) in [(pair.embedded.clone(), embedded), (pair.real.clone(), real)] {
        let mut body = reply.body.clone();
        body["data"]["b"] = json!("2");
        let reply = send(&client, &Call::put(format!("{cms}/settings"), body)).await;
        assert_eq!(reply.code, 200, "{}", reply.body);
    }
    pair.expect(Call::get(format!("{cms}/settings")), StatusCode::OK)
        .await;
    pair.expect(Call::get(format!("{cms}/missing")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "generateName": "gen-" }, "data": {} }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::delete(format!("{cms}/settings"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/settings")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::delete(format!("{cms}/settings"), None),
        StatusCode::NOT_FOUND,
    )
    .await;

    let secrets = ns_path("crud", "secrets");
    let secret = json!({ "metadata": { "name": "osc" }, "type": "Opaque", "stringData": { "config": "x" }, "data": { "raw": "eHl6" } });
    pair.expect(Call::post(&secrets, secret), StatusCode::CREATED)
        .await;
    pair.expect(Call::get(format!("{secrets}/osc")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{secrets}/osc"),
            MERGE,
            r#"{"data":{"more":"YQ=="}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let leases = "/apis/coordination.k8s.io/v1/namespaces/crud/leases";
    let lease = json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": { "name": "node-a" }, "spec": { "holderIdentity": "node-a", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z" } });
    pair.expect(Call::post(leases, lease), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::patch(
            format!("{leases}/node-a"),
            MERGE,
            r#"{"spec":{"renewTime":"2024-01-01T00:00:10.000000Z"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(leases), StatusCode::OK).await;
    pair.expect(
        Call::delete(format!("{leases}/node-a"), None),
        StatusCode::OK,
    )
    .await;

    pair.expect(Call::delete(format!("{NS}/crud"), None), StatusCode::OK)
        .await;
    pair.finish().await;
}

#[tokio::test]
async fn nodes_and_pods_with_status_subresources() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({ "pool": "a" }))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::get(format!("{NODES}/node-a")), StatusCode::OK)
        .await;
    let status = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    pair.expect(
        Call::patch(format!("{NODES}/node-a/status"), MERGE, status),
        StatusCode::OK,
    )
    .await;
    // Metadata written through status is applied.
    pair.expect(
        Call::patch(
            format!("{NODES}/node-a/status"),
            MERGE,
            r#"{"metadata":{"labels":{"x":"y"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{NODES}/node-a"),
            MERGE,
            r#"{"metadata":{"labels":{"z":"1"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{NODES}/node-a/status")), StatusCode::OK)
        .await;
    // Status written through the main resource is ignored; spec through status is ignored.
    // Compared without managedFields (version difference V5), on a node of its own.
    pair.expect(
        Call::post(NODES, node("node-b", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect_without_managed_fields(
        Call::patch(
            format!("{NODES}/node-b"),
            MERGE,
            r#"{"spec":{"unschedulable":true},"status":{"phase":"Terminated"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_without_managed_fields(
        Call::patch(
            format!("{NODES}/node-b/status"),
            MERGE,
            r#"{"spec":{"unschedulable":false},"metadata":{"labels":{"x":"y"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let pods = ns_path("default", "pods");
    pair.expect(
        Call::post(&pods, pod("web", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{pods}/web/status"),
            MERGE,
            r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/web")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/web"),
            MERGE,
            r#"{"metadata":{"labels":{"tier":"front"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/web"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/web")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::delete(format!("{NODES}/node-a"), None),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn deployments_and_the_scale_subresource() {
    let mut pair = Pair::start().await;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "mcm", "labels": { "app": "mcm" } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "mcm" } },
            "template": { "metadata": { "labels": { "app": "mcm" } }, "spec": { "containers": [{ "name": "mcm", "image": "busybox:1.36" }] } },
        },
    });
    pair.expect(Call::post(deployments, deployment), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::get(format!("{deployments}/mcm/scale")),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{deployments}/mcm/scale"),
            MERGE,
            r#"{"spec":{"replicas":0}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::put(format!("{deployments}/mcm/scale"), json!({ "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": { "name": "mcm", "namespace": "default" }, "spec": { "replicas": 3 } })), StatusCode::OK).await;
    pair.expect(Call::get(format!("{deployments}/mcm")), StatusCode::OK)
        .await;
    pair.expect(Call::patch(format!("{deployments}/mcm"), STRATEGIC, r#"{"spec":{"template":{"spec":{"containers":[{"name":"mcm","image":"busybox:1.37"}]}}}}"#), StatusCode::OK).await;
    let bad = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "bad" }, "spec": { "selector": { "matchLabels": { "app": "x" } }, "template": { "metadata": { "labels": { "app": "y" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } } });
    pair.expect(
        Call::post(deployments, bad),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::delete(format!("{deployments}/mcm"), None),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    for (name, labels) in [
        ("a", json!({ "env": "prod", "tier": "web" })),
        ("b", json!({ "env": "dev", "tier": "web" })),
        ("c", json!({ "env": "test" })),
        ("d", json!({ "other": "x" })),
    ] {
        pair.expect(
            Call::post(
                &cms,
                json!({ "metadata": { "name": name, "labels": labels } }),
            ),
            StatusCode::CREATED,
        )
        .await;
    }
    for selector in [
        "env=prod",
        "env==prod",
        "env!=prod",
        "env in (prod,dev)",
        "env notin (prod)",
        "env",
        "!env",
        "env,tier=web",
        "tier=web,env notin (dev)",
        "env in (nothing)",
    ] {
        let path = format!("{cms}?labelSelector={}", encode(selector));
        let (embedded, real) = pair.expect(Call::get(path), StatusCode::OK).await;
        assert_eq!(names(&embedded), names(&real), "labelSelector {selector}");
    }
    pair.expect(
        Call::get(format!("{cms}?labelSelector={}", encode("env in prod"))),
        StatusCode::BAD_REQUEST,
    )
    .await;

    for (name, labels, unschedulable) in [
        ("n1", json!({ "pool": "a" }), true),
        ("n2", json!({ "pool": "b" }), false),
    ] {
        let mut body = node(name, labels);
        body["spec"] = json!({ "unschedulable": unschedulable });
        pair.expect(Call::post(NODES, body), StatusCode::CREATED)
            .await;
    }
    let pods = ns_path("default", "pods");
    pair.expect(
        Call::post(&pods, pod("p1", Some("n1"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(&pods, pod("p2", Some("n2"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::post(&pods, pod("p3", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/p2/status"),
            MERGE,
            r#"{"status":{"phase":"Running"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::post(NS, json!({ "metadata": { "name": "other" } })),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(ns_path("other", "pods"), pod("p4", Some("n1"))),
        StatusCode::CREATED,
    )
    .await;

    for (path, selector) in [
        (pods.clone(), "spec.nodeName=n1"),
        (pods.clone(), "spec.nodeName!=n1"),
        (pods.clone(), "spec.nodeName="),
        (pods.clone(), "status.phase=Running"),
        (pods.clone(), "metadata.name=p3"),
        ("/api/v1/pods".to_owned(), "metadata.namespace=other"),
        (
            "/api/v1/pods".to_owned(),
            "spec.nodeName=n1,metadata.namespace!=other",
        ),
        (NODES.to_owned(), "spec.unschedulable=true"),
        (NODES.to_owned(), "spec.unschedulable=false"),
        (NODES.to_owned(), "metadata.name=n2"),
    ] {
        let (embedded, real) = pair
            .expect(
                Call::get(format!("{path}?fieldSelector={}", encode(selector))),
                StatusCode::OK,
            )
            .await;
        assert_eq!(
            names(&embedded),
            names(&real),
            "fieldSelector {selector} on {path}"
        );
    }
    pair.expect(
        Call::get(format!("{pods}?fieldSelector={}", encode("spec.unknown=x"))),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn optimistic_concurrency_and_error_statuses() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let (embedded, real) = pair
        .expect(
            Call::post(
                &cms,
                json!({ "metadata": { "name": "cm" }, "data": { "v": "1" } }),
            ),
            StatusCode::CREATED,
        )
        .await;
    // Two updates from the same (then stale) read: the second one conflicts.
    for (client, created) in [
        (pair.embedded.clone(), embedded.body),
        (pair.real.clone(), real.body),
    ] {
        let mut first = created.clone();
        first["data"]["v"] = json!("2");
        assert_eq!(
            send(&client, &Call::put(format!("{cms}/cm"), first))
                .await
                .code,
            200
        );
    }
    let mut stale_e = pair.embedded_last_read(&format!("{cms}/cm")).await;
    let mut stale_r = pair.real_last_read(&format!("{cms}/cm")).await;
    stale_e["data"]["v"] = json!("3");
    stale_r["data"]["v"] = json!("3");
    pair.expect(
        Call::patch(format!("{cms}/cm"), MERGE, r#"{"data":{"v":"4"}}"#),
        StatusCode::OK,
    )
    .await;
    let e = send(&pair.embedded, &Call::put(format!("{cms}/cm"), stale_e)).await;
    let r = send(&pair.real, &Call::put(format!("{cms}/cm"), stale_r)).await;
    assert_eq!(r.code, 409);
    pair.compare("PUT with a stale resourceVersion", &e, &r);
    // A merge patch carrying a stale resourceVersion conflicts as well.
    pair.expect(
        Call::patch(
            format!("{cms}/cm"),
            MERGE,
            r#"{"metadata":{"resourceVersion":"1"},"data":{"v":"5"}}"#,
        ),
        StatusCode::CONFLICT,
    )
    .await;
    // An update without resourceVersion is unconditional.
    pair.expect(
        Call::put(
            format!("{cms}/cm"),
            json!({ "metadata": { "name": "cm" }, "data": { "v": "6" } }),
        ),
        StatusCode::OK,
    )
    .await;

    pair.expect(Call::get(format!("{cms}/nope")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::get("/api/v1/namespaces/nope/configmaps/x"),
        StatusCode::NOT_FOUND,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "cm" } })),
        StatusCode::CONFLICT,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "Bad_Name" } })),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(
            NODES,
            json!({ "metadata": { "name": "node", "labels": { "bad key!": "v" } } }),
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": {} })),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.known(
        Call::patch(format!("{cms}/cm"), MERGE, "{not json"),
        StatusCode::INTERNAL_SERVER_ERROR,
        "V4 (malformed merge patch: 400, not 500)",
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/cm"), JSON_PATCH, r#"{"op":"add"}"#),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/cm"), STRATEGIC, "[1,2]"),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "x", "namespace": "other" } }),
        ),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.finish().await;
}

impl Pair {
    pub(crate) async fn embedded_last_read(&self, path: &str) -> Value {
        let mut body = send(&self.embedded, &Call::get(path)).await.body;
        body.as_object_mut().map(|m| m.remove("status"));
        body
    }

    pub(crate) async fn real_last_read(&self, path: &str) -> Value {
        let mut body = send(&self.real, &Call::get(path)).await.body;
        body.as_object_mut().map(|m| m.remove("status"));
        body
    }
}
