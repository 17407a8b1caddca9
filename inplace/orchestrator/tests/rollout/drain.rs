//! Draining a node: evictions refused by a PodDisruptionBudget, `maxEvictRetries`, and the
//! forced drain after the drain timeout.

use kube::ResourceExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::strategy::OrchestrationType;

use crate::support::Lab;
use crate::support::workload::PodKind;
use rackproof_test_support::kube::faults::{Record, Seen, Verdict, faulty_client, hook};

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
        .condition_reached(&node, "SelectedForUpdate", Duration::from_secs(600))
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
        crate::support::is_cordoned(&lab.node(&node).await),
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
        .condition_reached(&node, "ReadyForUpdate", Duration::from_secs(120))
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

/// Whether the API server granted an eviction of `pod`, from a request log.
fn evicted(log: &Mutex<Vec<Record>>, pod: &str) -> bool {
    let suffix = format!("/{pod}/eviction");
    log.lock()
        .unwrap()
        .iter()
        .any(|r| (200..300).contains(&r.code) && r.path.ends_with(&suffix))
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
        .condition_reached(&node, "SelectedForUpdate", Duration::from_secs(600))
        .await;
    let ready_at = lab
        .condition_reached(&node, "ReadyForUpdate", Duration::from_secs(600))
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

/// Evicted pods are waited for with a short poll, as `kubectl drain` and MCM wait for their
/// deletion: once the last eviction went through, the node is drained within seconds, not at the
/// next sync period or eviction retry.
#[tokio::test(start_paused = true)]
async fn a_node_whose_last_evicted_pod_is_gone_is_drained_within_the_deletion_poll() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let config = Lab::config();
    let (poll, sync_period) = (inplace_orchestrator::POD_DELETION_POLL, config.sync_period);
    let (log, client) = logged_client(&lab);
    let _orchestrator = lab.start_orchestrator_with(client, config);
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    lab.create_pod(&node, "web-0", "web", PodKind::Workload)
        .await;
    // A budget refuses the first eviction; lifted, the retry (woken by its own timer, nothing
    // else changing) goes through and the kubelet double completes the deletion within a second.
    lab.create_pdb("web", "web", 0).await;
    lab.change_template("workers", "v2").await;
    lab.wait_for("a refused eviction", Duration::from_secs(600), || async {
        (refusals(&log, "web-0") >= 1).then_some(())
    })
    .await;
    lab.delete_pdb("web").await;
    // Seen within a second of the eviction (`wait_for` looks every second).
    let evicted_at = lab
        .wait_for("the eviction", Duration::from_secs(600), || async {
            evicted(&log, "web-0").then(|| lab.clock.now())
        })
        .await;
    let ready_at = lab
        .condition_reached(&node, "ReadyForUpdate", Duration::from_secs(600))
        .await;
    let took = ready_at.duration_since(evicted_at);
    assert!(
        took.as_secs_f64() <= (Duration::from_secs(2) + poll).as_secs_f64()
            && took.as_secs_f64() < sync_period.as_secs_f64(),
        "drained {took:?} after the last eviction (deletion poll {poll:?}, sync period \
         {sync_period:?})"
    );
    assert!(lab.pods_on(&node).await.is_empty());
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
}

/// A log line of a reconcile names its object and, for a Machine, its node: the Event that a
/// pod was evicted is logged inside `reconcile{kind=Machine name=… node=…}`.
#[tokio::test(start_paused = true)]
async fn log_lines_of_a_drain_name_the_machine_and_its_node() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(Lab::config());
    lab.create_deployment("workers", 1, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.wait_running(1).await;
    let node = lab.nodes().await[0].name_any();
    let machine = lab.machines().await[0].name_any();
    lab.create_pod(&node, "web-0", "web", PodKind::Workload)
        .await;
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 1, Duration::from_secs(600)).await;
    let evicted = logs.line_with("evicted pod default/web-0");
    assert!(
        evicted.contains(&format!(
            "reconcile{{kind=Machine name={machine} node={node}}}"
        )),
        "{evicted}"
    );
}
