//! `rackproof-ssh` against Debian's dropbear (the server in the node images), on 127.0.0.1.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::TestServer;
use rackproof_clock::Clock;
use rackproof_ssh::{Error, ExitStatus, HostKeyTrust, SshSession};

const LIMIT: Duration = Duration::from_secs(30);

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

async fn connect(server: &TestServer) -> SshSession {
    SshSession::connect(&server.target(), &Clock::wall())
        .await
        .expect("connect")
}

#[tokio::test]
async fn runs_a_command_and_returns_exit_code_stdout_and_stderr() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    assert_eq!(session.host_key().trust, HostKeyTrust::Pinned);
    let output = session
        .run("echo out; echo err >&2; exit 0", LIMIT)
        .await
        .unwrap();
    assert_eq!(output.exit_status, ExitStatus::Code(0));
    assert_eq!(output.stdout_text(), "out\n");
    assert_eq!(output.stderr_text(), "err\n");
    session.close().await.unwrap();
}

#[tokio::test]
async fn non_zero_exit_and_signals_are_outputs_not_errors() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let output = session.run("echo partial; exit 7", LIMIT).await.unwrap();
    assert_eq!(output.exit_status, ExitStatus::Code(7));
    assert!(!output.exit_status.success());
    assert_eq!(output.stdout_text(), "partial\n");
    let killed = session.run("kill -KILL $$", LIMIT).await.unwrap();
    assert_eq!(killed.exit_status, ExitStatus::Signal("KILL".into()));
    // The same session keeps working.
    assert_eq!(
        session.run("true", LIMIT).await.unwrap().exit_status,
        ExitStatus::Code(0)
    );
}

#[tokio::test]
async fn stdin_is_empty_so_commands_reading_it_finish() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let output = session.run("cat; echo done", LIMIT).await.unwrap();
    assert_eq!(output.stdout_text(), "done\n");
}

#[tokio::test]
async fn upload_then_download_round_trip_keeps_bytes_and_sets_mode() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let data = pattern(700 * 1024 + 13);
    let local = server.path("local.bin");
    std::fs::write(&local, &data).unwrap();
    let remote = server.path_text("remote file's name.bin");

    let sent = session.upload(&local, &remote, 0o640, LIMIT).await.unwrap();
    assert_eq!(sent, data.len() as u64);
    let mode = std::fs::metadata(&remote).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    let stat = session
        .run(
            &format!("stat -c %a '{}'", remote.replace('\'', "'\\''")),
            LIMIT,
        )
        .await
        .unwrap();
    assert_eq!(stat.stdout_text().trim(), "640");

    let back = server.path("back.bin");
    let received = session.download(&remote, &back, LIMIT).await.unwrap();
    assert_eq!(received, data.len() as u64);
    assert_eq!(std::fs::read(&back).unwrap(), data);
    assert!(!server.path(".back.bin.rackproof-download").exists());
    assert!(
        !server
            .path("remote file's name.bin.rackproof-upload")
            .exists()
    );

    // An empty file round-trips too, and an upload replaces the old content.
    std::fs::write(&local, b"").unwrap();
    session.upload(&local, &remote, 0o600, LIMIT).await.unwrap();
    assert_eq!(session.download(&remote, &back, LIMIT).await.unwrap(), 0);
    assert_eq!(std::fs::read(&back).unwrap(), b"");
}

#[tokio::test]
async fn short_upload_leaves_the_old_file_in_place() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let remote = server.path_text("config");
    std::fs::write(&remote, b"old content\n").unwrap();

    // The source ends after 100 000 of the announced 200 000 bytes: the node receives a short
    // stream (what a dropped connection also delivers to `cat`) and must not rename it into place.
    let data = pattern(100_000);
    let error = session
        .upload_from(&data[..], 200_000, &remote, 0o644, LIMIT)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::ShortUpload {
                sent: 100_000,
                expected: 200_000,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(std::fs::read(&remote).unwrap(), b"old content\n");
    assert!(
        !server.path("config.rackproof-upload").exists(),
        "the temp file was left behind"
    );
}

#[tokio::test]
async fn upload_into_a_missing_directory_fails_with_the_remote_message() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let local = server.path("local");
    std::fs::write(&local, b"x").unwrap();
    let remote = server.path_text("no/such/dir/file");
    let error = session
        .upload(&local, &remote, 0o644, LIMIT)
        .await
        .unwrap_err();
    let Error::RemoteFailed { stderr, .. } = &error else {
        panic!("unexpected error: {error}")
    };
    assert!(stderr.contains("no/such/dir"), "{stderr}");
}

#[tokio::test]
async fn upload_is_retried_on_a_new_connection_after_a_drop() {
    let server = TestServer::dropbear().await;
    server.cut_next_connection_after(300 * 1024);
    let mut session = connect(&server).await;
    let data = pattern(1024 * 1024);
    let local = server.path("big");
    std::fs::write(&local, &data).unwrap();
    let remote = server.path_text("big.remote");
    std::fs::write(&remote, b"old").unwrap();
    session.upload(&local, &remote, 0o644, LIMIT).await.unwrap();
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_eq!(session.connections(), 2);
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn download_is_retried_on_a_new_connection_after_a_drop() {
    let server = TestServer::dropbear().await;
    let data = pattern(1024 * 1024);
    let remote = server.path_text("log");
    std::fs::write(&remote, &data).unwrap();
    server.cut_next_connection_after(300 * 1024);
    let mut session = connect(&server).await;
    let local = server.path("log.copy");
    assert_eq!(
        session.download(&remote, &local, LIMIT).await.unwrap(),
        data.len() as u64
    );
    assert_eq!(std::fs::read(&local).unwrap(), data);
    assert_eq!(session.connections(), 2);
}

#[tokio::test]
async fn a_sent_command_is_not_run_again_after_the_connection_drops() {
    let server = TestServer::dropbear().await;
    server.cut_next_connection_after(300 * 1024);
    let mut session = connect(&server).await;
    let counter = server.path_text("counter");
    let command = format!("echo ran >> {counter}; head -c 2000000 /dev/zero");
    let error = session.run(&command, LIMIT).await.unwrap_err();
    assert!(matches!(error, Error::ConnectionLost { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("127.0.0.1:{}", server.port)),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "ran\n");
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn an_idle_dropped_connection_is_reestablished_before_a_command() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    server.drop_connections();
    // Idle: the client notices the close before the next command is given.
    tokio::time::timeout(LIMIT, async {
        while session.is_connected() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the client notices the dropped connection");
    let output = session.run("echo again", LIMIT).await.unwrap();
    assert_eq!(output.stdout_text(), "again\n");
    assert_eq!(session.connections(), 2);
}

#[tokio::test]
async fn collect_logs_copies_present_files_and_lists_missing_ones() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    std::fs::create_dir_all(server.path("var/log")).unwrap();
    std::fs::write(server.path("var/log/messages"), b"boot ok\n").unwrap();
    std::fs::write(server.path("var/log/agent.log"), pattern(50_000)).unwrap();
    let dest = server.path("artifacts");
    let paths = [
        server.path_text("var/log/messages"),
        server.path_text("var/log/missing.log"),
        server.path_text("var/log/agent.log"),
        server.path_text("var/log"),
    ];
    let logs = session.collect_logs(&paths, &dest, LIMIT).await.unwrap();
    assert_eq!(logs.collected.len(), 2);
    assert_eq!(logs.collected[0].remote, paths[0]);
    assert_eq!(
        std::fs::read(&logs.collected[0].local).unwrap(),
        b"boot ok\n"
    );
    assert!(logs.collected[0].local.starts_with(&dest));
    assert_eq!(logs.collected[1].bytes, 50_000);
    assert_eq!(
        std::fs::read(&logs.collected[1].local).unwrap(),
        pattern(50_000)
    );
    let missing: Vec<_> = logs.missing.iter().map(|m| m.remote.as_str()).collect();
    assert_eq!(missing, [paths[1].as_str(), paths[3].as_str()]);
    assert!(
        logs.missing[1].reason.contains("directory"),
        "{}",
        logs.missing[1].reason
    );
}

#[tokio::test]
async fn download_of_a_missing_file_fails_and_leaves_nothing_locally() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let local = server.path("copy");
    let error = session
        .download(&server.path_text("absent"), &local, LIMIT)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::RemoteFailed { .. }), "{error}");
    assert!(error.to_string().contains("download"), "{error}");
    assert!(!local.exists());
    assert!(!server.path(".copy.rackproof-download").exists());
}

#[tokio::test]
async fn host_key_mismatch_is_refused_with_both_fingerprints() {
    let server = TestServer::dropbear().await;
    let mut target = server.target();
    let other = common::public_line(&server.client_key);
    target.host_key = Some(other.parse().unwrap());
    let expected = target.host_key.as_ref().unwrap().fingerprint().to_string();
    let presented = server
        .host_key
        .parse::<rackproof_ssh::HostKeyPin>()
        .unwrap()
        .fingerprint()
        .to_string();
    target.accept_unknown_host_key = true; // must not override a pin
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::HostKeyMismatch { .. }), "{message}");
    assert!(
        message.contains(&expected) && message.contains(&presented),
        "{message}"
    );
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port)),
        "{message}"
    );
}

#[tokio::test]
async fn unknown_host_key_is_refused_by_default() {
    let server = TestServer::dropbear().await;
    let mut target = server.target();
    target.host_key = None;
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    let Error::UnknownHostKey {
        presented,
        public_key,
        ..
    } = &error
    else {
        panic!("unexpected: {error}")
    };
    let pin: rackproof_ssh::HostKeyPin = server.host_key.parse().unwrap();
    assert_eq!(*presented, pin.fingerprint().to_string());
    assert_eq!(*public_key, server.host_key);
    assert!(error.to_string().contains("not pinned"), "{error}");
}

#[tokio::test]
async fn unknown_host_key_is_accepted_on_request_and_returned_for_pinning() {
    let server = TestServer::dropbear().await;
    let mut target = server.target();
    target.host_key = None;
    target.accept_unknown_host_key = true;
    let session = SshSession::connect(&target, &Clock::wall()).await.unwrap();
    let seen = session.host_key().clone();
    assert_eq!(seen.trust, HostKeyTrust::AcceptedUnknown);
    assert_eq!(seen.openssh_line(), server.host_key);

    target.accept_unknown_host_key = false;
    target.host_key = Some(seen.pin());
    let pinned = SshSession::connect(&target, &Clock::wall()).await.unwrap();
    assert_eq!(pinned.host_key().trust, HostKeyTrust::Pinned);
}

#[tokio::test]
async fn wrong_client_key_is_refused_without_leaking_it() {
    let server = TestServer::dropbear().await;
    let stranger = common::client_key(server.dir.path(), "stranger", "ed25519");
    let mut target = server.target();
    target.private_key = stranger.clone();
    let error = SshSession::connect(&target, &Clock::wall())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::AuthRejected { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("stranger") && message.contains(&format!("127.0.0.1:{}", server.port)),
        "{message}"
    );
    let secret = std::fs::read_to_string(&stranger).unwrap();
    let public = common::public_line(&stranger);
    let key_base64 = public.split_whitespace().nth(1).unwrap();
    let debug = format!("{error:?}");
    for line in secret.lines().filter(|l| !l.starts_with("-----")) {
        assert!(
            !message.contains(line) && !debug.contains(line),
            "the error leaks the private key"
        );
    }
    assert!(
        !debug.contains(key_base64),
        "the error carries key material"
    );
}

#[tokio::test]
async fn rsa_client_keys_authenticate() {
    let server = TestServer::dropbear().await;
    let mut target = server.target();
    target.private_key = server.rsa_client_key.clone();
    let mut session = SshSession::connect(&target, &Clock::wall()).await.unwrap();
    assert_eq!(
        session.run("echo rsa", LIMIT).await.unwrap().stdout_text(),
        "rsa\n"
    );
}

#[tokio::test]
async fn a_command_past_its_limit_times_out_naming_host_and_operation() {
    let server = TestServer::dropbear().await;
    let mut session = connect(&server).await;
    let error = session
        .run("sleep 60", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("sleep 60") && message.contains(&format!("127.0.0.1:{}", server.port)),
        "{message}"
    );
    assert!(message.contains("1s"), "{message}");
    // The session is still usable afterwards.
    assert_eq!(
        session
            .run("echo alive", LIMIT)
            .await
            .unwrap()
            .stdout_text(),
        "alive\n"
    );
}
