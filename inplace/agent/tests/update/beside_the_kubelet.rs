//! The agent beside the node's kubelet, on a simulated machine (see `common`): which of the two
//! renews the Lease, and the spans a pass's and the heartbeat's log lines carry.

use std::time::Duration;

use super::LIMIT;
use super::common::{NODE, Sim, osc};

/// The agent is not the kubelet: in a whole update it never touches the Node's Lease; the
/// kubelet's part renews it, and keeps the node Ready, with the agent dead.
#[tokio::test(start_paused = true)]
async fn the_agent_alone_never_renews_the_lease_the_kubelet_does() {
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    sim.wait_result(LIMIT).await;
    sim.wait_for(|_| false, Duration::from_secs(120)).await;
    let requests = sim.requests.lock().unwrap().clone();
    let lease: Vec<&String> = requests.iter().filter(|r| r.contains("/leases")).collect();
    assert!(lease.is_empty(), "the agent wrote the Lease: {lease:#?}");

    sim.kill_agent();
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> = kube::Api::namespaced(
        sim.client.clone(),
        inplace_agent::heartbeat::LEASE_NAMESPACE,
    );
    let renewed = |lease: k8s_openapi::api::coordination::v1::Lease| {
        lease.spec.and_then(|s| s.renew_time).map(|t| t.0)
    };
    let before = renewed(leases.get(NODE).await.unwrap()).expect("a renewed Lease");
    sim.wait_for(|_| false, Duration::from_secs(120)).await;
    let after = renewed(leases.get(NODE).await.unwrap()).expect("a renewed Lease");
    assert!(
        after.duration_since(before) >= jiff::SignedDuration::from_secs(100),
        "the kubelet renews the Lease with the agent dead: {before} → {after}"
    );
    let node = sim.node().await.unwrap();
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(ready, "the node stays Ready with its agent dead");
}

/// Every log line of a pass names the node and the pass, down to the steps it awaits (the
/// OS-update command), and the heartbeat's lines name the node.
#[tokio::test(start_paused = true)]
async fn log_lines_of_a_pass_and_of_the_heartbeat_name_the_node() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let mut sim = Sim::new().await;
    sim.start().await;
    sim.set_osc(&osc("2.0.0", "1.30.4", None, None)).await;
    sim.ready_for_update().await;
    sim.wait_result(LIMIT).await;
    let pass = format!("agent_pass{{node={NODE} pass=");
    let planned = logs.line_with("new operating system config");
    assert!(planned.contains(&pass), "{planned}");
    let command = logs.line_with("running the OS-update command");
    assert!(command.contains(&pass), "{command}");
    let registered = logs.line_with("registered the node");
    assert!(
        registered.contains(&format!("heartbeat{{node={NODE}}}")),
        "{registered}"
    );
}
