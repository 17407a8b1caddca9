//! Failed and silent nodes: the halt at `maxUnavailable`, the update timeout, a restarted
//! orchestrator, and recovery once a person removes the failed mark.

use kube::ResourceExt;
use std::time::Duration;

use inplace_api::keys::{
    ANNOTATION_UPDATE_FAILED_REASON, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
};
use inplace_api::strategy::OrchestrationType;

use crate::support::{Lab, Outcome};

#[tokio::test(start_paused = true)]
async fn failures_halt_at_max_unavailable_and_resume_when_a_mark_is_removed() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(20);
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 2, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(4).await;
    for node in lab.nodes().await {
        lab.outcomes.lock().unwrap().insert(
            node.name_any(),
            Outcome::Fail("new slot did not boot: rolled back".into()),
        );
    }
    lab.change_template("workers", "v2").await;
    let halted = lab
        .wait_for("the halt", Duration::from_secs(1800), || async {
            let md = lab.deployment("workers").await;
            let status = md.status?;
            status
                .conditions
                .iter()
                .find(|c| c.type_ == "InPlaceUpdateHalted" && c.status == "True")
                .cloned()
        })
        .await;
    assert!(halted.message.contains("2 failed"), "{}", halted.message);
    // Exactly two failed nodes, both cordoned, and nothing else selected.
    lab.clock.sleep(Duration::from_secs(300)).await;
    let nodes = lab.nodes().await;
    let failed: Vec<_> = nodes
        .iter()
        .filter(|n| n.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed"))
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|n| crate::support::is_cordoned(n)));
    let selected = nodes
        .iter()
        .filter(|n| n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE))
        .count();
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
    lab.wait_for(
        "three machines moved",
        Duration::from_secs(3600),
        || async { (lab.events_with_reason("MachineMoved").await.len() == 3).then_some(()) },
    )
    .await;
    let still_failed = lab.node(&failed[1].name_any()).await;
    assert_eq!(
        still_failed
            .labels()
            .get(LABEL_UPDATE_RESULT)
            .map(String::as_str),
        Some("failed")
    );
    assert!(crate::support::is_cordoned(&still_failed));
}

#[tokio::test(start_paused = true)]
async fn silent_node_is_marked_failed_by_the_update_timeout() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.outcomes
        .lock()
        .unwrap()
        .insert(node.clone(), Outcome::Silent);
    lab.change_template("workers", "v2").await;
    let ready_at = lab
        .wait_for("ReadyForUpdate", Duration::from_secs(600), || async {
            let n = lab.node(&node).await;
            let condition = n
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "InPlaceUpdate")?;
            (condition.reason.as_deref() == Some("ReadyForUpdate"))
                .then(|| condition.last_transition_time.unwrap().0)
        })
        .await;
    let failed_at = lab
        .wait_for("the timeout mark", Duration::from_secs(1800), || async {
            let n = lab.node(&node).await;
            (n.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed"))
                .then(|| (lab.clock.now(), n))
        })
        .await;
    let (at, marked) = failed_at;
    let elapsed = at.duration_since(ready_at).as_secs() as u64;
    // Deadline 10m after ReadyForUpdate; marked within one sync period (10s) plus the polling second.
    assert!(
        (600..=611).contains(&elapsed),
        "marked failed {elapsed}s after ReadyForUpdate"
    );
    let reason = marked
        .annotations()
        .get("node.machine.sapcloud.io/update-failed-reason")
        .cloned()
        .unwrap();
    assert!(reason.contains("timed out after 10m"), "{reason}");
    assert!(crate::support::is_cordoned(&marked));
    assert_eq!(
        lab.events_with_reason("InPlaceUpdateTimedOut").await.len(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn killed_and_restarted_orchestrator_finishes_within_max_unavailable() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let mut orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(4).await;
    let failing = lab.nodes().await[3].name_any();
    lab.outcomes
        .lock()
        .unwrap()
        .insert(failing.clone(), Outcome::Fail("rolled back".into()));
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
    lab.wait_for(
        "three machines moved and one failed",
        Duration::from_secs(3600),
        || async {
            let failed = lab.node(&failing).await;
            let moved = lab.events_with_reason("MachineMoved").await.len();
            (moved == 3
                && failed.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed"))
            .then_some(())
        },
    )
    .await;
    let max = *max_selected.lock().unwrap();
    assert!(
        max <= 1,
        "at most maxUnavailable nodes selected at once across restarts, saw {max}"
    );
    for node in lab.nodes().await {
        let cordoned = crate::support::is_cordoned(&node);
        let reason = crate::support::condition_reason(&node);
        assert!(
            !cordoned || reason.is_some(),
            "node {} cordoned without an in-place reason",
            node.name_any()
        );
        if node.name_any() == failing {
            assert!(cordoned && reason.as_deref() == Some("UpdateFailed"));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn total_failure_is_marked_failed_within_one_sync_period_of_the_deadline_across_a_restart() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    // A long sync period: the deadline itself must wake the orchestrator.
    let config = inplace_orchestrator::Config {
        sync_period: Duration::from_secs(120),
        ..Lab::config()
    };
    let orchestrator = lab.start_orchestrator(config.clone());
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.outcomes
        .lock()
        .unwrap()
        .insert(node.clone(), Outcome::Silent);
    lab.change_template("workers", "v2").await;
    lab.condition_reached(&node, "ReadyForUpdate", Duration::from_secs(600))
        .await;
    // The new slot never boots: the node goes silent, nothing about it changes any more.
    lab.kill_node(&node).await;
    let machine = lab.machine_of(&node).await;
    assert_eq!(machine.phase().map(|p| p.as_str()), Some("InPlaceUpdating"));
    let since = machine
        .status
        .unwrap()
        .current_status
        .last_update_time
        .unwrap()
        .0;
    let deadline = since.checked_add(Duration::from_secs(600)).unwrap();
    // The orchestrator restarts in between: the deadline lives in the Machine, not in memory.
    lab.clock.sleep(Duration::from_secs(200)).await;
    orchestrator.abort();
    let _ = orchestrator.await;
    lab.clock.sleep(Duration::from_secs(30)).await;
    let _orchestrator = lab.start_orchestrator(config.clone());

    let marked_at = lab
        .condition_reached(&node, "UpdateFailed", Duration::from_secs(1200))
        .await;
    assert!(
        marked_at >= deadline,
        "not marked before the deadline: marked {marked_at}, deadline {deadline}"
    );
    let late = marked_at.duration_since(deadline).as_secs() as u64;
    assert!(
        late <= config.sync_period.as_secs(),
        "marked {late}s after the deadline, more than one sync period"
    );
    let marked = lab.node(&node).await;
    assert_eq!(
        marked.labels().get(LABEL_UPDATE_RESULT).map(String::as_str),
        Some("failed")
    );
    let reason = marked
        .annotations()
        .get("node.machine.sapcloud.io/update-failed-reason")
        .cloned()
        .unwrap();
    assert!(reason.contains("timed out after 10m"), "{reason}");
    assert!(crate::support::is_cordoned(&marked));
    let machine = lab.machine_of(&node).await;
    assert_eq!(
        machine.phase().map(|p| p.as_str()),
        Some("InPlaceUpdateFailed")
    );
}

/// A kubelet patch or a file change needs no drain: the agent applies it at once, and when it
/// fails it marks the node failed, which is no candidate. Removing the mark recovers the node as
/// it recovers a candidate: uncordoned, condition and reason gone, Machine Running, and the
/// deployment no longer halted (issue 27, bug 2).
#[tokio::test(start_paused = true)]
async fn a_failed_update_without_drain_is_recovered_when_the_mark_is_removed() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(3).await;
    let node = lab.nodes().await[0].name_any();
    // The agent's kubelet patch failed: it marks the node (no rollout, no candidate label).
    let mark = serde_json::json!({ "metadata": {
        "labels": { LABEL_UPDATE_RESULT: "failed" },
        "annotations": { ANNOTATION_UPDATE_FAILED_REASON: "kubelet 1.31.2 is not healthy within 5m" } } });
    kube::Api::<k8s_openapi::api::core::v1::Node>::all(lab.client.clone())
        .patch(
            &node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(mark),
        )
        .await
        .unwrap();
    let halted = |status: &str| {
        let lab = lab.clone();
        let status = status.to_owned();
        async move {
            lab.deployment("workers")
                .await
                .status
                .is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "InPlaceUpdateHalted" && c.status == status)
                })
                .then_some(())
        }
    };
    lab.wait_for("the failure recorded", Duration::from_secs(120), || async {
        let n = lab.node(&node).await;
        let phase = lab
            .machine_of(&node)
            .await
            .phase()
            .map(|p| p.as_str().to_owned());
        (crate::support::is_cordoned(&n)
            && crate::support::condition_reason(&n).as_deref() == Some("UpdateFailed")
            && phase.as_deref() == Some("InPlaceUpdateFailed"))
        .then_some(())
    })
    .await;
    lab.wait_for("the halt", Duration::from_secs(60), || halted("True"))
        .await;

    // A person removes the mark: the node is back, schedulable and counted available.
    lab.label_node(&node, LABEL_UPDATE_RESULT, None).await;
    lab.wait_for("the node recovered", Duration::from_secs(120), || async {
        let n = lab.node(&node).await;
        let phase = lab
            .machine_of(&node)
            .await
            .phase()
            .map(|p| p.as_str().to_owned());
        (!crate::support::is_cordoned(&n)
            && crate::support::condition_reason(&n).is_none()
            && !n
                .annotations()
                .contains_key(ANNOTATION_UPDATE_FAILED_REASON)
            && phase.as_deref() == Some("Running"))
        .then_some(())
    })
    .await;
    lab.wait_for("the halt to clear", Duration::from_secs(60), || {
        halted("False")
    })
    .await;
    assert_eq!(lab.events_with_reason("UpdateRecovered").await.len(), 1);
}

/// A forced update replaces the configuration while a node is being updated to the previous one:
/// the node's success is for a configuration that is no longer current. It must not move to the
/// new MachineSet as if it ran the new one (where it would wait for ever); it is updated again
/// (issue 27, bug 5).
#[tokio::test(start_paused = true)]
async fn a_success_for_a_replaced_configuration_is_updated_again_before_it_moves() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(60);
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 2, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.set_osc("workers", "kube-system", "osc-workers", "c1")
        .await;
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.wait_running(2).await;

    lab.change_template("workers", "v2").await;
    lab.set_osc("workers", "kube-system", "osc-workers", "c2")
        .await;
    let first = lab
        .wait_for(
            "a node ReadyForUpdate",
            Duration::from_secs(600),
            || async {
                lab.nodes()
                    .await
                    .into_iter()
                    .find(|n| {
                        crate::support::condition_reason(n).as_deref() == Some("ReadyForUpdate")
                    })
                    .map(|n| n.name_any())
            },
        )
        .await;
    // The agent has planned c2; a forced update brings c3 before it reports.
    lab.clock.sleep(Duration::from_secs(5)).await;
    lab.change_template("workers", "v3").await;
    lab.set_osc("workers", "kube-system", "osc-workers", "c3")
        .await;

    lab.wait_rolled_out("v3", 2, Duration::from_secs(3600))
        .await;
    for node in lab.nodes().await {
        assert_eq!(
            node.annotations()
                .get("checksum/cloud-config-data")
                .map(String::as_str),
            Some("c3"),
            "node {} runs the current configuration",
            node.name_any()
        );
    }
    let outdated = lab.events_with_reason("OutdatedUpdateResult").await;
    assert_eq!(outdated.len(), 1, "{outdated:?}");
    assert!(
        outdated[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains(&first)),
        "{outdated:?}"
    );
}
