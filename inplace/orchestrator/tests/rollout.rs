//! Integration tests of the in-place rollout against the embedded API server, in virtual time.

mod support;

use std::time::Duration;

use inplace_api::keys::{LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT};
use inplace_api::strategy::OrchestrationType;
use kube::ResourceExt;
use support::{Lab, Outcome};

#[tokio::test(start_paused = true)]
async fn auto_rollout_updates_every_node_within_max_unavailable() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 5, "v1", 2, 0, OrchestrationType::Auto).await;
    lab.wait_running(5).await;
    let original: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 5, Duration::from_secs(3600)).await;
    let mut after: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    after.sort();
    let mut before = original.clone();
    before.sort();
    assert_eq!(before, after, "in place: the same machines, none replaced");
    let max = *max_selected.lock().unwrap();
    assert!(max <= 2, "at most maxUnavailable nodes under update at once, saw {max}");
    assert!(max >= 1);
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 5);
    assert_eq!(lab.events_with_reason("ReadyForUpdate").await.len(), 5);
}

#[tokio::test(start_paused = true)]
async fn failures_halt_at_max_unavailable_and_resume_when_a_mark_is_removed() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(20);
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 2, 0, OrchestrationType::Auto).await;
    lab.wait_running(4).await;
    for node in lab.nodes().await {
        lab.outcomes.lock().unwrap().insert(node.name_any(), Outcome::Fail("new slot did not boot: rolled back".into()));
    }
    lab.change_template("workers", "v2").await;
    let halted = lab
        .wait_for("the halt", Duration::from_secs(1800), || async {
            let md = lab.deployment("workers").await;
            let status = md.status?;
            status.conditions.iter().find(|c| c.type_ == "InPlaceUpdateHalted" && c.status == "True").cloned()
        })
        .await;
    assert!(halted.message.contains("2 failed"), "{}", halted.message);
    // Exactly two failed nodes, both cordoned, and nothing else selected.
    lab.clock.sleep(Duration::from_secs(300)).await;
    let nodes = lab.nodes().await;
    let failed: Vec<_> = nodes.iter().filter(|n| n.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed")).collect();
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|n| support::is_cordoned(n)));
    let selected = nodes.iter().filter(|n| n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE)).count();
    assert_eq!(selected, 2, "no node beyond the failed ones is selected");
    assert_eq!(lab.events_with_reason("RolloutHalted").await.len(), 1);
    let md = lab.deployment("workers").await;
    assert_eq!(md.status.unwrap().failed_machines.len(), 2);

    // A person fixes things: further updates succeed, and removes one failed mark.
    lab.outcomes.lock().unwrap().clear();
    let fixed = failed[0].name_any();
    lab.label_node(&fixed, LABEL_UPDATE_RESULT, None).await;
    lab.wait_for("the resume", Duration::from_secs(600), || async {
        (!lab.events_with_reason("RolloutResumed").await.is_empty()).then_some(())
    })
    .await;
    // The other failed node keeps its mark; the rest of the pool gets updated.
    lab.wait_for("three machines moved", Duration::from_secs(3600), || async {
        (lab.events_with_reason("MachineMoved").await.len() == 3).then_some(())
    })
    .await;
    let still_failed = lab.node(&failed[1].name_any()).await;
    assert_eq!(still_failed.labels().get(LABEL_UPDATE_RESULT).map(String::as_str), Some("failed"));
    assert!(support::is_cordoned(&still_failed));
}

#[tokio::test(start_paused = true)]
async fn silent_node_is_marked_failed_by_the_update_timeout() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto).await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.outcomes.lock().unwrap().insert(node.clone(), Outcome::Silent);
    lab.change_template("workers", "v2").await;
    let ready_at = lab
        .wait_for("ReadyForUpdate", Duration::from_secs(600), || async {
            let n = lab.node(&node).await;
            let condition = n.status?.conditions?.into_iter().find(|c| c.type_ == "InPlaceUpdate")?;
            (condition.reason.as_deref() == Some("ReadyForUpdate")).then(|| condition.last_transition_time.unwrap().0)
        })
        .await;
    let failed_at = lab
        .wait_for("the timeout mark", Duration::from_secs(1800), || async {
            let n = lab.node(&node).await;
            (n.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed")).then(|| (lab.clock.now(), n))
        })
        .await;
    let (at, marked) = failed_at;
    let elapsed = at.duration_since(ready_at).as_secs() as u64;
    // Deadline 10m after ReadyForUpdate; marked within one sync period (10s) plus the polling second.
    assert!((600..=611).contains(&elapsed), "marked failed {elapsed}s after ReadyForUpdate");
    let reason = marked.annotations().get("node.machine.sapcloud.io/update-failed-reason").cloned().unwrap();
    assert!(reason.contains("timed out after 10m"), "{reason}");
    assert!(support::is_cordoned(&marked));
    assert_eq!(lab.events_with_reason("InPlaceUpdateTimedOut").await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn killed_and_restarted_orchestrator_finishes_within_max_unavailable() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let mut orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 1, 0, OrchestrationType::Auto).await;
    lab.wait_running(4).await;
    let failing = lab.nodes().await[3].name_any();
    lab.outcomes.lock().unwrap().insert(failing.clone(), Outcome::Fail("rolled back".into()));
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;
    // Kill the orchestrator every 7 virtual seconds (a different step each time) and restart it.
    for _ in 0..60 {
        lab.clock.sleep(Duration::from_secs(7)).await;
        orchestrator.abort();
        let _ = orchestrator.await;
        lab.clock.sleep(Duration::from_secs(3)).await;
        orchestrator = lab.start_orchestrator(Lab::config());
    }
    lab.wait_for("three machines moved and one failed", Duration::from_secs(3600), || async {
        let failed = lab.node(&failing).await;
        let moved = lab.events_with_reason("MachineMoved").await.len();
        (moved == 3 && failed.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed")).then_some(())
    })
    .await;
    let max = *max_selected.lock().unwrap();
    assert!(max <= 1, "at most maxUnavailable nodes selected at once across restarts, saw {max}");
    for node in lab.nodes().await {
        let cordoned = support::is_cordoned(&node);
        let reason = support::condition_reason(&node);
        assert!(!cordoned || reason.is_some(), "node {} cordoned without an in-place reason", node.name_any());
        if node.name_any() == failing {
            assert!(cordoned && reason.as_deref() == Some("UpdateFailed"));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn max_surge_adds_new_machines_updates_the_rest_in_place_and_terminates_the_surplus() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 1, OrchestrationType::Auto).await;
    lab.wait_running(3).await;
    let original: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 3, Duration::from_secs(3600)).await;
    let after: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    let kept = after.iter().filter(|m| original.contains(m)).count();
    assert_eq!(kept, 2, "maxSurge 1: two of three machines updated in place, {original:?} → {after:?}");
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 2);
    assert_eq!(lab.events_with_reason("SurplusTerminated").await.len(), 1);
}
