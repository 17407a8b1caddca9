//! Machine health outside an in-place update (MCM's `machineCreationTimeout` and
//! `machineHealthTimeout`): a Machine whose node never joins, or whose node is NotReady too long,
//! is `Failed` with the reason and an Event, and replaced; neither applies during an update.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::crd::Machine;
use inplace_api::keys::{MachineOperationType, MachinePhase, MachineState};
use inplace_api::strategy::OrchestrationType;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::{Lab, NS, Outcome};
use tokio::task::JoinHandle;

/// Records every Machine seen in phase `Failed` (by uid), polling every 50 ms of virtual time:
/// the MachineSet deletes a failed Machine at its next pass.
fn record_failed(lab: &Lab) -> (Arc<Mutex<BTreeMap<String, Machine>>>, JoinHandle<()>) {
    let seen: Arc<Mutex<BTreeMap<String, Machine>>> = Arc::default();
    let (lab, record) = (lab.clone(), seen.clone());
    let task = tokio::spawn(async move {
        loop {
            for machine in lab.machines().await {
                if machine.phase() == Some(&MachinePhase::Failed) {
                    record
                        .lock()
                        .unwrap()
                        .entry(machine.uid().unwrap_or_default())
                        .or_insert(machine);
                }
            }
            lab.clock.sleep(Duration::from_millis(50)).await;
        }
    });
    (seen, task)
}

#[tokio::test(start_paused = true)]
async fn a_machine_whose_node_never_joins_fails_at_the_creation_timeout_and_is_replaced() {
    let lab = Lab::new().await;
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    let _orchestrator = lab.start_orchestrator(Lab::config());
    let first = lab
        .wait_for("a Pending machine", Duration::from_secs(60), || async {
            lab.machines()
                .await
                .into_iter()
                .find(|m| m.phase() == Some(&MachinePhase::Pending))
        })
        .await;
    // A provider binds a node that never becomes Ready.
    Api::<Node>::all(lab.client.clone())
        .create(
            &PostParams::default(),
            &Node {
                metadata: ObjectMeta {
                    name: Some("node-x".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    Api::<Machine>::namespaced(lab.client.clone(), NS)
        .patch(
            &first.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"node": "node-x"}}})),
        )
        .await
        .unwrap();
    let (failed, _recorder) = record_failed(&lab);
    lab.clock.sleep(Duration::from_secs(19 * 60)).await;
    assert!(
        failed.lock().unwrap().is_empty(),
        "failed before the timeout"
    );
    assert_eq!(
        lab.machines().await[0].phase(),
        Some(&MachinePhase::Pending)
    );

    lab.clock.sleep(Duration::from_secs(2 * 60)).await;
    let failed = failed.lock().unwrap().clone();
    let machine = failed
        .get(first.uid().as_deref().unwrap())
        .expect("the machine was marked Failed");
    let operation = &machine.status.as_ref().unwrap().last_operation;
    assert_eq!(operation.state, Some(MachineState::Failed));
    assert_eq!(operation.type_, Some(MachineOperationType::Create));
    assert!(
        operation
            .description
            .contains("machineCreationTimeout (20m)")
            && operation.description.contains("node-x"),
        "{}",
        operation.description
    );
    let events = lab.events_with_reason("CreationTimeout").await;
    assert_eq!(events.len(), 1, "one CreationTimeout Event");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let machines = lab.machines().await;
    assert_eq!(machines.len(), 1, "the failed machine was replaced");
    assert_ne!(machines[0].uid(), first.uid(), "by a new one");
}

#[tokio::test(start_paused = true)]
async fn a_node_not_ready_past_the_health_timeout_fails_its_machine_which_is_replaced() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 2, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.wait_running(2).await;
    let victim = lab.machines().await.remove(0);
    let node = victim.node_name().unwrap().to_owned();
    let (failed, _recorder) = record_failed(&lab);
    lab.kill_node(&node).await;
    lab.clock.sleep(Duration::from_secs(9 * 60)).await;
    assert!(
        failed.lock().unwrap().is_empty(),
        "failed before the timeout"
    );
    let machine = lab
        .machines()
        .await
        .into_iter()
        .find(|m| m.uid() == victim.uid())
        .unwrap();
    assert_eq!(machine.phase(), Some(&MachinePhase::Unknown));

    lab.clock.sleep(Duration::from_secs(2 * 60)).await;
    let failed = failed.lock().unwrap().clone();
    let machine = failed
        .get(victim.uid().as_deref().unwrap())
        .expect("the machine was marked Failed");
    let operation = &machine.status.as_ref().unwrap().last_operation;
    assert_eq!(operation.state, Some(MachineState::Failed));
    assert_eq!(operation.type_, Some(MachineOperationType::HealthCheck));
    assert!(
        operation.description.contains("machineHealthTimeout (10m)")
            && operation.description.contains(&node),
        "{}",
        operation.description
    );
    assert_eq!(lab.events_with_reason("HealthTimeout").await.len(), 1);
    lab.wait_running(2).await;
    assert!(
        lab.machines().await.iter().all(|m| m.uid() != victim.uid()),
        "the failed machine was replaced"
    );
}

#[tokio::test(start_paused = true)]
async fn the_health_timeout_does_not_run_while_a_machine_is_under_an_in_place_update() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 2, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    // The update may take 30 minutes, three health timeouts.
    Api::<inplace_api::crd::MachineDeployment>::namespaced(lab.client.clone(), NS)
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"inPlaceUpdateTimeout": "30m"}}}})),
        )
        .await
        .unwrap();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.wait_running(2).await;
    for machine in lab.machines().await {
        let node = machine.node_name().unwrap().to_owned();
        lab.outcomes.lock().unwrap().insert(node, Outcome::Silent);
    }
    let (failed, _recorder) = record_failed(&lab);
    lab.change_template("workers", "v2").await;
    // The selected node goes down for its update (a reboot that never comes back).
    let node = lab
        .wait_for(
            "a node ReadyForUpdate",
            Duration::from_secs(600),
            || async {
                lab.nodes()
                    .await
                    .into_iter()
                    .find(|n| support::condition_reason(n).as_deref() == Some("ReadyForUpdate"))
            },
        )
        .await
        .name_any();
    lab.kill_node(&node).await;
    lab.clock.sleep(Duration::from_secs(25 * 60)).await;
    assert!(
        failed.lock().unwrap().is_empty(),
        "a machine under update was failed by a health timeout"
    );
    assert_eq!(lab.events_with_reason("HealthTimeout").await.len(), 0);
}
