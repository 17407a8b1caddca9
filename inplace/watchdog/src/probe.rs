//! Pure lease-probe arithmetic (no I/O): which nodes are candidates, which leases are expired, and
//! what the prober decides. Mirrors dependency-watchdog's `internal/prober/prober.go`.
//!
//! 1. Candidates are nodes that are managed by the orchestrator (no
//!    `node.machine.sapcloud.io/not-managed-by-mcm` annotation), not unhealthy by the configured
//!    worker conditions (a condition of a listed type with status `True`; `Ready` is not listed, so
//!    a NotReady node still counts), backed by a Machine (label `node`) that is not `Failed` or
//!    `Terminating`, not under in-place update (condition `InPlaceUpdate` with a configured reason,
//!    by default `ReadyForUpdate` and `UpdateFailed`), and that have a Lease in `kube-node-lease`
//!    (nodes without one are ignored, as in DWD).
//! 2. A lease is expired when `renewTime + 0.75 × kcmNodeMonitorGraceDuration ≤ now`; a lease
//!    without `renewTime` is expired.
//! 3. Exactly one candidate: no decision (DWD skips scaling). No candidates: the probe passes.
//!    Otherwise `expired / candidates ≥ nodeLeaseFailureFraction` → scale down, else scale up.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;

/// The fraction of the grace period after which DWD treats a lease as expired.
pub const EXPIRY_BUFFER_FRACTION: f64 = 0.75;

/// Annotation that takes a node out of the orchestrator's (and so the prober's) hands.
pub const ANNOTATION_NOT_MANAGED: &str = "node.machine.sapcloud.io/not-managed-by-mcm";

/// What the prober's node filter needs to know.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Node condition types that make a node unhealthy when `True`.
    pub unhealthy_conditions: Vec<String>,
    /// `InPlaceUpdate` condition reasons that take a node out of the probe.
    pub in_place_reasons: Vec<String>,
}

/// A Machine as the prober sees it: the node it backs and its phase.
#[derive(Debug, Clone)]
pub struct MachineFacts {
    pub node: String,
    pub phase: String,
}

/// The outcome of one lease probe.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseProbe {
    pub candidates: Vec<String>,
    pub expired: Vec<String>,
    /// Nodes left out, with why.
    pub excluded: Vec<(String, &'static str)>,
}

/// What to do with the dependents.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    ScaleDown { fraction: f64 },
    ScaleUp { fraction: f64 },
    /// Exactly one candidate: DWD takes no action.
    Skip,
}

pub(crate) fn probe_leases(
    nodes: &[Node],
    machines: &[MachineFacts],
    leases: &[Lease],
    filter: &Filter,
    grace: Duration,
    now: Timestamp,
) -> LeaseProbe {
    let healthy_machines: BTreeSet<&str> = machines
        .iter()
        .filter(|m| m.phase != "Failed" && m.phase != "Terminating")
        .map(|m| m.node.as_str())
        .collect();
    let mut candidates = Vec::new();
    let mut excluded = Vec::new();
    for node in nodes {
        let Some(name) = node.metadata.name.clone() else { continue };
        let why = exclusion(node, &name, &healthy_machines, filter);
        match why {
            Some(why) => excluded.push((name, why)),
            None => candidates.push(name),
        }
    }
    let leases: std::collections::BTreeMap<&str, &Lease> = leases.iter().filter_map(|l| Some((l.metadata.name.as_deref()?, l))).collect();
    let mut with_lease = Vec::new();
    let mut expired = Vec::new();
    for name in candidates {
        let Some(lease) = leases.get(name.as_str()) else {
            excluded.push((name, "no node lease"));
            continue;
        };
        if lease_expired(lease, grace, now) {
            expired.push(name.clone());
        }
        with_lease.push(name);
    }
    LeaseProbe { candidates: with_lease, expired, excluded }
}

fn exclusion(node: &Node, name: &str, machines: &BTreeSet<&str>, filter: &Filter) -> Option<&'static str> {
    if node.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANNOTATION_NOT_MANAGED)) {
        return Some("not managed by the orchestrator");
    }
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    for condition in conditions.into_iter().flatten() {
        if condition.status == "True" && filter.unhealthy_conditions.contains(&condition.type_) {
            return Some("unhealthy by a worker node condition");
        }
        if condition.type_ == "InPlaceUpdate"
            && condition.reason.as_ref().is_some_and(|r| filter.in_place_reasons.iter().any(|x| x == r))
        {
            return Some("under in-place update");
        }
    }
    if !machines.contains(name) {
        return Some("no Machine that is not Failed or Terminating");
    }
    None
}

/// `renewTime + 0.75 × grace ≤ now`.
pub fn lease_expired(lease: &Lease, grace: Duration, now: Timestamp) -> bool {
    let Some(renew) = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()) else { return true };
    let buffer = grace.mul_f64(EXPIRY_BUFFER_FRACTION);
    match renew.0.checked_add(buffer) {
        Ok(expiry) => expiry <= now,
        Err(_) => false,
    }
}

pub(crate) fn decide(probe: &LeaseProbe, failure_fraction: f64) -> Decision {
    let candidates = probe.candidates.len();
    if candidates == 1 {
        return Decision::Skip;
    }
    if candidates == 0 {
        return Decision::ScaleUp { fraction: 0.0 };
    }
    let fraction = probe.expired.len() as f64 / candidates as f64;
    if fraction >= failure_fraction {
        Decision::ScaleDown { fraction }
    } else {
        Decision::ScaleUp { fraction }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn node(name: &str, conditions: &[(&str, &str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s, r)| NodeCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            reason: Some((*r).into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn lease(name: &str, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(LeaseSpec { renew_time: Some(MicroTime(at(renewed))), ..Default::default() }),
        }
    }

    fn filter() -> Filter {
        Filter {
            unhealthy_conditions: vec!["KernelDeadlock".into(), "ReadonlyFilesystem".into(), "DiskPressure".into()],
            in_place_reasons: vec!["ReadyForUpdate".into(), "UpdateFailed".into()],
        }
    }

    fn machines(names: &[&str]) -> Vec<MachineFacts> {
        names.iter().map(|n| MachineFacts { node: (*n).into(), phase: "Running".into() }).collect()
    }

    #[test]
    fn expiry_is_three_quarters_of_the_grace_period() {
        let grace = Duration::from_secs(40);
        assert!(!lease_expired(&lease("a", 0), grace, at(29)));
        assert!(lease_expired(&lease("a", 0), grace, at(30)));
    }

    #[test]
    fn nodes_under_update_are_not_candidates_but_not_ready_ones_are() {
        let nodes = vec![
            node("a", &[("InPlaceUpdate", "True", "ReadyForUpdate")]),
            node("b", &[("InPlaceUpdate", "True", "UpdateFailed")]),
            node("c", &[("Ready", "False", "NodeStatusUnknown")]),
            node("d", &[("DiskPressure", "True", "x")]),
            node("e", &[("InPlaceUpdate", "True", "SelectedForUpdate")]),
        ];
        let leases = vec![lease("a", 0), lease("b", 0), lease("c", 0), lease("d", 0), lease("e", 100)];
        let probe = probe_leases(&nodes, &machines(&["a", "b", "c", "d", "e"]), &leases, &filter(), Duration::from_secs(40), at(100));
        assert_eq!(probe.candidates, vec!["c", "e"]);
        assert_eq!(probe.expired, vec!["c"]);
        assert_eq!(decide(&probe, 0.6), Decision::ScaleUp { fraction: 0.5 });
    }

    #[test]
    fn failed_or_missing_machines_and_unmanaged_nodes_are_left_out() {
        let mut unmanaged = node("u", &[]);
        unmanaged.metadata.annotations = Some([(ANNOTATION_NOT_MANAGED.to_owned(), "true".to_owned())].into());
        let nodes = vec![node("a", &[]), node("b", &[]), unmanaged, node("m", &[])];
        let mut ms = machines(&["a", "u"]);
        ms.push(MachineFacts { node: "b".into(), phase: "Failed".into() });
        let leases = vec![lease("a", 0), lease("b", 0), lease("u", 0), lease("m", 0)];
        let probe = probe_leases(&nodes, &ms, &leases, &filter(), Duration::from_secs(40), at(100));
        assert_eq!(probe.candidates, vec!["a"]);
        assert_eq!(decide(&probe, 0.6), Decision::Skip);
    }

    #[test]
    fn decides_on_the_fraction_with_more_than_one_candidate() {
        let probe = LeaseProbe { candidates: vec!["a".into(), "b".into(), "c".into()], expired: vec!["a".into(), "b".into()], excluded: vec![] };
        assert!(matches!(decide(&probe, 0.6), Decision::ScaleDown { .. }));
        let probe = LeaseProbe { candidates: vec![], expired: vec![], excluded: vec![] };
        assert!(matches!(decide(&probe, 0.6), Decision::ScaleUp { .. }));
    }
}
