//! The lab's workloads as a cluster keeps them: a `pods` workload is a ReplicaSet that controls
//! its pods, and a pod a drain evicts comes back on a node that takes pods, so a budget with
//! `maxUnavailable` lets the next eviction through, as on a real cluster.

use std::path::Path;

use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::load_str;
use rackproof_harness::scenario::Backend;

/// Three nodes with two pods each under a budget allowing one disruption, all updated; then a
/// `run` step counts the pods (name, node, controller kind, phase) with kubectl.
const ROLLOUT_WITH_A_BUDGET: &str = r#"
lab: { nodes: 3 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
pool: { strategy: AutoInPlaceUpdate, os: "1.0.0", kubernetes: "1.34.2", machineDrainTimeout: 1h }
workloads:
  - pods: { name: web, perNode: 2, pdbMaxUnavailable: 1 }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutComplete, within: 1h }
  - sleep: 10s
  - run:
      command:
        - sh
        - -c
        - >-
          pods=$(kubectl get pods -n apps -l app=web --no-headers
          -o 'custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,OWNER:.metadata.ownerReferences[0].kind,PHASE:.status.phase,DELETING:.metadata.deletionTimestamp') || exit 2;
          echo "$pods" >&2;
          test "$(echo "$pods" | awk '$3 == "ReplicaSet" && $4 == "Running" && $5 == "<none>"' | wc -l)" = 6
"#;

#[test]
fn evicted_pods_come_back_on_other_nodes_and_the_rollout_never_forces_a_drain() {
    rackproof_test_support::require_kubectl();
    let loaded = load_str(Path::new("workloads-test.yaml"), ROLLOUT_WITH_A_BUDGET)
        .unwrap_or_else(|e| panic!("{e}"));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let texts: Vec<&str> = result
        .timeline
        .entries
        .iter()
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        !texts.iter().any(|t| t.contains("ForcedDrain")),
        "no drain was forced: {texts:#?}"
    );
}
