//! Manual orchestration: only the candidates a person selects are updated, one at a time, and
//! not while the rollout is halted.

use kube::ResourceExt;
use std::time::Duration;

use inplace_api::keys::{LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT};
use inplace_api::strategy::OrchestrationType;

use crate::support::{Lab, Outcome};

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
            && !crate::support::is_cordoned(node)
            && crate::support::condition_reason(node).as_deref() == Some("CandidateForUpdate")
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
    assert!(!crate::support::is_cordoned(&first));
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
        !crate::support::is_cordoned(&ignored),
        "a selected non-candidate is not cordoned"
    );
    assert_eq!(
        crate::support::condition_reason(&ignored),
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
    assert!(
        !crate::support::is_cordoned(&node),
        "not cordoned while halted"
    );
    assert_eq!(
        crate::support::condition_reason(&node).as_deref(),
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
