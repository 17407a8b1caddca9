//! Integration tests: kube-rs clients against the embedded server over the in-process
//! transport, in virtual time.

mod access_review;
mod bounds;
mod compat;
mod crd;
mod crud;
mod delete;
mod discovery;
mod eviction;
mod fuzz;
mod health;
mod https;
mod kubectl;
mod kubectl_create;
mod nodeauth;
mod patch;
mod runtime;
mod table;
mod watch;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::{Value, json};

/// The instant every test server's clock starts at.
pub(crate) const EPOCH: &str = "2025-01-01T00:00:00Z";

pub(crate) fn server() -> ApiServer {
    ApiServer::new(Clock::simulated(EPOCH.parse().expect("valid epoch")))
}

/// The HTTP code of a failed request.
pub(crate) fn code<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub(crate) fn pod_json(name: &str, labels: Value, node: Option<&str>) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    serde_json::from_value(pod).expect("valid pod")
}

pub(crate) async fn create_pod(
    client: &Client,
    name: &str,
    labels: Value,
    node: Option<&str>,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod_json(name, labels, node))
        .await
        .expect("pod created")
}

/// Sends a raw request and returns (status code, JSON body).
pub(crate) async fn raw(
    client: &Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = client.send(request).await.expect("response");
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}
