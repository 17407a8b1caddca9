//! Several worker pools in one run, on small simulated runs: each pool's nodes carry their own
//! pool's identity, and each pool's rollout is judged on its own (one halting does not hold the
//! other, nor make it halted).

use std::path::Path;

use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::{LoadedScenario, load_str};
use rackproof_harness::scenario::Backend;

fn scenario(text: &str) -> LoadedScenario {
    load_str(Path::new("pools-test.yaml"), text).unwrap_or_else(|e| panic!("{e}"))
}

/// A `run` step that checks node `node` carries the pool label `pool`.
fn labelled(node: &str, pool: &str) -> String {
    format!(
        "  - run:\n      command: [sh, -c, 'kubectl get node {node} -o jsonpath=\"{{.metadata.labels.worker\\.gardener\\.cloud/pool}}\" | grep -qx {pool}']\n"
    )
}

const TWO_POOLS: &str = r#"
lab: { nodes: 4 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
workloads:
  - pods: { name: web }
pools:
  - { name: big, strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2" }
  - name: small
    strategy: AutoInPlaceUpdate
    size: 2
    os: "1.0.0"
    kubernetes: "1.34.2"
    workloads: [ { pods: { name: cache } } ]
steps:
  # The scenario's workload runs on every pool's nodes, a pool's own on its nodes alone.
  - run: { command: [kubectl, get, pod, -n, apps, web-node-1-1, web-node-4-1, cache-node-3-1, cache-node-4-1] }
  - run: { command: [kubectl, get, pod, -n, apps, cache-node-1-1], expectExit: 1 }
  - update: { pool: small, os: "1.1.0" }
  - waitUntil: { until: { pool: { name: small, that: rolloutComplete } }, within: 1h }
"#;

#[test]
fn each_pool_s_nodes_carry_their_own_pool_s_name_and_workloads() {
    rackproof_test_support::require_kubectl();
    let mut text = TWO_POOLS.to_owned();
    for (node, pool) in [
        ("node-1", "big"),
        ("node-2", "big"),
        ("node-3", "small"),
        ("node-4", "small"),
    ] {
        text.push_str(&labelled(node, pool));
    }
    text.push_str(
        "expect:\n  - never: { pool: { name: big, that: { anyNode: { are: selected } } } }\n",
    );
    let result = engine::run_scenario(&scenario(&text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
}

#[test]
fn a_pool_made_with_kubectl_gets_nodes_labelled_with_its_own_name() {
    rackproof_test_support::require_kubectl();
    let pool = r#"{"apiVersion":"rackproof.dev/v1alpha1","kind":"WorkerPool","metadata":{"name":"extra","namespace":"rackproof"},"spec":{"minimum":1,"maximum":1,"maxSurge":0,"maxUnavailable":1,"updateStrategy":"AutoInPlaceUpdate","machine":{"type":"lab","image":{"name":"rackproof-os","version":"1.0.0"}},"kubernetes":{"version":"1.34.2"}}}"#;
    let text = format!(
        r#"
lab: {{ nodes: 3 }}
images:
  - version: "1.0.0"
pool: {{ strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2" }}
steps:
  - run: {{ command: [sh, -c, 'echo ''{pool}'' | kubectl apply -f -'] }}
  - waitUntil: {{ until: {{ node: {{ name: node-3, is: ready }} }}, within: 10m }}
{}{}"#,
        labelled("node-3", "extra"),
        labelled("node-1", "workers"),
    );
    let result = engine::run_scenario(&scenario(&text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
}

#[test]
fn one_pool_halting_neither_holds_nor_halts_the_other() {
    let text = r#"
lab: { nodes: 5 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
pools:
  - { name: big, strategy: AutoInPlaceUpdate, size: 3, os: "1.0.0", kubernetes: "1.34.2" }
  - { name: small, strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2", machineInPlaceUpdateTimeout: 10m }
faults:
  - when: { after: 0s }
    do: { bootFailure: { node: node-4, version: "1.1.0", boot: panics } }
steps:
  - update: { pool: small, os: "1.1.0" }
  - waitUntil: { until: { pool: { name: small, that: rolloutHalted } }, within: 1h }
  - update: { pool: big, os: "1.1.0" }
  - waitUntil: { until: { pool: { name: big, that: rolloutComplete } }, within: 2h }
expect:
  - never: { pool: { name: big, that: rolloutHalted } }
  - never: { node: { name: node-5, is: selected } }
  - eventually: { that: { pool: { name: big, that: { allNodes: { are: updated } } } }, within: 2h }
"#;
    let result = engine::run_scenario(&scenario(text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
}

#[test]
fn the_watchdog_counts_the_nodes_of_every_pool() {
    // Two of big's three nodes die: two thirds of big, but two fifths of the cluster, under the
    // watchdog's fraction. A third node, of small, makes three fifths: the dependents go.
    let text = r#"
lab: { nodes: 5 }
images:
  - version: "1.0.0"
pools:
  - { name: big, strategy: AutoInPlaceUpdate, size: 3, os: "1.0.0", kubernetes: "1.34.2" }
  - { name: small, strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2" }
watchdog: { nodeLeaseFailureFraction: 0.6 }
steps:
  - fault: { nodesDie: [node-1, node-2] }
  - sleep: 5m
  - fault: { nodesDie: [node-4] }
  - waitUntil: { until: dependentsScaledDown, within: 5m }
expect:
  - never: { pool: { name: small, that: rolloutHalted } }
invariants:
  disable: [ { name: dependentsRestored, reason: "the nodes stay dead" } ]
"#;
    let result = engine::run_scenario(&scenario(text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let scaled_down = result
        .timeline
        .entries
        .iter()
        .find(|e| e.text == "dependents scaled down")
        .map(|e| e.at_ms)
        .expect("the dependents were scaled down");
    let third_death = result
        .timeline
        .entries
        .iter()
        .find(|e| e.text.starts_with("step 3"))
        .map(|e| e.at_ms)
        .expect("step 3 ran");
    assert!(
        scaled_down > third_death,
        "two of five dead nodes scaled the dependents down (at {scaled_down} ms, before the third died at {third_death} ms)"
    );
}

/// A `run` step that checks the WorkerPool `pool` has `jsonpath` equal to `value`.
fn pool_field(pool: &str, jsonpath: &str, value: &str) -> String {
    format!(
        "  - run:\n      command: [sh, -c, 'test \"$(kubectl get workerpool -n rackproof {pool} -o jsonpath=\"{{{jsonpath}}}\")\" = \"{value}\"']\n"
    )
}

#[test]
fn scale_naming_one_pool_changes_that_pool_alone() {
    rackproof_test_support::require_kubectl();
    let mut text = r#"
lab: { nodes: 5 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
pools:
  - { name: big, strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2" }
  - { name: small, strategy: AutoInPlaceUpdate, size: 2, os: "1.0.0", kubernetes: "1.34.2" }
steps:
  - scale: { pool: small, nodes: 3 }
  - waitUntil: { until: { pool: { name: small, that: { count: { are: ready, count: 3 } } } }, within: 30m }
  # small's rollout is complete when its three nodes run 1.1.0: the judge counts its new size.
  - update: { pool: small, os: "1.1.0" }
  - waitUntil: { until: { pool: { name: small, that: rolloutComplete } }, within: 1h }
  - sleep: 5m
"#
    .to_owned();
    text.push_str(&labelled("node-5", "small"));
    text.push_str(&pool_field("small", ".spec.maximum", "3"));
    text.push_str(&pool_field("big", ".spec.maximum", "2"));
    text.push_str(
        "expect:\n  - never: { pool: { name: big, that: { count: { are: ready, count: 3 } } } }\n  - never: { pool: { name: big, that: { anyNode: { are: selected } } } }\n  - eventually: { that: { pool: { name: big, that: { count: { are: ready, count: 2 } } } }, within: 1h }\n",
    );
    let result = engine::run_scenario(&scenario(&text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    assert!(
        result
            .timeline
            .entries
            .iter()
            .any(|e| e.text == "step 1: scale pool small to 3"),
        "the timeline names the pool scaled"
    );
}

#[test]
fn a_maintenance_operation_naming_one_pool_runs_in_that_pool_alone() {
    rackproof_test_support::require_kubectl();
    let mut text = r#"
clock: { start: "2026-03-02T21:00:00Z" }
lab: { nodes: 4 }
images:
  - version: "1.0.0"
pools:
  - name: big
    strategy: AutoInPlaceUpdate
    size: 2
    os: "1.0.0"
    kubernetes: "1.34.2"
    maintenance:
      timeWindow: { begin: "220000+0000", end: "230000+0000" }
      autoUpdate: { kubernetesVersion: false, machineImageVersion: false }
  - name: small
    strategy: AutoInPlaceUpdate
    size: 2
    os: "1.0.0"
    kubernetes: "1.34.2"
    maintenance:
      timeWindow: { begin: "220000+0000", end: "230000+0000" }
      autoUpdate: { kubernetesVersion: false, machineImageVersion: false }
steps:
  - maintenanceOperation: { pool: small, operation: rotate-credentials-start }
"#
    .to_owned();
    text.push_str(&pool_field(
        "small",
        ".metadata.annotations.maintenance\\.gardener\\.cloud/operation",
        "rotate-credentials-start",
    ));
    text.push_str(&pool_field(
        "big",
        ".metadata.annotations.maintenance\\.gardener\\.cloud/operation",
        "",
    ));
    text.push_str(
        r#"  - waitUntil:
      until: { pool: { name: small, that: { lastMaintenance: { state: succeeded, description: "rotate-credentials-start" } } } }
      within: 2h
  - waitUntil: { until: { pool: { name: small, that: { count: { are: candidate, count: 0 } } } }, within: 2h }
expect:
  - eventually: { that: { pool: { name: small, that: { anyNode: { are: selected } } } }, within: 2h }
  - never: { pool: { name: big, that: { anyNode: { are: selected } } } }
  - never: { pool: { name: big, that: { lastMaintenance: { state: succeeded, description: "rotate-credentials-start" } } } }
"#,
    );
    let result = engine::run_scenario(&scenario(&text), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
}
