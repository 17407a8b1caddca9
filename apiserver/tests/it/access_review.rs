//! `SelfSubjectAccessReview`: the answer is the authorizer's own decision for that request.

use serde_json::{Value, json};

use crate::{raw, server};

fn review(attributes: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes}
    }))
    .unwrap()
}

const PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

#[tokio::test(start_paused = true)]
async fn reviews_answer_what_the_authorizer_decides() {
    let server = server();
    let admin = server.admin_client();
    let node = server.client(rackproof_apiserver::User::node("n1"));
    let (status, answer) = raw(
        &admin,
        "POST",
        PATH,
        "application/json",
        review(json!({"verb": "delete", "resource": "nodes", "name": "n2"})),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"]["allowed"], true);

    let (_, own) = raw(
        &node,
        "POST",
        PATH,
        "application/json",
        review(json!({"verb": "patch", "resource": "nodes", "name": "n1"})),
    )
    .await;
    assert_eq!(own["status"]["allowed"], true, "{own}");
    let (_, other) = raw(
        &node,
        "POST",
        PATH,
        "application/json",
        review(json!({"verb": "patch", "resource": "nodes", "name": "n2"})),
    )
    .await;
    assert_eq!(other["status"]["allowed"], false, "{other}");
    assert!(
        other["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("may only modify its own Node"),
        "{other}"
    );
    let (_, leases) = raw(
        &node,
        "POST",
        PATH,
        "application/json",
        review(
            json!({"verb": "list", "group": "coordination.k8s.io", "resource": "leases",
            "namespace": "kube-node-lease"}),
        ),
    )
    .await;
    assert_eq!(leases["status"]["allowed"], false, "{leases}");
}

#[tokio::test(start_paused = true)]
async fn a_review_without_attributes_is_invalid() {
    let server = server();
    let admin = server.admin_client();
    let body = serde_json::to_vec(&json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}
    }))
    .unwrap();
    let (status, answer) = raw(&admin, "POST", PATH, "application/json", body).await;
    assert_eq!(status, 422, "{answer}");
    let (status, _) = raw(&admin, "GET", PATH, "", Vec::new()).await;
    assert_eq!(status, 405);
}
