//! `rackproof-agent os-update` against a hostile image server over real HTTP on 127.0.0.1: the
//! manifest is capped, each file stops at the size its signed manifest states, and nothing in a
//! manifest is used before its signature is checked.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::get;
use inplace_agent::assess::booted::{FixedBooted, LoaderHint};
use inplace_agent::manifest::{BootSpec, SlotKeyPair, SlotManifest};
use inplace_agent::osupdate::{OsUpdateEnv, run};
use inplace_api::keys::OsUpdateExit;
use inplace_boot::MemEsp;

const KERNEL: &[u8] = b"kernel 2.0.0";

fn key() -> SlotKeyPair {
    SlotKeyPair::from_seed([5; 32])
}

fn signed_manifest(signer: &SlotKeyPair) -> Vec<u8> {
    let boot = BootSpec {
        linux: "vmlinuz".into(),
        initrd: None,
        options: String::new(),
    };
    let mut manifest =
        SlotManifest::describe("2.0.0", &[("vmlinuz".into(), KERNEL.to_vec())], boot).unwrap();
    manifest.sign(signer.signing());
    manifest.to_json()
}

/// A body that never ends: only a client that stops reading at its limit gets past it.
fn endless() -> Body {
    let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
    Body::from_stream(futures::stream::repeat_with(move || {
        Ok::<_, std::io::Error>(chunk.clone())
    }))
}

/// Serves `app` on 127.0.0.1 and returns the `--image-server` URL; the server stops with the task.
async fn serve(app: Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slots", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

/// Runs `os-update --version 2.0.0` against `url` on an empty ESP; returns the exit, the output
/// and the ESP.
async fn os_update(url: &str) -> (OsUpdateExit, String, MemEsp) {
    let esp = MemEsp::new(16 << 20);
    let env = OsUpdateEnv {
        esp: Some(Arc::new(esp.clone())),
        source: None,
        public_key: Some(key().public()),
        booted: Some(Arc::new(FixedBooted::new(LoaderHint::default()))),
    };
    let argv: Vec<String> = [
        "--version",
        "2.0.0",
        "--image-server",
        url,
        "--timeout",
        "20s",
        "--node",
        "node-1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut out = Vec::new();
    let exit = tokio::time::timeout(Duration::from_secs(60), run(&argv, &env, &mut out))
        .await
        .expect("os-update finishes");
    (exit, String::from_utf8_lossy(&out).into_owned(), esp)
}

#[tokio::test]
async fn a_manifest_larger_than_64_kib_is_refused_naming_the_url_and_the_limit() {
    let big = vec![b' '; 1 << 20];
    let (url, server) = serve(Router::new().route(
        "/slots/2.0.0/manifest.json",
        get(move || std::future::ready(big.clone())),
    ))
    .await;
    let (exit, out, esp) = os_update(&url).await;
    server.abort();
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(
        out.contains(&format!("{url}/2.0.0/manifest.json")) && out.contains("65536 bytes"),
        "{out}"
    );
    assert!(esp.paths().is_empty());

    // Without a Content-Length the agent stops reading at the cap: the body never ends, so only
    // stopping there lets the command finish.
    let (url, server) = serve(Router::new().route(
        "/slots/2.0.0/manifest.json",
        get(|| std::future::ready(endless())),
    ))
    .await;
    let (exit, out, _) = os_update(&url).await;
    server.abort();
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(out.contains("65536 bytes"), "{out}");
}

#[tokio::test]
async fn a_file_longer_or_shorter_than_its_signed_size_is_refused() {
    let manifest = signed_manifest(&key());
    let app = Router::new()
        .route(
            "/slots/2.0.0/manifest.json",
            get(move || std::future::ready(manifest.clone())),
        )
        .route(
            "/slots/2.0.0/vmlinuz",
            get(|| std::future::ready(endless())),
        );
    let (url, server) = serve(app).await;
    let (exit, out, esp) = os_update(&url).await;
    server.abort();
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(
        out.contains(&format!("{url}/2.0.0/vmlinuz"))
            && out.contains(&format!("longer than the {} bytes", KERNEL.len())),
        "{out}"
    );
    assert!(esp.paths().is_empty());

    let manifest = signed_manifest(&key());
    let app = Router::new()
        .route(
            "/slots/2.0.0/manifest.json",
            get(move || std::future::ready(manifest.clone())),
        )
        .route(
            "/slots/2.0.0/vmlinuz",
            get(|| std::future::ready(&KERNEL[..4])),
        );
    let (url, server) = serve(app).await;
    let (exit, out, esp) = os_update(&url).await;
    server.abort();
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(
        out.contains(&format!("4 of the {} bytes", KERNEL.len())),
        "{out}"
    );
    assert!(esp.paths().is_empty());
}

#[tokio::test]
async fn nothing_in_a_manifest_is_used_before_its_signature_is_checked() {
    // Signed by another key, and naming a file outside the slot: the signature is what refuses it.
    let stranger = SlotKeyPair::from_seed([6; 32]);
    let mut hostile: serde_json::Value =
        serde_json::from_slice(&signed_manifest(&stranger)).unwrap();
    hostile["files"][0]["name"] = "../../EFI/evil".into();
    hostile["boot"]["linux"] = "../../EFI/evil".into();
    let body = serde_json::to_vec(&hostile).unwrap();
    let fetched = Arc::new(AtomicU64::new(0));
    let counter = fetched.clone();
    let app = Router::new()
        .route(
            "/slots/2.0.0/manifest.json",
            get(move || std::future::ready(body.clone())),
        )
        .route(
            "/slots/2.0.0/{file}",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                std::future::ready(KERNEL)
            }),
        );
    let (url, server) = serve(app).await;
    let (exit, out, esp) = os_update(&url).await;
    server.abort();
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(out.contains("not signed by the trusted key"), "{out}");
    assert_eq!(fetched.load(Ordering::SeqCst), 0, "no file was requested");
    assert!(esp.paths().is_empty());
}
