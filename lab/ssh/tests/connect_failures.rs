//! Connection failures that need no SSH server: refused ports, silent servers, bad keys and targets.

mod common;

use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_ssh::{Error, SshSession, SshTarget};

fn target_with_key(port: u16) -> (tempfile::TempDir, SshTarget) {
    let dir = tempfile::tempdir().unwrap();
    let key = common::client_key(dir.path(), "id", "ed25519");
    let mut target = SshTarget::new("127.0.0.1", "root", key);
    target.port = port;
    target.accept_unknown_host_key = true;
    (dir, target)
}

#[tokio::test]
async fn a_server_that_never_speaks_times_out_connecting() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(socket);
    });
    let (_dir, mut target) = target_with_key(port);
    target.connect_timeout = Duration::from_secs(1);
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    held.abort();
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("connect on 127.0.0.1:{port}: timed out after 1s")),
        "{message}"
    );
}

#[tokio::test]
async fn a_refused_connection_names_host_and_port() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let (_dir, target) = target_with_key(port);
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error}");
    assert_eq!(error.address(), format!("127.0.0.1:{port}"));
}

#[tokio::test]
async fn passphrase_protected_and_missing_keys_are_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked");
    let status = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "secret-passphrase",
            "-f",
            path.to_str().unwrap(),
        ])
        .status()
        .expect("ssh-keygen; install it with: apt-get install -y openssh-client");
    assert!(status.success());
    let mut target = SshTarget::new("127.0.0.1", "root", &path);
    target.port = 9; // never reached
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::EncryptedClientKey { .. }), "{error}");
    assert!(!error.to_string().contains("secret-passphrase"));

    target.private_key = dir.path().join("absent");
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::ClientKey { .. }), "{error}");
    assert!(error.to_string().contains("absent"), "{error}");
}

#[tokio::test]
async fn an_invalid_target_is_refused() {
    let mut target = SshTarget::new("", "root", "/k");
    target.port = 22;
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidTarget { .. }), "{error}");
    assert!(error.to_string().contains("host is empty"), "{error}");
}
