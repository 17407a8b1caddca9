//! `rackproof-ssh` against OpenSSH's sshd (the server on physical hosts), on 127.0.0.1.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::TestServer;
use rackproof_clock::Clock;
use rackproof_ssh::{Error, ExitStatus, HostKeyTrust, SshSession};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn runs_commands_with_exit_codes_and_both_streams() {
    let server = TestServer::openssh().await;
    let mut session = SshSession::connect(&server.target(), &Clock::wall())
        .await
        .unwrap();
    assert_eq!(session.host_key().trust, HostKeyTrust::Pinned);
    let output = session
        .run("echo out; echo err >&2; exit 3", LIMIT)
        .await
        .unwrap();
    assert_eq!(output.exit_status, ExitStatus::Code(3));
    assert_eq!(output.stdout_text(), "out\n");
    assert_eq!(output.stderr_text(), "err\n");
}

#[tokio::test]
async fn upload_then_download_round_trip() {
    let server = TestServer::openssh().await;
    let mut session = SshSession::connect(&server.target(), &Clock::wall())
        .await
        .unwrap();
    let data: Vec<u8> = (0..300_001u32).map(|i| (i % 253) as u8).collect();
    let local = server.path("local");
    std::fs::write(&local, &data).unwrap();
    let remote = server.path_text("remote");
    session.upload(&local, &remote, 0o755, LIMIT).await.unwrap();
    assert_eq!(
        std::fs::metadata(&remote).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    let back = server.path("back");
    session.download(&remote, &back, LIMIT).await.unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), data);
}

#[tokio::test]
async fn rsa_client_keys_authenticate() {
    let server = TestServer::openssh().await;
    let mut target = server.target();
    target.private_key = server.rsa_client_key.clone();
    let mut session = SshSession::connect(&target, &Clock::wall()).await.unwrap();
    assert_eq!(
        session.run("echo rsa", LIMIT).await.unwrap().stdout_text(),
        "rsa\n"
    );
}

#[tokio::test]
async fn host_key_mismatch_and_wrong_client_key_are_refused() {
    let server = TestServer::openssh().await;
    let mut target = server.target();
    target.host_key = Some(common::public_line(&server.rsa_client_key).parse().unwrap());
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::HostKeyMismatch { .. }), "{error}");

    let mut target = server.target();
    target.private_key = common::client_key(server.dir.path(), "stranger", "ed25519");
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::AuthRejected { .. }), "{error}");
}
