//! The image server as `rackproof-agent os-update`'s HTTP source sees it: per-node variants and
//! faults keyed on the node header, each fault classified the way the exit-code contract needs.

use std::time::Duration;

use inplace_agent::osupdate::MANIFEST_LIMIT;
use inplace_agent::osupdate::source::{ArtifactSource, BodyLimit, FetchError, HttpSource};
use rackproof_lab::image_server::{ImageFault, ImageServer, JOURNAL_CAPACITY};

async fn server() -> (tempfile::TempDir, ImageServer) {
    let dir = tempfile::tempdir().unwrap();
    for (slot, body) in [("1.1.0", "good"), ("1.1.0-panic", "panics")] {
        std::fs::create_dir_all(dir.path().join(slot)).unwrap();
        std::fs::write(
            dir.path().join(slot).join("manifest.json"),
            format!("{{\"slot\":\"{slot}\"}}"),
        )
        .unwrap();
        std::fs::write(dir.path().join(slot).join("vmlinuz"), body.repeat(100)).unwrap();
    }
    let server = ImageServer::serve(dir.path().to_owned(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (dir, server)
}

/// Any body up to 1 MiB (the files here are a few hundred bytes).
const ANY: BodyLimit = BodyLimit::AtMost(1 << 20);

fn source(node: &str) -> HttpSource {
    HttpSource::new(Duration::from_secs(2), Some(node))
}

#[tokio::test]
async fn each_node_gets_its_variant_and_its_faults() {
    let (_dir, server) = server().await;
    let base = server.url_as_seen_from("127.0.0.1");
    server.serve_variant("node-2", "1.1.0", "1.1.0-panic");
    let good = source("node-1")
        .fetch(&base, "1.1.0", "vmlinuz", ANY)
        .await
        .unwrap();
    let broken = source("node-2")
        .fetch(&base, "1.1.0", "vmlinuz", ANY)
        .await
        .unwrap();
    assert_eq!(good, "good".repeat(100).into_bytes());
    assert_eq!(broken, "panics".repeat(100).into_bytes());

    server.add_fault("node-1", ImageFault::Status(503), Some(1));
    server.add_fault("node-1", ImageFault::Unreachable, Some(1));
    let node1 = source("node-1");
    assert!(
        matches!(node1.fetch(&base, "1.1.0", "vmlinuz", ANY).await, Err(FetchError::Network { detail, .. }) if detail.contains("503"))
    );
    assert!(matches!(
        node1.fetch(&base, "1.1.0", "vmlinuz", ANY).await,
        Err(FetchError::Network { .. })
    ));
    assert_eq!(
        node1.fetch(&base, "1.1.0", "vmlinuz", ANY).await.unwrap(),
        good,
        "the counts ran out"
    );

    server.add_fault("node-1", ImageFault::Corrupt, None);
    assert!(
        node1
            .fetch(&base, "1.1.0", "manifest.json", ANY)
            .await
            .is_ok()
    );
    let corrupt = node1.fetch(&base, "1.1.0", "vmlinuz", ANY).await.unwrap();
    assert_eq!(corrupt.len(), good.len());
    assert_ne!(corrupt, good);
    server.add_fault("node-3", ImageFault::Status(403), None);
    assert!(matches!(
        source("node-3").fetch(&base, "1.1.0", "vmlinuz", ANY).await,
        Err(FetchError::Refused { status: 403, .. })
    ));
    assert!(matches!(
        source("node-4").fetch(&base, "9.9.9", "vmlinuz", ANY).await,
        Err(FetchError::NotFound { .. })
    ));

    let journal = server.journal();
    assert_eq!(journal.len(), 9);
    assert_eq!(journal[1].node.as_deref(), Some("node-2"));
    assert_eq!(journal[2].answer, "fault: HTTP 503");
}

#[tokio::test]
async fn a_stalled_download_never_completes_and_is_announced() {
    let (_dir, server) = server().await;
    let base = server.url_as_seen_from("127.0.0.1");
    let mut events = server.subscribe();
    server.stall_next_payload("node-1");
    let client = HttpSource::new(Duration::from_millis(500), Some("node-1"));
    assert!(
        client
            .fetch(&base, "1.1.0", "manifest.json", ANY)
            .await
            .is_ok(),
        "manifests never stall"
    );
    assert!(matches!(
        client.fetch(&base, "1.1.0", "vmlinuz", ANY).await,
        Err(FetchError::Network { .. })
    ));
    assert_eq!(events.recv().await.unwrap().file, "manifest.json");
    let stalled = events.recv().await.unwrap();
    assert_eq!(stalled.answer, "stalled after 200 of 400 bytes");
    assert!(
        client.fetch(&base, "1.1.0", "vmlinuz", ANY).await.is_ok(),
        "only the next download stalls"
    );
}

#[tokio::test]
async fn the_journal_keeps_the_last_requests_and_counts_the_rest() {
    let (_dir, server) = server().await;
    let base = server.url_as_seen_from("127.0.0.1");
    let client = source("node-1");
    let total = JOURNAL_CAPACITY + 100;
    for _ in 0..total {
        assert!(matches!(
            client.fetch(&base, "9.9.9", "vmlinuz", ANY).await,
            Err(FetchError::NotFound { .. })
        ));
    }
    client.fetch(&base, "1.1.0", "vmlinuz", ANY).await.unwrap();
    let journal = server.journal();
    assert_eq!(journal.len(), JOURNAL_CAPACITY);
    assert_eq!(server.journal_dropped(), 101);
    assert_eq!(journal.last().unwrap().answer, "200 (400 bytes)");
}

#[tokio::test]
async fn a_one_mib_manifest_is_refused_by_the_agent_at_its_cap() {
    let (dir, server) = server().await;
    std::fs::write(dir.path().join("1.1.0/manifest.json"), vec![b' '; 1 << 20]).unwrap();
    let base = server.url_as_seen_from("127.0.0.1");
    let err = source("node-1")
        .fetch(
            &base,
            "1.1.0",
            "manifest.json",
            BodyLimit::AtMost(MANIFEST_LIMIT),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::TooLong { limit: 65536, url, .. } if url.ends_with("/1.1.0/manifest.json")),
        "{err}"
    );
    assert!(err.to_string().contains("65536 bytes"), "{err}");
}

#[tokio::test]
async fn a_file_is_streamed_whole_and_its_faults_apply_across_chunks() {
    let (dir, server) = server().await;
    // Several of the server's 64 KiB chunks, not a multiple of them.
    let big: Vec<u8> = (0..300_001u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("1.1.0/vmlinuz"), &big).unwrap();
    let base = server.url_as_seen_from("127.0.0.1");
    let exact = BodyLimit::Exactly(big.len() as u64);
    assert_eq!(
        source("node-1")
            .fetch(&base, "1.1.0", "vmlinuz", exact)
            .await
            .unwrap(),
        big
    );
    server.add_fault("node-1", ImageFault::Corrupt, Some(1));
    let corrupt = source("node-1")
        .fetch(&base, "1.1.0", "vmlinuz", exact)
        .await
        .unwrap();
    let differing: Vec<usize> = (0..big.len()).filter(|&i| corrupt[i] != big[i]).collect();
    assert_eq!(differing, vec![big.len() / 2]);
    let mut events = server.subscribe();
    server.stall_next_payload("node-1");
    let stalled = HttpSource::new(Duration::from_millis(500), Some("node-1"));
    assert!(matches!(
        stalled.fetch(&base, "1.1.0", "vmlinuz", exact).await,
        Err(FetchError::Network { .. })
    ));
    assert_eq!(
        events.recv().await.unwrap().answer,
        "stalled after 150000 of 300001 bytes"
    );
}
