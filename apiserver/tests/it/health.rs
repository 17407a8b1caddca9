//! Health endpoints as kube-apiserver serves them: plain text, named checks, `?verbose`,
//! `?exclude=`, and one check by path.

use kube::Client;

use crate::server;

/// Sends a GET and returns (status, content type, body text).
async fn get_text(client: &Client, uri: &str) -> (u16, String, String) {
    let request = http::Request::builder()
        .method("GET")
        .uri(uri)
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = client.send(request).await.expect("response");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn health_endpoints_answer_plain_text_ok() {
    let server = server();
    let client = server.admin_client();
    for path in [
        "/healthz",
        "/livez",
        "/readyz",
        "/healthz/ping",
        "/readyz/store",
    ] {
        let (status, content_type, body) = get_text(&client, path).await;
        assert_eq!((status, body.as_str()), (200, "ok"), "{path}");
        assert!(
            content_type.starts_with("text/plain"),
            "{path}: {content_type}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn verbose_health_lists_each_check_and_the_verdict() {
    let server = server();
    let client = server.admin_client();
    let (status, _, body) = get_text(&client, "/readyz?verbose").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        "[+]ping ok\n[+]log ok\n[+]store ok\nreadyz check passed\n"
    );
    let (_, _, body) = get_text(&client, "/livez?verbose=true&exclude=log").await;
    assert_eq!(
        body,
        "[+]ping ok\n[+]log excluded: ok\n[+]store ok\nlivez check passed\n"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_check_is_not_found() {
    let server = server();
    let client = server.admin_client();
    let (status, _, body) = get_text(&client, "/healthz/etcd-frobnicator").await;
    assert_eq!(status, 404, "{body}");
    let (status, _, body) = get_text(&client, "/healthz?exclude=frobnicator").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(start_paused = true)]
async fn metrics_count_requests_and_open_watches_for_administrators() {
    let server = server();
    let client = server.admin_client();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    nodes.list(&Default::default()).await.unwrap();
    nodes.list(&Default::default()).await.unwrap();
    let _ = nodes.get("missing").await;
    let watch = nodes
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap();
    let (status, content_type, text) = get_text(&client, "/metrics").await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    assert!(
        text.contains(
            "apiserver_request_total{code=\"200\",group=\"\",resource=\"nodes\",verb=\"LIST\"} 2\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "apiserver_request_total{code=\"404\",group=\"\",resource=\"nodes\",verb=\"GET\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("apiserver_registered_watchers{group=\"\",resource=\"nodes\"} 1\n"),
        "{text}"
    );
    drop(watch);
    tokio::task::yield_now().await;
    let (_, _, text) = get_text(&client, "/metrics").await;
    assert!(
        text.contains("apiserver_registered_watchers{group=\"\",resource=\"nodes\"} 0\n"),
        "a closed watch no longer counts: {text}"
    );

    let node = server.client(rackproof_apiserver::User::node("n1"));
    let (status, _, text) = get_text(&node, "/metrics").await;
    assert_eq!(status, 403, "{text}");
}
