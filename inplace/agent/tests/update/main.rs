//! The agent against the embedded API server in virtual time, on a simulated machine (see
//! `common`): the GEP-31 flows end to end.

mod beside_the_kubelet;
#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::{NODE, SECRET, Sim, annotation, label, osc};
use inplace_api::keys;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn happy_path_updates_the_os_reboots_blesses_and_reports_success() {
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.add_pod("daemon").await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    // Nothing happens before ReadyForUpdate.
    sim.wait_for(|_| false, Duration::from_secs(120)).await;
    assert!(sim.attempts().is_empty());
    assert_eq!(sim.reboots, 0);
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL),
        "{:?}",
        node.metadata.annotations
    );
    assert_eq!(
        annotation(&node, keys::ANNOTATION_UPDATING_OS_VERSION),
        None
    );
    assert_eq!(
        annotation(&node, inplace_agent::heartbeat::ANNOTATION_OS_VERSION),
        Some("2.0.0")
    );
    assert!(annotation(&node, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).is_some());
    assert_eq!(sim.attempts(), vec![1]);
    assert_eq!(sim.reboots, 1);
    assert_eq!(
        sim.entries(),
        vec!["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"],
        "the new entry is blessed"
    );
    assert_eq!(sim.files.get("/etc/motd"), Some(b"os 2.0.0\n".to_vec()));
    let info = node.status.unwrap().node_info.unwrap();
    assert_eq!(info.os_image, "Rackproof 2.0.0");
    sim.wait_for(|_| false, Duration::from_secs(60)).await;
    assert!(
        sim.pod("daemon").await.is_none(),
        "pods left on the node are deleted (and their deletion completed)"
    );
}

/// Like gardener-node-agent reading its controller-runtime cache, the running agent reads its
/// Node and its pool's OSC Secret from its watches: a whole update, with resyncs before and
/// after, never GETs the Secret, and the Node only to read past its own writes.
#[tokio::test(start_paused = true)]
async fn the_running_agent_reads_its_node_and_osc_from_its_watches() {
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.wait_for(|_| false, Duration::from_secs(300)).await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL)
    );
    sim.wait_for(|_| false, Duration::from_secs(300)).await;
    let requests = sim.requests.lock().unwrap().clone();
    let watches = |path: &str| {
        requests
            .iter()
            .filter(|r| r.starts_with(&format!("GET {path}?")) && r.contains("watch=true"))
            .count()
    };
    assert!(
        watches("/api/v1/nodes") > 0 && watches("/api/v1/namespaces/kube-system/secrets") > 0,
        "the agent follows both: {requests:#?}"
    );
    let count = |request: &str| requests.iter().filter(|r| *r == request).count();
    assert_eq!(
        count(&format!(
            "GET /api/v1/namespaces/kube-system/secrets/{SECRET}"
        )),
        0,
        "{requests:#?}"
    );
    // The heartbeat reads the Node once per boot (to register it if missing), and a pass reads it
    // when the watch may not show the agent's own last write yet; never once per pass.
    let node_reads = count(&format!("GET /api/v1/nodes/{NODE}"));
    let node_patches = count(&format!("PATCH /api/v1/nodes/{NODE}?"));
    assert!(
        node_reads <= 2 + node_patches,
        "{node_reads} reads of the Node, {node_patches} patches: {requests:#?}"
    );
}

/// The agent starts before its node is registered, when the Node authorizer does not let it
/// watch its pool's Secret yet; it retries soon, so the first OSC is applied moments after the
/// heartbeat registers the node, not a whole poll interval later.
#[tokio::test(start_paused = true)]
async fn the_first_osc_is_applied_moments_after_the_node_registers() {
    let mut sim = Sim::new().await;
    let started = sim.clock.instant();
    sim.start().await;
    let took = sim.clock.since(started);
    assert!(
        took < sim.config.poll_interval / 2,
        "the initial OSC took {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retriable_failure_is_retried_then_succeeds() {
    let mut sim = Sim::new().await;
    sim.runner.script.lock().unwrap().extend([3, 3]);
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL)
    );
    assert_eq!(sim.attempts(), vec![1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn retriable_failures_turn_non_retriable_after_the_budget() {
    let mut sim = Sim::new().await;
    sim.config.os_update_max_attempts = 3;
    sim.runner.script.lock().unwrap().extend([3, 3, 3, 3]);
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_FAILED)
    );
    let reason = annotation(&node, keys::ANNOTATION_UPDATE_FAILED_REASON).unwrap();
    assert!(
        reason.contains("after 3 attempts") && reason.contains("network problem"),
        "{reason}"
    );
    assert_eq!(sim.attempts(), vec![1, 2, 3]);
    assert_eq!(sim.reboots, 0);
    assert_eq!(sim.entries(), vec!["rackproof-1.0.0.conf"]);
}

#[tokio::test(start_paused = true)]
async fn non_retriable_exit_codes_fail_at_once() {
    for (code, words) in [
        (1, "invalid arguments"),
        (2, "system failure"),
        (7, "unspecified"),
    ] {
        let mut sim = Sim::new().await;
        sim.runner.script.lock().unwrap().push_back(code);
        sim.start().await;
        sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
        sim.ready_for_update().await;
        let node = sim.wait_result(LIMIT).await;
        assert_eq!(
            label(&node, keys::LABEL_UPDATE_RESULT),
            Some(keys::UPDATE_RESULT_FAILED)
        );
        let reason = annotation(&node, keys::ANNOTATION_UPDATE_FAILED_REASON).unwrap();
        assert!(
            reason.contains("non-retriable") && reason.contains(words),
            "exit {code}: {reason}"
        );
        assert_eq!(sim.attempts(), vec![1], "exit {code}");
        assert_eq!(
            annotation(&node, keys::ANNOTATION_UPDATING_OS_VERSION),
            Some("2.0.0")
        );
        assert_eq!(sim.reboots, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_boot_into_the_old_slot_is_reported_as_a_rollback_naming_both_versions() {
    let mut sim = Sim::new().await;
    sim.broken.insert("2.0.0".into());
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_FAILED)
    );
    let reason = annotation(&node, keys::ANNOTATION_UPDATE_FAILED_REASON).unwrap();
    assert!(
        reason.contains("rolled back") && reason.contains("2.0.0") && reason.contains("1.0.0"),
        "{reason}"
    );
    // systemd-boot tried the new entry three times, then fell back.
    assert_eq!(sim.boots, vec!["1.0.0", "2.0.0", "2.0.0", "2.0.0", "1.0.0"]);
    assert_eq!(
        sim.entries(),
        vec!["rackproof-1.0.0.conf", "rackproof-2.0.0+0-3.conf"]
    );
    assert_eq!(
        sim.attempts(),
        vec![1],
        "the OS update is not run again after a rollback"
    );
}

#[tokio::test(start_paused = true)]
async fn a_kubelet_minor_update_needs_no_os_update_and_no_reboot() {
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.set_osc(&osc("1.0.0", "1.31.0", None, None)).await;
    sim.wait_for(|_| false, Duration::from_secs(60)).await;
    assert_eq!(
        sim.kubelet.state().version.as_deref(),
        Some("1.30.4"),
        "a minor version waits for the drain"
    );
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL)
    );
    assert_eq!(sim.kubelet.state().version.as_deref(), Some("1.31.0"));
    assert_eq!(
        node.status.unwrap().node_info.unwrap().kubelet_version,
        "1.31.0"
    );
    assert!(sim.attempts().is_empty());
    assert_eq!(sim.reboots, 0);
}

#[tokio::test(start_paused = true)]
async fn a_credentials_rotation_rebootstraps_and_refreshes_tokens_without_reboot() {
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.set_osc(&osc(
        "1.0.0",
        "1.30.4",
        Some("2025-01-01T00:10:00Z"),
        Some("2025-01-01T00:10:00Z"),
    ))
    .await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL)
    );
    assert_eq!(sim.kubelet.state().rebootstraps, 1);
    assert_eq!(
        sim.files.get("/var/lib/rackproof/token"),
        Some(b"token-1".to_vec())
    );
    assert!(sim.attempts().is_empty());
    assert_eq!(sim.reboots, 0);
}

#[tokio::test(start_paused = true)]
async fn a_kubelet_patch_version_is_applied_without_waiting_for_ready_for_update() {
    let mut sim = Sim::new().await;
    sim.start().await;
    let before = sim.node().await.unwrap();
    let old_checksum =
        annotation(&before, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned);
    sim.set_osc(&osc("1.0.0", "1.30.5", None, None)).await;
    let node = sim
        .wait_for(
            |n| {
                n.is_some_and(|n| {
                    annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned)
                        != old_checksum
                })
            },
            LIMIT,
        )
        .await
        .unwrap();
    assert_eq!(sim.kubelet.state().version.as_deref(), Some("1.30.5"));
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        None,
        "no in-place update result for a change without drain"
    );
    assert!(sim.attempts().is_empty());
    assert_eq!(sim.reboots, 0);
    assert_eq!(node.metadata.name.as_deref(), Some(NODE));
}

/// Writes of the agent state in one clean update, for the crash test.
async fn clean_run_writes() -> u64 {
    let mut sim = Sim::new().await;
    sim.start().await;
    let before = sim.writes.load(std::sync::atomic::Ordering::SeqCst);
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    sim.wait_result(LIMIT).await;
    sim.writes.load(std::sync::atomic::Ordering::SeqCst) - before
}

/// An update whose agent crashes after its `crash_at`-th state write (tearing that write when
/// `tear`) and restarts; run until the result and the restarted agent settled. The node after.
async fn update_crashing_after(
    crash_at: u64,
    tear: bool,
) -> (Sim, k8s_openapi::api::core::v1::Node) {
    let mut sim = Sim::new().await;
    sim.tear_on_crash = tear;
    sim.start().await;
    let base = sim.writes.load(std::sync::atomic::Ordering::SeqCst);
    *sim.crash_after.lock().unwrap() = Some(base + crash_at);
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    sim.wait_result(LIMIT).await;
    // Let a crash that comes after the result happen too, and the restarted agent settle.
    let node = sim
        .wait_for(|_| false, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL),
        "crash after write {crash_at} (torn: {tear}): {:?}",
        annotation(&node, keys::ANNOTATION_UPDATE_FAILED_REASON)
    );
    (sim, node)
}

#[tokio::test(start_paused = true)]
async fn a_restart_at_every_step_reaches_the_same_result_and_never_reruns_an_attempt() {
    let writes = clean_run_writes().await;
    assert!(
        writes >= 6,
        "a clean update writes its state at every step ({writes})"
    );
    for crash_at in 1..=writes {
        let (sim, _) = update_crashing_after(crash_at, false).await;
        assert_eq!(sim.restarts, 1, "crash after write {crash_at}");
        let state: serde_json::Value =
            serde_json::from_slice(&sim.store.snapshot()["agent-state.json"]).unwrap();
        assert!(
            state.get("plan").is_none(),
            "crash after write {crash_at}: the plan is complete: {state}"
        );
        assert_eq!(sim.reboots, 1, "crash after write {crash_at}");
        let attempts = sim.attempts();
        let mut unique = attempts.clone();
        unique.dedup();
        assert_eq!(
            attempts, unique,
            "crash after write {crash_at}: an attempt ran twice"
        );
        assert!(
            attempts.len() <= 2,
            "crash after write {crash_at}: {attempts:?}"
        );
        assert_eq!(
            sim.entries(),
            vec!["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"],
            "crash after write {crash_at}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_state_write_torn_at_any_step_is_set_aside_and_the_update_still_succeeds() {
    let writes = clean_run_writes().await;
    for crash_at in 1..=writes {
        let (sim, _) = update_crashing_after(crash_at, true).await;
        let stored = sim.store.snapshot();
        let torn = stored
            .get(inplace_agent::state::CORRUPT_KEY)
            .unwrap_or_else(|| panic!("torn write {crash_at}: the torn document is kept"));
        assert!(
            serde_json::from_slice::<serde_json::Value>(torn).is_err(),
            "torn write {crash_at}: what is kept is the torn document"
        );
        let state: serde_json::Value =
            serde_json::from_slice(&stored[inplace_agent::state::STATE_KEY]).unwrap();
        assert!(
            state.get("plan").is_none(),
            "torn write {crash_at}: the plan is complete: {state}"
        );
        assert!(
            sim.reboots <= 2,
            "torn write {crash_at}: {} reboots",
            sim.reboots
        );
        assert_eq!(
            sim.entries(),
            vec!["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"],
            "torn write {crash_at}: the new entry is blessed"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn reservations_moved_with_an_unchanged_sum_reach_the_kubelet_without_a_drain() {
    use inplace_api::crd::Reserved;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let reserved = |cpu: &str| {
        Some(Reserved {
            cpu: Some(Quantity(cpu.to_owned())),
            ..Reserved::default()
        })
    };
    let with_reservations = |kube: &str, system: &str| {
        let mut osc = osc("1.0.0", "1.30.4", None, None);
        let kubelet = &mut osc.spec.in_place_updates.as_mut().unwrap().kubelet;
        kubelet.kube_reserved = reserved(kube);
        kubelet.system_reserved = reserved(system);
        osc
    };
    let mut sim = Sim::new().await;
    sim.start().await;
    // A new sum is an in-place update with a drain.
    sim.set_osc(&with_reservations("100m", "100m")).await;
    sim.ready_for_update().await;
    let node = sim.wait_result(LIMIT).await;
    assert_eq!(
        label(&node, keys::LABEL_UPDATE_RESULT),
        Some(keys::UPDATE_RESULT_SUCCESSFUL)
    );
    let restarts = sim.kubelet.state().restarts;
    let applied = annotation(&node, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned);

    // The same sum split differently: no drain, but the kubelet runs the new values.
    sim.set_osc(&with_reservations("150m", "50m")).await;
    sim.wait_for(
        |n| {
            n.is_some_and(|n| {
                annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned) != applied
            })
        },
        LIMIT,
    )
    .await
    .unwrap();
    let kubelet = sim.kubelet.state();
    let config: serde_json::Value =
        serde_json::from_str(kubelet.config.as_deref().unwrap()).unwrap();
    assert_eq!(
        (
            config["kubeReserved"]["cpu"].as_str(),
            config["systemReserved"]["cpu"].as_str()
        ),
        (Some("150m"), Some("50m")),
        "{config}"
    );
    assert_eq!(kubelet.restarts, restarts + 1, "the kubelet restarted once");
    assert!(sim.attempts().is_empty());
    assert_eq!(sim.reboots, 0);
}

/// Issue 27, bug 2: an update that needs no drain fails (a file write); a person removes the
/// failed mark. No `ReadyForUpdate` comes for a change without drain, so the agent carries the
/// same plan out again at once.
#[tokio::test(start_paused = true)]
async fn a_failed_update_without_drain_is_carried_out_again_once_the_mark_is_removed() {
    let mut sim = Sim::new().await;
    sim.start().await;
    let before = sim.node().await.unwrap();
    let old_checksum =
        annotation(&before, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned);
    sim.files.refuse_writes(true);
    let mut changed = osc("1.0.0", "1.30.4", None, None);
    changed.spec.files = vec![inplace_api::osc::File::inline(
        "/etc/motd",
        Some(0o644),
        b"changed\n",
    )];
    sim.set_osc(&changed).await;
    let failed = sim
        .wait_for(
            |n| n.is_some_and(|n| label(n, keys::LABEL_UPDATE_RESULT) == Some("failed")),
            LIMIT,
        )
        .await
        .unwrap();
    assert_eq!(label(&failed, keys::LABEL_UPDATE_RESULT), Some("failed"));
    sim.files.refuse_writes(false);

    // A person removes the failed mark; nothing else changes on the node.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(sim.client.clone());
    let unmark = serde_json::json!({"metadata": {
        "labels": {keys::LABEL_UPDATE_RESULT: null},
        "annotations": {keys::ANNOTATION_UPDATE_FAILED_REASON: null},
    }});
    nodes
        .patch(
            NODE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&unmark),
        )
        .await
        .unwrap();
    let node = sim
        .wait_for(
            |n| {
                n.is_some_and(|n| {
                    annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned)
                        != old_checksum
                })
            },
            LIMIT,
        )
        .await
        .unwrap();
    assert_ne!(
        annotation(&node, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).map(str::to_owned),
        old_checksum,
        "the update was carried out after the mark was removed"
    );
    assert_eq!(
        sim.files.get("/etc/motd").as_deref(),
        Some(&b"changed\n"[..])
    );
    assert_eq!(label(&node, keys::LABEL_UPDATE_RESULT), None);
}

// Where the agent writes its state: every write of one update, in order, named by the fields it
// changed. Crash safety rests on these points (`inplace_agent::state`), so a change that moves,
// drops or doubles a write shows up here, not only as a rare crash.

/// The leaf paths whose values differ between `before` and `after` (objects compared field by
/// field, anything else as a whole).
fn changed(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                let null = Value::Null;
                changed(
                    b.get(key).unwrap_or(&null),
                    a.get(key).unwrap_or(&null),
                    &format!("{path}/{key}"),
                    out,
                );
            }
        }
        (b, a) if b != a => out.push(path.to_owned()),
        _ => {}
    }
}

/// The writes of an update to OS 2.0.0 with `exits` as the OS-update command's exit codes
/// (0 when the script runs out) and at most `max_attempts` runs: each write as the paths it
/// changed, an object replaced or removed as a whole as one path.
async fn writes_of_update(exits: &[i32], max_attempts: u32) -> Vec<String> {
    let mut sim = Sim::new().await;
    sim.config.os_update_max_attempts = max_attempts;
    sim.runner
        .script
        .lock()
        .unwrap()
        .extend(exits.iter().copied());
    sim.start().await;
    let before = sim.saved.lock().unwrap().len();
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    sim.wait_result(LIMIT).await;
    sim.wait_for(|_| false, Duration::from_secs(120)).await;
    let saved = sim.saved.lock().unwrap().clone();
    let mut previous = match before {
        0 => Value::Object(serde_json::Map::new()),
        n => serde_json::from_slice(&saved[n - 1]).unwrap(),
    };
    let mut writes = Vec::new();
    for document in &saved[before..] {
        let document: Value = serde_json::from_slice(document).unwrap();
        let mut paths = Vec::new();
        // A plan that appears or goes is one change, not one per field.
        match (previous.get("plan"), document.get("plan")) {
            (Some(_), Some(_)) => changed(&previous, &document, "", &mut paths),
            _ => {
                let (mut b, mut a) = (previous.clone(), document.clone());
                for v in [&mut b, &mut a] {
                    if let Some(plan) = v.get_mut("plan") {
                        *plan = Value::String("<plan>".into());
                    }
                    if let Some(applied) = v.get_mut("applied") {
                        *applied = Value::String("<applied>".into());
                    }
                }
                changed(&b, &a, "", &mut paths);
            }
        }
        writes.push(paths.join(" "));
        previous = document;
    }
    writes
}

#[tokio::test(start_paused = true)]
async fn a_clean_update_writes_its_state_at_each_step_in_order() {
    let writes = writes_of_update(&[], 3).await;
    assert_eq!(
        writes,
        [
            "/plan",
            "/plan/done/files",
            "/plan/os/started",
            "/plan/os/finished /plan/os/installed",
            "/plan/os/rebootFromBoot /plan/os/rebooting",
            "/plan/done/os",
            "/plan/done/reported",
            "/plan",
        ],
        "{writes:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_update_writes_its_state_at_each_step_in_order() {
    let writes = writes_of_update(&[3], 3).await;
    assert_eq!(
        writes,
        [
            "/plan",
            "/plan/done/files",
            "/plan/os/started",
            "/plan/os/finished /plan/os/lastError /plan/os/nextRunAt",
            "/plan/os/started",
            "/plan/os/finished /plan/os/installed /plan/os/lastError",
            "/plan/os/rebootFromBoot /plan/os/rebooting",
            "/plan/done/os",
            "/plan/done/reported",
            "/plan",
        ],
        "{writes:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_update_out_of_attempts_writes_its_state_at_each_step_in_order() {
    let writes = writes_of_update(&[3, 3], 2).await;
    assert_eq!(
        writes,
        [
            "/plan",
            "/plan/done/files",
            "/plan/os/started",
            "/plan/os/finished /plan/os/lastError /plan/os/nextRunAt",
            "/plan/os/started",
            "/plan/failure /plan/os/finished /plan/os/lastError",
            "/plan/failureReported",
        ],
        "{writes:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_non_retriable_failure_writes_its_state_at_each_step_in_order() {
    let writes = writes_of_update(&[1], 3).await;
    assert_eq!(
        writes,
        [
            "/plan",
            "/plan/done/files",
            "/plan/os/started",
            "/plan/failure /plan/os/finished /plan/os/lastError",
            "/plan/failureReported",
        ],
        "{writes:#?}"
    );
}
