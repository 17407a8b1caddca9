//! Auto orchestration: every node updated within `maxUnavailable`, `maxSurge`, and what counts as
//! unavailable.

use kube::ResourceExt;
use std::time::Duration;

use inplace_api::keys::{
    ANNOTATION_SCALE_DOWN_DISABLED, LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE,
};
use inplace_api::strategy::OrchestrationType;

use crate::support::Lab;

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
                    crate::support::condition_reason(n).is_none()
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
    assert!(!crate::support::is_cordoned(&node));
    assert_eq!(crate::support::condition_reason(&node), None);
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
