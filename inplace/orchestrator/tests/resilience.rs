//! The orchestrator under races and restarts, against the embedded API server in virtual time:
//! concurrent writers that make its writes conflict (409), and a kill right after each per-node
//! state is written, followed by a restart.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::keys::{
    LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
};
use inplace_api::strategy::OrchestrationType;
use kube::ResourceExt;
use rackproof_test_support::kube::faults::{
    ConcurrentWriter, Record, Seen, Verdict, faulty_client, hook,
};
use serde_json::json;
use support::{Lab, Outcome};

#[tokio::test(start_paused = true)]
async fn writes_that_conflict_with_a_concurrent_writer_are_retried_until_they_land() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(20);
    let _doubles = lab.start_doubles();
    // Every read-modify-write (PUT) of the orchestrator first loses a race: another writer changes
    // the object between the orchestrator's read and its write, so the server answers 409.
    let writer = ConcurrentWriter::new(lab.client.clone());
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let race = hook(move |seen: Seen| {
        let writer = writer.clone();
        async move {
            if seen.method == http::Method::PUT && !seen.path.contains("/events/") {
                writer.race(&seen.path).await;
            }
            Verdict::Forward
        }
    });
    let _orchestrator = lab.start_orchestrator_with(
        faulty_client(lab.client.clone(), race, log.clone()),
        Lab::config(),
    );
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(3).await;
    let failing = lab.nodes().await[2].name_any();
    lab.outcomes
        .lock()
        .unwrap()
        .insert(failing.clone(), Outcome::Fail("rolled back".into()));
    lab.change_template("workers", "v2").await;
    lab.wait_for(
        "two machines moved and one failed",
        Duration::from_secs(3600),
        || async {
            let failed = lab.node(&failing).await;
            let moved = lab.events_with_reason("MachineMoved").await.len();
            (moved == 2 && support::condition_reason(&failed).as_deref() == Some("UpdateFailed"))
                .then_some(())
        },
    )
    .await;

    // Every condition of the walk landed despite the races.
    for reason in [
        "CandidateForUpdate",
        "SelectedForUpdate",
        "DrainSuccessful",
        "ReadyForUpdate",
        "UpdateSuccessful",
        "UpdateFailed",
    ] {
        assert!(
            !lab.events_with_reason(reason).await.is_empty(),
            "no {reason} transition"
        );
    }
    let failed = lab.node(&failing).await;
    assert_eq!(
        failed.labels().get(LABEL_UPDATE_RESULT).map(String::as_str),
        Some("failed")
    );
    assert!(support::is_cordoned(&failed));
    // The races really happened, on node conditions and Machine status among others.
    let log = log.lock().unwrap();
    let conflicts = |what: &str| {
        log.iter()
            .filter(|r| r.code == 409 && r.path.contains(what) && r.path.ends_with("/status"))
            .count()
    };
    assert!(
        conflicts("/nodes/") >= 6,
        "node condition writes conflicted {} times",
        conflicts("/nodes/")
    );
    assert!(
        conflicts("/machines/") >= 3,
        "machine status writes conflicted {} times",
        conflicts("/machines/")
    );
    let node_status_ok = log
        .iter()
        .filter(|r| r.code == 200 && r.path.contains("/nodes/") && r.path.ends_with("/status"))
        .count();
    assert!(
        node_status_ok >= 6,
        "and each was retried until it landed ({node_status_ok} successful writes)"
    );
}

/// The per-node states the orchestrator is killed right after, and how to recognise the write.
fn kill_point(seen: &Seen) -> Option<&'static str> {
    if !seen.is_write() {
        return None;
    }
    let conditions = [
        "CandidateForUpdate",
        "SelectedForUpdate",
        "DrainSuccessful",
        "ReadyForUpdate",
        "UpdateSuccessful",
        "UpdateFailed",
    ];
    if let Some(reason) = conditions.into_iter().find(|r| seen.writes_condition(r)) {
        return Some(reason);
    }
    if seen.sets_node_label(LABEL_CANDIDATE_FOR_UPDATE, "true") {
        return Some("candidate label");
    }
    if seen.sets_node_label(LABEL_SELECTED_FOR_UPDATE, "true") {
        return Some("selected label");
    }
    if seen.sets_node_label(LABEL_UPDATE_RESULT, "failed") {
        return Some("timeout mark");
    }
    let body = seen.body.as_ref()?;
    if seen.method == http::Method::PATCH
        && seen.node().is_some()
        && body.pointer("/spec/unschedulable") == Some(&json!(true))
    {
        return Some("cordon");
    }
    if seen.method == http::Method::PATCH
        && seen.node().is_some()
        && body.pointer("/spec/unschedulable") == Some(&json!(false))
    {
        return Some("uncordon");
    }
    if seen.method == http::Method::PUT
        && seen.path.contains("/machines/")
        && seen.path.ends_with("/status")
    {
        let phase = body
            .pointer("/status/currentStatus/phase")
            .and_then(|p| p.as_str());
        return match phase {
            Some("InPlaceUpdating") => Some("phase InPlaceUpdating"),
            Some("InPlaceUpdateSuccessful") => Some("phase InPlaceUpdateSuccessful"),
            Some("InPlaceUpdateFailed") => Some("phase InPlaceUpdateFailed"),
            _ => None,
        };
    }
    if seen.method == http::Method::PATCH
        && seen.path.contains("/machines/")
        && body.pointer("/metadata/ownerReferences").is_some()
    {
        return Some("machine moved");
    }
    None
}

#[tokio::test(start_paused = true)]
async fn killed_after_each_state_and_restarted_never_exceeds_max_unavailable_or_loses_a_failed_mark()
 {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(20);
    let _doubles = lab.start_doubles();
    let max_unavailable = 3;
    lab.create_deployment(
        "workers",
        6,
        "v1",
        max_unavailable,
        0,
        OrchestrationType::Auto,
    )
    .await;
    let first = lab.start_orchestrator(Lab::config());
    lab.wait_running(6).await;
    first.abort();
    let _ = first.await;
    let mut names: Vec<String> = lab.nodes().await.iter().map(|n| n.name_any()).collect();
    names.sort();
    // One node reports a failed update; one never reports anything (the orchestrator marks it
    // failed when machineInPlaceUpdateTimeout passes).
    let failing = [names[1].clone(), names[2].clone()];
    lab.outcomes.lock().unwrap().insert(
        failing[0].clone(),
        Outcome::Fail("new slot did not boot: rolled back".into()),
    );
    lab.outcomes
        .lock()
        .unwrap()
        .insert(failing[1].clone(), Outcome::Silent);

    // The hook kills the orchestrator right after the server applied the first write of each kind
    // for each object (the write lands, the answer never comes), and reports which.
    let (kills_tx, mut kills) = tokio::sync::mpsc::unbounded_channel::<String>();
    let done: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let kill = hook(move |seen: Seen| {
        let (tx, done) = (kills_tx.clone(), done.clone());
        async move {
            let Some(point) = kill_point(&seen) else {
                return Verdict::Forward;
            };
            let object = seen
                .path
                .trim_end_matches("/status")
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            // A kill right after the successful phase lets the MachineDeployment move the machine
            // before the condition is written; do that once, so the others reach UpdateSuccessful.
            let key = if point == "phase InPlaceUpdateSuccessful" {
                point.to_owned()
            } else {
                format!("{point} {object}")
            };
            if !done.lock().unwrap().insert(key) {
                return Verdict::Forward;
            }
            let _ = tx.send(point.to_owned());
            Verdict::ForwardThenHang
        }
    });
    let start = |lab: &Lab| {
        lab.start_orchestrator_with(
            faulty_client(lab.client.clone(), kill.clone(), Arc::default()),
            Lab::config(),
        )
    };
    let (max_selected, _monitor) = lab.monitor_selected();
    let mut orchestrator = start(&lab);
    lab.change_template("workers", "v2").await;

    let mut hits: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed_seen: BTreeSet<String> = BTreeSet::new();
    let limit = lab
        .clock
        .now()
        .checked_add(Duration::from_secs(3600))
        .unwrap();
    loop {
        tokio::select! {
            Some(point) = kills.recv() => {
                // The write landed and the orchestrator is stuck: check the cluster, kill, restart.
                let nodes = lab.nodes().await;
                let selected = nodes.iter().filter(|n| n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE)).count();
                assert!(selected <= max_unavailable as usize, "after {point}: {selected} nodes selected");
                for node in &nodes {
                    let reason = support::condition_reason(node);
                    assert!(!support::is_cordoned(node) || reason.is_some(), "after {point}: node {} cordoned without a reason", node.name_any());
                }
                for name in &failing {
                    let node = nodes.iter().find(|n| n.name_any() == *name).unwrap();
                    let marked = node.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed");
                    assert!(marked || !failed_seen.contains(name), "after {point}: the failed mark of {name} was lost");
                    if marked {
                        failed_seen.insert(name.clone());
                    }
                }
                *hits.entry(point).or_default() += 1;
                orchestrator.abort();
                let _ = orchestrator.await;
                lab.clock.sleep(Duration::from_secs(2)).await;
                orchestrator = start(&lab);
            }
            () = lab.clock.sleep(Duration::from_secs(5)) => {
                if rolled_out_but(&lab, &failing).await {
                    break;
                }
                assert!(lab.clock.now() < limit, "the rollout did not finish across restarts; kills so far: {hits:?}");
            }
        }
    }
    // Settle, then the end state: four nodes updated and clean, the failed one marked and cordoned.
    lab.clock.sleep(Duration::from_secs(120)).await;
    let all = [
        "candidate label",
        "CandidateForUpdate",
        "selected label",
        "SelectedForUpdate",
        "cordon",
        "phase InPlaceUpdating",
        "DrainSuccessful",
        "ReadyForUpdate",
        "phase InPlaceUpdateSuccessful",
        "UpdateSuccessful",
        "machine moved",
        "uncordon",
        "phase InPlaceUpdateFailed",
        "UpdateFailed",
        "timeout mark",
    ];
    for point in all {
        assert!(
            hits.contains_key(point),
            "never killed after {point}: {hits:?}"
        );
    }
    let max = *max_selected.lock().unwrap();
    assert!(
        max <= max_unavailable as usize,
        "at most maxUnavailable nodes selected at once across restarts, saw {max}"
    );
    for node in lab.nodes().await {
        let name = node.name_any();
        if failing.contains(&name) {
            assert_eq!(
                node.labels().get(LABEL_UPDATE_RESULT).map(String::as_str),
                Some("failed")
            );
            assert!(support::is_cordoned(&node));
            assert_eq!(
                support::condition_reason(&node).as_deref(),
                Some("UpdateFailed")
            );
        } else {
            assert!(
                node.labels()
                    .keys()
                    .all(|k| !k.starts_with("node.machine.sapcloud.io/")),
                "node {name}: {:?}",
                node.labels()
            );
            assert!(!support::is_cordoned(&node), "node {name} left cordoned");
        }
    }
    let sets = lab.sets().await;
    assert_eq!(sets.len(), 2, "the old set keeps the failed machines");
}

/// Whether every machine but those of `failing` is in the new (v2) set with a clean node, and
/// each of `failing` has its failure recorded.
async fn rolled_out_but(lab: &Lab, failing: &[String]) -> bool {
    let Some(new) = lab.sets().await.into_iter().find(|s| {
        s.spec
            .template
            .spec
            .class
            .as_ref()
            .is_some_and(|c| c.name == "v2")
    }) else {
        return false;
    };
    let new_uid = new.uid().unwrap_or_default();
    for machine in lab.machines().await {
        let Some(node_name) = machine.node_name() else {
            return false;
        };
        let node = lab.node(node_name).await;
        if failing.iter().any(|f| f == node_name) {
            if support::condition_reason(&node).as_deref() != Some("UpdateFailed")
                || machine.phase().map(|p| p.as_str()) != Some("InPlaceUpdateFailed")
            {
                return false;
            }
            continue;
        }
        let in_new = machine.owner_references().iter().any(|o| o.uid == new_uid);
        let clean = node
            .labels()
            .keys()
            .all(|k| !k.starts_with("node.machine.sapcloud.io/"))
            && !support::is_cordoned(&node);
        if !in_new || !clean || machine.phase().map(|p| p.as_str()) != Some("Running") {
            return false;
        }
    }
    true
}

#[tokio::test(start_paused = true)]
async fn failing_watches_resume_and_cost_no_correctness() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    // For the first ten minutes every watch the orchestrator opens fails; then they work again.
    let broken = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let watches = {
        let broken = broken.clone();
        hook(move |seen: Seen| {
            let broken = broken.clone();
            async move {
                if seen.is_watch() && *broken.lock().unwrap() {
                    Verdict::Fail(500, "watch cache is not ready".to_owned())
                } else {
                    Verdict::Forward
                }
            }
        })
    };
    let _orchestrator = lab.start_orchestrator_with(
        faulty_client(lab.client.clone(), watches, log.clone()),
        Lab::config(),
    );
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(3).await;
    lab.change_template("workers", "v2").await;
    // Without watches the periodic passes carry the rollout.
    lab.wait_for(
        "the first machine to move without watches",
        Duration::from_secs(550),
        || async { (!lab.events_with_reason("MachineMoved").await.is_empty()).then_some(()) },
    )
    .await;
    assert!(*broken.lock().unwrap());
    let failed_watches = log
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.watch && r.code == 500)
        .count();
    assert!(
        failed_watches >= 5,
        "the watches were retried ({failed_watches} failures)"
    );
    *broken.lock().unwrap() = false;
    lab.wait_rolled_out("v2", 3, Duration::from_secs(3600))
        .await;
    let resumed = log
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.watch && r.code == 200)
        .count();
    assert!(
        resumed >= 5,
        "every watch resumed once the server served them again ({resumed})"
    );
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 3);
}

/// The update timeout decides on the Node as the pass read it; the agent's success may land
/// between that read and the failed mark. The mark must not overwrite it (issue 27, bug 3).
#[tokio::test(start_paused = true)]
async fn the_update_timeout_never_overwrites_a_success_written_meanwhile() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    let first = lab.start_orchestrator(Lab::config());
    lab.wait_running(1).await;
    first.abort();
    let _ = first.await;
    let node = lab.nodes().await[0].name_any();
    // The agent reports nothing until the orchestrator's timeout mark is on its way: then its
    // success lands first, the mark right after.
    lab.outcomes
        .lock()
        .unwrap()
        .insert(node.clone(), Outcome::Silent);
    let admin = lab.client.clone();
    let raced = Arc::new(Mutex::new(false));
    let race = {
        let raced = raced.clone();
        hook(move |seen: Seen| {
            let (admin, raced) = (admin.clone(), raced.clone());
            async move {
                if seen.sets_node_label(LABEL_UPDATE_RESULT, "failed")
                    && !std::mem::replace(&mut *raced.lock().unwrap(), true)
                {
                    let name = seen.node().unwrap_or_default().to_owned();
                    let success =
                        json!({ "metadata": { "labels": { LABEL_UPDATE_RESULT: "successful" } } });
                    kube::Api::<k8s_openapi::api::core::v1::Node>::all(admin)
                        .patch(
                            &name,
                            &kube::api::PatchParams::default(),
                            &kube::api::Patch::Merge(success),
                        )
                        .await
                        .expect("the agent's success lands");
                }
                Verdict::Forward
            }
        })
    };
    let _orchestrator = lab.start_orchestrator_with(
        faulty_client(lab.client.clone(), race, Arc::default()),
        Lab::config(),
    );
    lab.change_template("workers", "v2").await;
    lab.wait_for("the timeout", Duration::from_secs(1800), || async {
        (*raced.lock().unwrap()).then_some(())
    })
    .await;
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
    assert!(
        lab.events_with_reason("InPlaceUpdateTimedOut")
            .await
            .is_empty(),
        "no timeout recorded over the success"
    );
    assert!(lab.events_with_reason("UpdateFailed").await.is_empty());
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 1);
}
