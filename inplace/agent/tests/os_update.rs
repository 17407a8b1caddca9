//! The OS-update command (`rackproof-agent os-update`): exit codes and what it leaves on the ESP.

use std::sync::Arc;
use std::time::Duration;

use inplace_agent::assess::booted::{FixedBooted, LoaderHint};
use inplace_agent::manifest::{BootSpec, SlotKeyPair, SlotManifest};
use inplace_agent::osupdate::source::MemorySource;
use inplace_agent::osupdate::{OsUpdateEnv, run};
use inplace_api::keys::OsUpdateExit;
use inplace_boot::{Esp as _, MemEsp};

const SERVER: &str = "http://images.lab/slots";

fn args(version: &str, server: &str) -> Vec<String> {
    ["--version", version, "--image-server", server]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

fn publish(source: &MemorySource, key: &SlotKeyPair, version: &str) {
    let kernel = format!("kernel {version}").into_bytes();
    let initrd = format!("initrd {version}").into_bytes();
    let boot = BootSpec {
        linux: "vmlinuz".into(),
        initrd: Some("initrd.img".into()),
        options: "quiet".into(),
    };
    let mut manifest = SlotManifest::describe(
        version,
        &[
            ("vmlinuz".into(), kernel.clone()),
            ("initrd.img".into(), initrd.clone()),
        ],
        boot,
    )
    .unwrap();
    manifest.sign(key.signing());
    source.put(version, "manifest.json", manifest.to_json());
    source.put(version, "vmlinuz", kernel);
    source.put(version, "initrd.img", initrd);
}

struct Fixture {
    esp: MemEsp,
    source: MemorySource,
    key: SlotKeyPair,
    env: OsUpdateEnv,
}

fn fixture() -> Fixture {
    let esp = MemEsp::new(16 << 20);
    let source = MemorySource::new();
    let key = SlotKeyPair::from_seed([5; 32]);
    publish(&source, &key, "2.0.0");
    let env = OsUpdateEnv {
        esp: Some(Arc::new(esp.clone())),
        source: Some(Arc::new(source.clone())),
        public_key: Some(key.public()),
        booted: Some(Arc::new(FixedBooted::new(LoaderHint::default()))),
    };
    Fixture {
        esp,
        source,
        key,
        env,
    }
}

async fn exit_of(argv: &[String], env: &OsUpdateEnv) -> (OsUpdateExit, String) {
    let mut out = Vec::new();
    let exit = run(argv, env, &mut out).await;
    (exit, String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn a_good_slot_is_installed_with_three_tries_and_the_entry_names_itself() {
    let f = fixture();
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::Success, "{out}");
    let conf =
        String::from_utf8(f.esp.read("loader/entries/rackproof-2.0.0+3.conf").unwrap()).unwrap();
    assert!(
        conf.contains("options quiet rackproof.entry=rackproof-2.0.0"),
        "{conf}"
    );
    assert!(conf.contains("version 2.0.0"), "{conf}");
    assert_eq!(
        f.esp.read("rackproof/rackproof-2.0.0.linux").unwrap(),
        b"kernel 2.0.0"
    );
}

#[tokio::test]
async fn invalid_arguments_exit_1() {
    let f = fixture();
    for argv in [
        vec!["--bogus".to_owned()],
        args("2 0", SERVER),
        args("2.0.0", "ftp://x"),
        vec!["--version".into(), "2.0.0".into()],
    ] {
        let (exit, out) = exit_of(&argv, &f.env).await;
        assert_eq!(exit, OsUpdateExit::InvalidArguments, "{argv:?}: {out}");
        assert!(out.contains("invalid arguments"), "{out}");
    }
    assert!(f.esp.paths().is_empty());
}

#[tokio::test]
async fn a_bad_signature_is_refused_with_exit_2_and_the_esp_unchanged() {
    let f = fixture();
    let other = SlotKeyPair::from_seed([6; 32]);
    publish(&f.source, &other, "2.0.0");
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(
        out.contains("system failure") && out.contains("not signed by the trusted key"),
        "{out}"
    );
    assert!(f.esp.paths().is_empty());
}

#[tokio::test]
async fn a_bad_checksum_is_refused_with_exit_2_and_the_esp_unchanged() {
    let f = fixture();
    f.source
        .put("2.0.0", "initrd.img", b"initrd 2.0.X".to_vec());
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(out.contains("sha256"), "{out}");
    assert!(f.esp.paths().is_empty());
    // A (validly signed) manifest for another version than asked for is refused too.
    publish(&f.source, &f.key, "3.0.0");
    let other = SlotManifest::parse(&fetch(&f.source, "3.0.0", "manifest.json").await).unwrap();
    f.source.put("2.0.0", "manifest.json", other.to_json());
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(out.contains("describes version \"3.0.0\""), "{out}");
    assert!(f.esp.paths().is_empty());
}

async fn fetch(source: &MemorySource, version: &str, name: &str) -> Vec<u8> {
    use inplace_agent::osupdate::source::{ArtifactSource as _, BodyLimit};
    source
        .fetch(SERVER, version, name, BodyLimit::AtMost(1 << 20))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_network_failure_mid_download_exits_3_and_leaves_the_esp_unchanged() {
    let f = fixture();
    f.source.fail_network("2.0.0", "initrd.img", 1);
    let before = f.esp.snapshot();
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::NetworkProblem, "{out}");
    assert!(out.contains("network problems"), "{out}");
    assert_eq!(f.esp.snapshot(), before);
    // The retry succeeds.
    let (exit, out) = exit_of(&args("2.0.0", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::Success, "{out}");
}

#[tokio::test]
async fn a_missing_version_exits_2() {
    let f = fixture();
    let (exit, out) = exit_of(&args("9.9.9", SERVER), &f.env).await;
    assert_eq!(exit, OsUpdateExit::SystemFailure, "{out}");
    assert!(out.contains("not found"), "{out}");
}

/// Serves the manifest completely, then cuts the connection in the middle of the kernel (whose
/// announced length is the signed one).
async fn truncating_server(manifest: Vec<u8>) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slots", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = vec![0u8; 4096];
            let n = socket.read(&mut request).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&request[..n])
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            if line.contains("manifest.json") {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    manifest.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&manifest).await;
            } else {
                // The signed size (12 bytes) is announced; 4 arrive before the connection ends.
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: close\r\n\r\nkern",
                    )
                    .await;
            }
            let _ = socket.shutdown().await;
        }
    });
    (url, task)
}

#[tokio::test]
async fn a_connection_cut_mid_download_over_http_exits_3_and_leaves_the_esp_unchanged() {
    let f = fixture();
    let key = SlotKeyPair::from_seed([5; 32]);
    let boot = BootSpec {
        linux: "vmlinuz".into(),
        initrd: None,
        options: String::new(),
    };
    let mut manifest = SlotManifest::describe(
        "2.0.0",
        &[("vmlinuz".into(), b"kernel 2.0.0".to_vec())],
        boot,
    )
    .unwrap();
    manifest.sign(key.signing());
    let (url, server) = truncating_server(manifest.to_json()).await;
    let env = OsUpdateEnv {
        source: None,
        ..f.env.clone()
    };
    let mut argv = args("2.0.0", &url);
    argv.extend(["--timeout".to_owned(), "20s".to_owned()]);
    let (exit, out) = tokio::time::timeout(Duration::from_secs(60), exit_of(&argv, &env))
        .await
        .unwrap();
    server.abort();
    assert_eq!(exit, OsUpdateExit::NetworkProblem, "{out}");
    assert!(f.esp.paths().is_empty());
}
