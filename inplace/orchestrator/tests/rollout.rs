//! Integration tests of the in-place rollout against the embedded API server, in virtual time.

mod support;

use std::time::Duration;

use inplace_api::keys::{
    ANNOTATION_SCALE_DOWN_DISABLED, ANNOTATION_UPDATE_FAILED_REASON, LABEL_CANDIDATE_FOR_UPDATE,
    LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
};
use inplace_api::strategy::OrchestrationType;
use kube::ResourceExt;
use std::sync::{Arc, Mutex};

use support::faults::{Record, Seen, Verdict, faulty_client, hook};
use support::workload::PodKind;
use support::{Lab, Outcome};

#[tokio::test(start_paused = true)]
async fn auto_rollout_updates_every_node_within_max_unavailable() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 5, "v1", 2, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(5).await;
    let original: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 5, Duration::from_secs(3600))
        .await;
    let mut after: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    after.sort();
    let mut before = original.clone();
    before.sort();
    assert_eq!(before, after, "in place: the same machines, none replaced");
    let max = *max_selected.lock().unwrap();
    assert!(
        max <= 2,
        "at most maxUnavailable nodes under update at once, saw {max}"
    );
    assert!(max >= 1);
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 5);
    assert_eq!(lab.events_with_reason("ReadyForUpdate").await.len(), 5);
    // Every transition of every node has its Event.
    for reason in [
        "Cordoned",
        "DrainSuccessful",
        "UpdateSuccessful",
        "Uncordoned",
        "InPlaceUpdateCleared",
    ] {
        assert_eq!(
            lab.events_with_reason(reason).await.len(),
            5,
            "{reason} Events"
        );
    }
    // Twice per node: the label (on the MachineDeployment) and the condition (on the Machine).
    for reason in ["CandidateForUpdate", "SelectedForUpdate"] {
        assert_eq!(
            lab.events_with_reason(reason).await.len(),
            10,
            "{reason} Events"
        );
    }
}

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
    assert!(failed.iter().all(|n| support::is_cordoned(n)));
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
    assert!(support::is_cordoned(&still_failed));
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
    assert!(support::is_cordoned(&marked));
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
        let cordoned = support::is_cordoned(&node);
        let reason = support::condition_reason(&node);
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
async fn max_surge_adds_new_machines_updates_the_rest_in_place_and_terminates_the_surplus() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 1, OrchestrationType::Auto)
        .await;
    lab.wait_running(3).await;
    let original: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 3, Duration::from_secs(3600))
        .await;
    let after: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();
    let kept = after.iter().filter(|m| original.contains(m)).count();
    assert_eq!(
        kept, 2,
        "maxSurge 1: two of three machines updated in place, {original:?} → {after:?}"
    );
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 2);
    assert_eq!(lab.events_with_reason("SurplusTerminated").await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn drain_blocked_by_a_pdb_retries_evictions_then_forces_deletion_after_the_drain_timeout() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let config = Lab::config();
    let sync_period = config.sync_period;
    let (log, client) = logged_client(&lab);
    let _orchestrator = lab.start_orchestrator_with(client, config);
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    lab.set_drain_timeout("workers", "10m").await;
    // Retries enough to outlast the drain timeout: the timeout is what ends this drain.
    lab.set_max_evict_retries("workers", 1000).await;
    let node = lab.nodes().await[0].name_any();
    // Two web pods behind a budget that allows no disruption, plus a DaemonSet pod and a mirror pod.
    lab.create_pod(&node, "web-0", "web", PodKind::Workload)
        .await;
    lab.create_pod(&node, "web-1", "web", PodKind::Workload)
        .await;
    lab.create_pod(&node, "agent-0", "agent", PodKind::DaemonSet)
        .await;
    lab.create_pod(&node, "static-0", "static", PodKind::Mirror)
        .await;
    lab.create_pdb("web", "web", 0).await;
    assert_eq!(
        lab.pdb("web").await.status.unwrap().disruptions_allowed,
        0,
        "the budget allows no eviction"
    );

    lab.change_template("workers", "v2").await;
    let selected_at = lab
        .wait_for("SelectedForUpdate", Duration::from_secs(600), || async {
            lab.condition(&node)
                .await
                .filter(|(reason, _)| reason == "SelectedForUpdate")
                .map(|(_, at)| at)
        })
        .await;
    let deadline = selected_at.checked_add(Duration::from_secs(600)).unwrap();

    // Blocked: evictions are refused and retried.
    lab.wait_for(
        "evictions of both web pods refused",
        Duration::from_secs(300),
        || async { (refusals(&log, "web-0") >= 2 && refusals(&log, "web-1") >= 2).then_some(()) },
    )
    .await;
    // Just before the deadline: still retrying, nothing deleted, the node waits in SelectedForUpdate.
    lab.clock
        .sleep(lab.clock.until(deadline) - Duration::from_secs(5))
        .await;
    let names = |pods: Vec<k8s_openapi::api::core::v1::Pod>| {
        let mut names: Vec<String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(lab.pods_on(&node).await),
        ["agent-0", "static-0", "web-0", "web-1"]
    );
    assert_eq!(lab.condition(&node).await.unwrap().0, "SelectedForUpdate");
    assert!(
        support::is_cordoned(&lab.node(&node).await),
        "cordoned while draining"
    );
    let retries = refusals(&log, "web-0");
    assert!(
        retries >= 20,
        "the orchestrator keeps retrying the eviction until the deadline: {retries} attempts"
    );
    assert!(lab.events_with_reason("ForcedDrain").await.is_empty());
    assert!(
        lab.events_with_reason("EvictionRetriesExhausted")
            .await
            .is_empty()
    );

    // The deadline passes: the pods are deleted despite the budget, and the node goes on.
    let ready_at = lab
        .wait_for("ReadyForUpdate", Duration::from_secs(120), || async {
            lab.condition(&node)
                .await
                .filter(|(reason, _)| reason == "ReadyForUpdate")
                .map(|(_, at)| at)
        })
        .await;
    assert!(
        ready_at >= deadline,
        "not forced before the drain timeout: ready {ready_at}, deadline {deadline}"
    );
    assert!(
        ready_at.duration_since(deadline).as_secs() as u64 <= sync_period.as_secs(),
        "forced within one sync period of the deadline: ready {ready_at}, deadline {deadline}"
    );
    assert_eq!(
        names(lab.pods_on(&node).await),
        ["agent-0", "static-0"],
        "DaemonSet and mirror pods are left to the agent"
    );
    let forced = lab.events_with_reason("ForcedDrain").await;
    assert_eq!(forced.len(), 1);
    let message = forced[0].message.clone().unwrap();
    assert!(
        message.contains("timed out after 10m")
            && message.contains("web-0")
            && message.contains("web-1"),
        "{message}"
    );
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
}

/// The orchestrator's client, logging every request and its answer.
fn logged_client(lab: &Lab) -> (Arc<Mutex<Vec<Record>>>, kube::Client) {
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let forward = hook(|_: Seen| async { Verdict::Forward });
    (log.clone(), faulty_client(lab.client.clone(), forward, log))
}

/// How many evictions of `pod` the API server refused (429), from a request log.
fn refusals(log: &Mutex<Vec<Record>>, pod: &str) -> usize {
    let suffix = format!("/{pod}/eviction");
    log.lock()
        .unwrap()
        .iter()
        .filter(|r| r.code == 429 && r.path.ends_with(&suffix))
        .count()
}

#[tokio::test(start_paused = true)]
async fn manual_updates_only_the_candidates_a_person_selects_one_at_a_time() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Manual)
        .await;
    lab.wait_running(3).await;
    let mut names: Vec<String> = lab.nodes().await.iter().map(|n| n.name_any()).collect();
    names.sort();
    lab.change_template("workers", "v2").await;
    lab.wait_for(
        "every node a candidate",
        Duration::from_secs(300),
        || async {
            for name in &names {
                if lab
                    .condition(name)
                    .await
                    .map(|(reason, _)| reason)
                    .as_deref()
                    != Some("CandidateForUpdate")
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    // Nobody selects: nothing is selected, cordoned or drained, however long we wait.
    lab.clock.sleep(Duration::from_secs(900)).await;
    let untouched = |node: &k8s_openapi::api::core::v1::Node| {
        !node.labels().contains_key(LABEL_SELECTED_FOR_UPDATE)
            && !support::is_cordoned(node)
            && support::condition_reason(node).as_deref() == Some("CandidateForUpdate")
    };
    assert!(lab.nodes().await.iter().all(untouched));
    assert!(lab.events_with_reason("SelectedForUpdate").await.is_empty());

    // A person selects the last node by name: only that one is updated.
    let moved = |count: usize| {
        let lab = lab.clone();
        async move {
            lab.wait_for("a machine to move", Duration::from_secs(1800), || async {
                (lab.events_with_reason("MachineMoved").await.len() == count).then_some(())
            })
            .await;
        }
    };
    lab.label_node(&names[2], LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    moved(1).await;
    lab.clock.sleep(Duration::from_secs(60)).await;
    let first = lab.node(&names[2]).await;
    assert!(
        first
            .labels()
            .keys()
            .all(|k| !k.starts_with("node.machine.sapcloud.io/")),
        "labels cleared: {:?}",
        first.labels()
    );
    assert!(!support::is_cordoned(&first));
    for other in &names[..2] {
        assert!(
            untouched(&lab.node(other).await),
            "node {other} is not touched before a person selects it"
        );
    }

    // The label on a node that is no candidate (already updated) is ignored.
    let machine_before = lab.machine_of(&names[2]).await;
    lab.label_node(&names[2], LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    lab.clock.sleep(Duration::from_secs(300)).await;
    let ignored = lab.node(&names[2]).await;
    assert!(
        !support::is_cordoned(&ignored),
        "a selected non-candidate is not cordoned"
    );
    assert_eq!(
        support::condition_reason(&ignored),
        None,
        "a selected non-candidate gets no in-place condition"
    );
    let machine_after = lab.machine_of(&names[2]).await;
    assert_eq!(machine_after.phase().map(|p| p.as_str()), Some("Running"));
    assert_eq!(
        machine_after.owner_references(),
        machine_before.owner_references(),
        "it stays in the new MachineSet"
    );
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 1);
    for other in &names[..2] {
        assert!(untouched(&lab.node(other).await));
    }
    lab.label_node(&names[2], LABEL_SELECTED_FOR_UPDATE, None)
        .await;

    // The person goes on, one node at a time.
    lab.label_node(&names[0], LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    moved(2).await;
    assert!(
        untouched(&lab.node(&names[1]).await),
        "the unselected node still waits"
    );
    lab.label_node(&names[1], LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    lab.wait_rolled_out("v2", 3, Duration::from_secs(1800))
        .await;
    assert_eq!(lab.events_with_reason("MachineMoved").await.len(), 3);
    let by_orchestrator = lab
        .events_with_reason("SelectedForUpdate")
        .await
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("MachineDeployment"))
        .count();
    assert_eq!(
        by_orchestrator, 0,
        "Manual: the orchestrator never selects a node itself"
    );
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
    lab.wait_for("ReadyForUpdate", Duration::from_secs(600), || async {
        lab.condition(&node)
            .await
            .filter(|(reason, _)| reason == "ReadyForUpdate")
            .map(|_| ())
    })
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
        .wait_for("the failed mark", Duration::from_secs(1200), || async {
            lab.condition(&node)
                .await
                .filter(|(reason, _)| reason == "UpdateFailed")
                .map(|(_, at)| at)
        })
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
    assert!(support::is_cordoned(&marked));
    let machine = lab.machine_of(&node).await;
    assert_eq!(
        machine.phase().map(|p| p.as_str()),
        Some("InPlaceUpdateFailed")
    );
}

#[tokio::test(start_paused = true)]
async fn not_ready_nodes_count_as_unavailable_and_every_old_node_is_protected_from_scale_down() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 2, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(4).await;
    let mut names: Vec<String> = lab.nodes().await.iter().map(|n| n.name_any()).collect();
    names.sort();
    // One node is NotReady before the rollout starts: with maxUnavailable 2 only one more may go.
    let sick = names[0].clone();
    lab.kill_node(&sick).await;
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;

    // Every node of the deployment is a candidate and protected from cluster-autoscaler scale-down;
    // the old MachineSet may not scale up.
    lab.wait_for(
        "candidates protected from scale-down",
        Duration::from_secs(300),
        || async {
            let nodes = lab.nodes().await;
            nodes
                .iter()
                .all(|n| {
                    n.labels().contains_key(LABEL_CANDIDATE_FOR_UPDATE)
                        && n.annotations()
                            .get(ANNOTATION_SCALE_DOWN_DISABLED)
                            .map(String::as_str)
                            == Some("true")
                })
                .then_some(())
        },
    )
    .await;
    let old = lab
        .sets()
        .await
        .into_iter()
        .find(|s| {
            s.spec
                .template
                .spec
                .class
                .as_ref()
                .is_some_and(|c| c.name == "v1")
        })
        .unwrap();
    assert_eq!(
        old.labels()
            .get("node.machine.sapcloud.io/scale-up-disabled")
            .map(String::as_str),
        Some("true")
    );

    // The three Ready nodes are updated one at a time; the NotReady one is never selected.
    lab.wait_for(
        "three machines moved",
        Duration::from_secs(3600),
        || async { (lab.events_with_reason("MachineMoved").await.len() == 3).then_some(()) },
    )
    .await;
    assert_eq!(
        *max_selected.lock().unwrap(),
        1,
        "a NotReady node counts against maxUnavailable"
    );
    let sick_node = lab.node(&sick).await;
    assert!(
        !sick_node.labels().contains_key(LABEL_SELECTED_FOR_UPDATE),
        "a NotReady node is not selected"
    );
    assert!(
        sick_node
            .annotations()
            .contains_key(ANNOTATION_SCALE_DOWN_DISABLED),
        "protected while the rollout is unfinished"
    );

    // It recovers: it is updated too, and the protection is removed once the rollout completes.
    lab.dead.lock().unwrap().remove(&sick);
    lab.wait_rolled_out("v2", 4, Duration::from_secs(3600))
        .await;
    assert!(
        lab.nodes()
            .await
            .iter()
            .all(|n| !n.annotations().contains_key(ANNOTATION_SCALE_DOWN_DISABLED)),
        "protection removed"
    );
    assert!(*max_selected.lock().unwrap() <= 2);
}

#[tokio::test(start_paused = true)]
async fn auto_ignores_a_selected_label_on_a_node_that_is_no_candidate() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(3).await;
    lab.change_template("workers", "v2").await;
    lab.wait_for(
        "the first machine to move",
        Duration::from_secs(1800),
        || async { (lab.events_with_reason("MachineMoved").await.len() == 1).then_some(()) },
    )
    .await;
    // Someone labels the updated node (no candidate any more) selected-for-update.
    let updated = lab
        .wait_for(
            "the updated node to be cleared",
            Duration::from_secs(120),
            || async {
                lab.nodes().await.into_iter().find(|n| {
                    support::condition_reason(n).is_none()
                        && !n.labels().contains_key(LABEL_CANDIDATE_FOR_UPDATE)
                })
            },
        )
        .await
        .name_any();
    lab.label_node(&updated, LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    // It neither restarts an update there nor counts as unavailable: the rollout goes on.
    lab.wait_for(
        "the other two machines to move",
        Duration::from_secs(1800),
        || async { (lab.events_with_reason("MachineMoved").await.len() == 3).then_some(()) },
    )
    .await;
    let node = lab.node(&updated).await;
    assert!(!support::is_cordoned(&node));
    assert_eq!(support::condition_reason(&node), None);
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
        (support::is_cordoned(&n)
            && support::condition_reason(&n).as_deref() == Some("UpdateFailed")
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
        (!support::is_cordoned(&n)
            && support::condition_reason(&n).is_none()
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
                    .find(|n| support::condition_reason(n).as_deref() == Some("ReadyForUpdate"))
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

/// A pod whose eviction a budget refused `maxEvictRetries` times is deleted, as MCM's drain does;
/// the drain does not wait for the drain timeout (issue 27, bug 6).
#[tokio::test(start_paused = true)]
async fn a_pod_refused_max_evict_retries_times_is_deleted() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let (log, client) = logged_client(&lab);
    let _orchestrator = lab.start_orchestrator_with(client, Lab::config());
    // maxEvictRetries 3, drain timeout 2h.
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.create_pod(&node, "web-0", "web", PodKind::Workload)
        .await;
    lab.create_pod(&node, "agent-0", "agent", PodKind::DaemonSet)
        .await;
    lab.create_pdb("web", "web", 0).await;
    lab.change_template("workers", "v2").await;
    let selected_at = lab
        .wait_for("SelectedForUpdate", Duration::from_secs(600), || async {
            lab.condition(&node)
                .await
                .filter(|(reason, _)| reason == "SelectedForUpdate")
                .map(|(_, at)| at)
        })
        .await;
    let ready_at = lab
        .wait_for("ReadyForUpdate", Duration::from_secs(600), || async {
            lab.condition(&node)
                .await
                .filter(|(reason, _)| reason == "ReadyForUpdate")
                .map(|(_, at)| at)
        })
        .await;
    // Three refusals, 20 s apart, then the deletion.
    let took = ready_at.duration_since(selected_at).as_secs() as u64;
    assert!(
        (40..=90).contains(&took),
        "drained {took}s after the selection"
    );
    assert_eq!(refusals(&log, "web-0"), 3);
    let exhausted = lab
        .events_about("EvictionRetriesExhausted", "default/web-0")
        .await;
    assert_eq!(exhausted.len(), 1, "{exhausted:?}");
    assert!(lab.events_with_reason("ForcedDrain").await.is_empty());
    let left: Vec<String> = lab
        .pods_on(&node)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(left, ["agent-0"], "the DaemonSet pod stays");
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
}

/// A drain that fails — an eviction answered with an error that is no budget's refusal — is
/// forced at once, as one that times out is (GEP-31; issue 27, bug 6).
#[tokio::test(start_paused = true)]
async fn a_failed_drain_is_forced() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let broken = hook(|seen: Seen| async move {
        if seen.method == http::Method::POST && seen.path.ends_with("/eviction") {
            Verdict::Fail(500, "etcdserver: request timed out".to_owned())
        } else {
            Verdict::Forward
        }
    });
    let _orchestrator = lab.start_orchestrator_with(
        faulty_client(lab.client.clone(), broken, Arc::default()),
        Lab::config(),
    );
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.create_pod(&node, "web-0", "web", PodKind::Workload)
        .await;
    lab.create_pod(&node, "web-1", "web", PodKind::Workload)
        .await;
    lab.change_template("workers", "v2").await;
    // Not after the drain timeout (2h): at once.
    lab.wait_for("the drain to end", Duration::from_secs(120), || async {
        (!lab.events_with_reason("ReadyForUpdate").await.is_empty()).then_some(())
    })
    .await;
    assert!(lab.pods_on(&node).await.is_empty(), "every pod deleted");
    let forced = lab.events_with_reason("ForcedDrain").await;
    assert_eq!(forced.len(), 1, "{forced:?}");
    let message = forced[0].message.clone().unwrap();
    assert!(
        message.contains("failed")
            && message.contains("etcdserver: request timed out")
            && message.contains("web-0")
            && message.contains("web-1"),
        "{message}"
    );
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
}

/// The halt holds in Manual pools too: a node a person selects while failed nodes reach
/// maxUnavailable stays selected but is not cordoned or drained, an Event says why, and it goes
/// on once a failed mark is removed (GEP-31; issue 27, behaviour 8).
#[tokio::test(start_paused = true)]
async fn a_manual_selection_waits_while_the_rollout_is_halted() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 3, "v1", 1, 0, OrchestrationType::Manual)
        .await;
    lab.wait_running(3).await;
    let mut names: Vec<String> = lab.nodes().await.iter().map(|n| n.name_any()).collect();
    names.sort();
    let (failing, held) = (names[0].clone(), names[1].clone());
    lab.outcomes
        .lock()
        .unwrap()
        .insert(failing.clone(), Outcome::Fail("rolled back".into()));
    lab.change_template("workers", "v2").await;
    lab.wait_for("candidates", Duration::from_secs(300), || async {
        (lab.condition(&held).await.map(|(r, _)| r).as_deref() == Some("CandidateForUpdate"))
            .then_some(())
    })
    .await;
    lab.label_node(&failing, LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    lab.wait_for("the halt", Duration::from_secs(1800), || async {
        let md = lab.deployment("workers").await;
        md.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "InPlaceUpdateHalted" && c.status == "True")
            .then_some(())
    })
    .await;

    // Selected while halted: held back, and told so.
    lab.label_node(&held, LABEL_SELECTED_FOR_UPDATE, Some("true"))
        .await;
    lab.wait_for("the hold", Duration::from_secs(120), || async {
        (!lab.events_with_reason("SelectionHeld").await.is_empty()).then_some(())
    })
    .await;
    lab.clock.sleep(Duration::from_secs(900)).await;
    let node = lab.node(&held).await;
    assert!(
        node.labels().contains_key(LABEL_SELECTED_FOR_UPDATE),
        "stays selected"
    );
    assert!(!support::is_cordoned(&node), "not cordoned while halted");
    assert_eq!(
        support::condition_reason(&node).as_deref(),
        Some("CandidateForUpdate"),
        "not drained while halted"
    );
    let events = lab.events_with_reason("SelectionHeld").await;
    assert_eq!(events.len(), 1, "one Event for the hold: {events:?}");
    let message = events[0].message.clone().unwrap();
    assert!(
        message.contains("halted") && message.contains(&held),
        "{message}"
    );

    // A person removes the failed mark: the held node goes on.
    lab.outcomes.lock().unwrap().clear();
    lab.label_node(&failing, LABEL_UPDATE_RESULT, None).await;
    lab.wait_for(
        "the held node to move",
        Duration::from_secs(1800),
        || async { (lab.events_with_reason("MachineMoved").await.len() == 1).then_some(()) },
    )
    .await;
    let moved = lab.events_with_reason("MachineMoved").await;
    assert!(
        moved[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains(&held)),
        "{moved:?}"
    );
}

/// A node whose kubelet died while nobody marked it NotReady (kube-controller-manager scaled to
/// zero) still says Ready=True; its Lease says otherwise. It is neither counted available nor
/// selected (issue 27, bug 1).
#[tokio::test(start_paused = true)]
async fn a_node_whose_lease_expired_is_not_available_whatever_its_ready_condition_says() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 4, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(4).await;
    let mut names: Vec<String> = lab.nodes().await.iter().map(|n| n.name_any()).collect();
    names.sort();
    // The first node in selection order dies unnoticed.
    let dead = names[0].clone();
    lab.stop_kubelet(&dead);
    lab.clock.sleep(Duration::from_secs(120)).await;
    assert!(
        lab.node(&dead)
            .await
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "the condition is stale"
    );
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;
    // One of four is down: with maxUnavailable 1 nothing may go.
    lab.clock.sleep(Duration::from_secs(600)).await;
    assert_eq!(
        *max_selected.lock().unwrap(),
        0,
        "nothing is selected while a node is down"
    );
    let md = lab.deployment("workers").await;
    assert_eq!(md.status.unwrap().available_replicas, 3);
    // It comes back: the rollout goes on, one at a time.
    lab.dead.lock().unwrap().remove(&dead);
    lab.wait_rolled_out("v2", 4, Duration::from_secs(3600))
        .await;
    assert_eq!(*max_selected.lock().unwrap(), 1);
}
