//! The server's bounds: a watch whose client stops reading is closed instead of queueing
//! without end (and a kube-rs watcher recovers), a user's concurrent watches are capped, and
//! the HTTPS listener times out slow handshakes and headers and caps its connections.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use rackproof_apiserver::{ApiServer, HttpsLimits, WatchLimits};
use rackproof_clock::Clock;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{raw, server};

/// Starts a watch as `client` and returns the response with its body unread.
async fn open_watch(client: &kube::Client, uri: &str) -> http::Response<kube::client::Body> {
    let request = http::Request::builder()
        .uri(uri)
        .body(kube::client::Body::empty())
        .expect("request");
    client.send(request).await.expect("watch response")
}

async fn create_maps(client: &kube::Client, names: impl Iterator<Item = String>) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in names {
        let map: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
                .expect("config map");
        maps.create(&PostParams::default(), &map)
            .await
            .expect("config map created");
    }
}

/// `apiserver_terminated_watchers_total` for config maps, from `/metrics`.
async fn terminated_watchers(admin: &kube::Client) -> u64 {
    let (code, body) = raw(admin, "GET", "/metrics", "text/plain", Vec::new()).await;
    assert_eq!(code, 200);
    let text = body.as_str().expect("metrics text").to_owned();
    text.lines()
        .find(|line| {
            line.starts_with("apiserver_terminated_watchers_total{")
                && line.contains("resource=\"configmaps\"")
        })
        .and_then(|line| line.rsplit(' ').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

#[tokio::test(start_paused = true)]
async fn a_watch_whose_client_stops_reading_is_closed_with_a_bounded_queue() {
    let server = server();
    server.set_watch_limits(WatchLimits {
        buffer: 8,
        ..WatchLimits::default()
    });
    let admin = server.admin_client();
    let rv = server.resource_version();
    let response = open_watch(
        &admin,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"),
    )
    .await;
    assert_eq!(response.status(), 200);
    // The client reads nothing while 100 objects are written.
    create_maps(&admin, (0..100).map(|i| format!("map-{i}"))).await;
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the watch ends cleanly")
        .to_bytes();
    let events = String::from_utf8_lossy(&body).lines().count();
    assert!(
        events <= 8,
        "the server queued {events} events for a watch that reads nothing (limit 8)"
    );
    assert_eq!(terminated_watchers(&admin).await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_kube_watcher_that_fell_behind_recovers_every_object() {
    let server = server();
    server.set_watch_limits(WatchLimits {
        buffer: 4,
        ..WatchLimits::default()
    });
    let admin = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let mut stream = watcher(maps, watcher::Config::default()).boxed();
    // Until the initial list is done; then the watch is open.
    loop {
        match stream.next().await {
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Ok(_)) => {}
            other => panic!("watcher failed to start: {other:?}"),
        }
    }
    // One object seen through the watch: it is open and registered.
    create_maps(&admin, std::iter::once("first".to_owned())).await;
    loop {
        match stream.next().await {
            Some(Ok(watcher::Event::Apply(_))) => break,
            Some(Ok(_)) => {}
            other => panic!("watcher failed: {other:?}"),
        }
    }
    // The client stops reading while 50 objects are written.
    create_maps(&admin, (0..50).map(|i| format!("map-{i}"))).await;
    // Reading again: the closed watch is followed by a new one, and every object arrives.
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 50 {
        match stream.next().await {
            Some(Ok(watcher::Event::Apply(map) | watcher::Event::InitApply(map))) => {
                seen.extend(map.metadata.name.filter(|name| name != "first"));
            }
            Some(Ok(_)) => {}
            other => panic!("watcher failed after being closed: {other:?}"),
        }
    }
    assert_eq!(terminated_watchers(&admin).await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_user_holds_at_most_so_many_watches_and_then_gets_429_with_retry_after() {
    let server = server();
    server.set_watch_limits(WatchLimits {
        per_user: 3,
        ..WatchLimits::default()
    });
    let admin = server.admin_client();
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let own = "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1";
    let n1 = server.node_client("n1");
    let mut held = Vec::new();
    for _ in 0..3 {
        let response = open_watch(&n1, own).await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    let refused = open_watch(&n1, own).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body = http_body_util::BodyExt::collect(refused.into_body())
        .await
        .unwrap()
        .to_bytes();
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
    // Another node is not affected, nor the admin (system:masters, exempt).
    let n2 = server.node_client("n2");
    assert_eq!(
        open_watch(
            &n2,
            "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn2"
        )
        .await
        .status(),
        200
    );
    for _ in 0..4 {
        held.push(open_watch(&admin, own).await);
    }
    // A watch closed by its client gives its place back.
    held.remove(0);
    assert_eq!(open_watch(&n1, own).await.status(), 200);
}

// ---------------------------------------------------------------------------------------------
// HTTPS connections
// ---------------------------------------------------------------------------------------------

/// Failing guard for waits that must end: a server that never closes fails the test here
/// instead of hanging it.
const GUARD: Duration = Duration::from_secs(30);

async fn https_server(limits: HttpsLimits) -> (ApiServer, rackproof_apiserver::HttpsServer) {
    let server = ApiServer::new(Clock::wall());
    let https = server
        .serve_https_with_limits("127.0.0.1:0".parse().unwrap(), &[], limits)
        .await
        .expect("HTTPS server");
    (server, https)
}

fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject as _;
    let ca = rustls_pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("CA added");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn tls_connect(https: &rackproof_apiserver::HttpsServer) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(https.addr()).await?;
    let name = rustls_pki_types::ServerName::IpAddress(https.addr().ip().into());
    tls_connector(https.ca_pem()).connect(name, tcp).await
}

/// Reads until the server closes the connection (or resets it); what it sent before.
async fn read_until_closed(stream: &mut (impl AsyncReadExt + Unpin)) -> Vec<u8> {
    let mut received = Vec::new();
    let _ = tokio::time::timeout(GUARD, stream.read_to_end(&mut received))
        .await
        .expect("the server never closed the connection");
    received
}

#[tokio::test]
async fn a_connection_that_sends_half_a_header_is_closed() {
    let (_server, https) = https_server(HttpsLimits {
        header_read_timeout: Duration::from_millis(300),
        ..HttpsLimits::default()
    })
    .await;
    let mut tls = tls_connect(&https).await.expect("TLS connection");
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    tls.flush().await.unwrap();
    let received = read_until_closed(&mut tls).await;
    let text = String::from_utf8_lossy(&received);
    assert!(!text.contains("200 OK"), "{text}");
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_tls_handshake_is_closed() {
    let (_server, https) = https_server(HttpsLimits {
        tls_handshake_timeout: Duration::from_millis(300),
        ..HttpsLimits::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(https.addr()).await.unwrap();
    // Half a ClientHello record header, then silence.
    tcp.write_all(&[0x16, 0x03]).await.unwrap();
    let received = read_until_closed(&mut tcp).await;
    assert!(received.len() < 64, "{received:?}");
}

/// `GET /version` over `tls`; the response's status line.
async fn version_status(tls: &mut Tls) -> String {
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let received = read_until_closed(tls).await;
    String::from_utf8_lossy(&received)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_and_the_others_keep_working() {
    let (_server, https) = https_server(HttpsLimits {
        max_connections: 2,
        ..HttpsLimits::default()
    })
    .await;
    let mut first = tls_connect(&https).await.expect("first connection");
    let mut second = tls_connect(&https).await.expect("second connection");
    let third = tokio::time::timeout(GUARD, tls_connect(&https))
        .await
        .expect("the third connection was neither served nor closed");
    assert!(
        third.is_err(),
        "a third connection was served past the cap of 2"
    );
    assert_eq!(version_status(&mut first).await, "HTTP/1.1 200 OK");
    assert_eq!(version_status(&mut second).await, "HTTP/1.1 200 OK");
}
