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

//!
//! The prober lists every Node and Lease at each probe and reads Machines from a watch
//! (`machines`), as DWD does. It decodes only what these rules read ([`NodeFacts`],
//! [`MachineItem`], [`LeaseFacts`]): every other field, managedFields above all, is skipped
//! instead of built and dropped, which made the probe the largest cost of a 1,000-node simulated
//! rollout.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

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

/// A list response, its items decoded as `T`.
#[derive(Debug, Deserialize)]
pub struct List<T> {
    pub items: Vec<T>,
}

/// The metadata the prober reads of a Node: name and annotations.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The metadata of an object the prober reads only the name of.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Named {
    #[serde(default)]
    pub name: String,
}

/// A Node as the prober sees it: name, annotations and conditions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeFacts {
    pub metadata: Meta,
    #[serde(default)]
    pub status: Option<NodeStatusFacts>,
}

/// The part of a Node's status the prober reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeStatusFacts {
    #[serde(default)]
    pub conditions: Option<Vec<ConditionFacts>>,
}

/// One node condition.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConditionFacts {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A Machine as the prober's watch decodes it: its metadata without managedFields (labels,
/// deletion, and what the watch needs) and `status.currentStatus.phase`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MachineItem {
    #[serde(deserialize_with = "inplace_api::unmanaged::metadata")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<MachineStatusFacts>,
}

/// The part of a Machine's status the prober reads (not the node conditions mirrored there).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatusFacts {
    #[serde(default)]
    pub current_status: Option<CurrentStatusFacts>,
}

/// A Machine's `status.currentStatus`, its phase.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CurrentStatusFacts {
    #[serde(default)]
    pub phase: Option<String>,
}

/// A Machine as the prober sees it: the node it backs and its phase.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineFacts {
    pub node: String,
    pub phase: String,
}

impl MachineFacts {
    /// The facts of a Machine; `None` for one without a `node` label. A Machine being
    /// deleted is `Terminating`, whatever its phase says.
    pub fn of(machine: &MachineItem) -> Option<Self> {
        let node = machine.metadata.labels.as_ref()?.get("node")?.clone();
        let phase = match &machine.metadata.deletion_timestamp {
            Some(_) => "Terminating".to_owned(),
            None => machine
                .status
                .as_ref()
                .and_then(|s| s.current_status.as_ref()?.phase.clone())
                .unwrap_or_default(),
        };
        Some(Self { node, phase })
    }
}

/// A Lease as the prober sees it: name and `spec.renewTime`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LeaseFacts {
    pub metadata: Named,
    #[serde(default)]
    pub spec: Option<LeaseSpecFacts>,
}

/// The part of a Lease's spec the prober reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpecFacts {
    #[serde(default)]
    pub renew_time: Option<Timestamp>,
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
    ScaleDown {
        fraction: f64,
    },
    ScaleUp {
        fraction: f64,
    },
    /// Exactly one candidate: DWD takes no action.
    Skip,
}

pub(crate) fn probe_leases(
    nodes: &[NodeFacts],
    machines: &[MachineFacts],
    leases: &[LeaseFacts],
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
        let name = node.metadata.name.clone();
        if name.is_empty() {
            continue;
        }
        let why = exclusion(node, &name, &healthy_machines, filter);
        match why {
            Some(why) => excluded.push((name, why)),
            None => candidates.push(name),
        }
    }
    let leases: BTreeMap<&str, &LeaseFacts> = leases
        .iter()
        .map(|l| (l.metadata.name.as_str(), l))
        .collect();
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
    LeaseProbe {
        candidates: with_lease,
        expired,
        excluded,
    }
}

fn exclusion(
    node: &NodeFacts,
    name: &str,
    machines: &BTreeSet<&str>,
    filter: &Filter,
) -> Option<&'static str> {
    if node
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_NOT_MANAGED))
    {
        return Some("not managed by the orchestrator");
    }
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    for condition in conditions.into_iter().flatten() {
        if condition.status == "True" && filter.unhealthy_conditions.contains(&condition.type_) {
            return Some("unhealthy by a worker node condition");
        }
        if condition.type_ == "InPlaceUpdate"
            && condition
                .reason
                .as_ref()
                .is_some_and(|r| filter.in_place_reasons.iter().any(|x| x == r))
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
pub fn lease_expired(lease: &LeaseFacts, grace: Duration, now: Timestamp) -> bool {
    let Some(renew) = lease.spec.as_ref().and_then(|s| s.renew_time) else {
        return true;
    };
    let buffer = grace.mul_f64(EXPIRY_BUFFER_FRACTION);
    match renew.checked_add(buffer) {
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
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn node(name: &str, conditions: &[(&str, &str, &str)]) -> NodeFacts {
        NodeFacts {
            metadata: Meta {
                name: name.into(),
                ..Default::default()
            },
            status: Some(NodeStatusFacts {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s, r)| ConditionFacts {
                            type_: (*t).into(),
                            status: (*s).into(),
                            reason: Some((*r).into()),
                        })
                        .collect(),
                ),
            }),
        }
    }

    fn lease(name: &str, renewed: i64) -> LeaseFacts {
        LeaseFacts {
            metadata: Named { name: name.into() },
            spec: Some(LeaseSpecFacts {
                renew_time: Some(at(renewed)),
            }),
        }
    }

    fn filter() -> Filter {
        Filter {
            unhealthy_conditions: vec![
                "KernelDeadlock".into(),
                "ReadonlyFilesystem".into(),
                "DiskPressure".into(),
            ],
            in_place_reasons: vec!["ReadyForUpdate".into(), "UpdateFailed".into()],
        }
    }

    fn machines(names: &[&str]) -> Vec<MachineFacts> {
        names
            .iter()
            .map(|n| MachineFacts {
                node: (*n).into(),
                phase: "Running".into(),
            })
            .collect()
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
        let leases = vec![
            lease("a", 0),
            lease("b", 0),
            lease("c", 0),
            lease("d", 0),
            lease("e", 100),
        ];
        let probe = probe_leases(
            &nodes,
            &machines(&["a", "b", "c", "d", "e"]),
            &leases,
            &filter(),
            Duration::from_secs(40),
            at(100),
        );
        assert_eq!(probe.candidates, vec!["c", "e"]);
        assert_eq!(probe.expired, vec!["c"]);
        assert_eq!(decide(&probe, 0.6), Decision::ScaleUp { fraction: 0.5 });
    }

    #[test]
    fn failed_or_missing_machines_and_unmanaged_nodes_are_left_out() {
        let mut unmanaged = node("u", &[]);
        unmanaged.metadata.annotations =
            Some([(ANNOTATION_NOT_MANAGED.to_owned(), "true".to_owned())].into());
        let nodes = vec![node("a", &[]), node("b", &[]), unmanaged, node("m", &[])];
        let mut ms = machines(&["a", "u"]);
        ms.push(MachineFacts {
            node: "b".into(),
            phase: "Failed".into(),
        });
        let leases = vec![lease("a", 0), lease("b", 0), lease("u", 0), lease("m", 0)];
        let probe = probe_leases(
            &nodes,
            &ms,
            &leases,
            &filter(),
            Duration::from_secs(40),
            at(100),
        );
        assert_eq!(probe.candidates, vec!["a"]);
        assert_eq!(decide(&probe, 0.6), Decision::Skip);
    }

    /// The facts decode from what the API serves, every other field skipped.
    #[test]
    fn facts_decode_from_served_objects() {
        let nodes: List<NodeFacts> = serde_json::from_value(serde_json::json!({"kind": "NodeList", "items": [{
            "metadata": {"name": "a", "annotations": {ANNOTATION_NOT_MANAGED: "true"},
                "managedFields": [{"manager": "agent", "fieldsV1": {"f:status": {}}}]},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "InPlaceUpdate", "status": "True", "reason": "ReadyForUpdate", "lastHeartbeatTime": null}], "nodeInfo": {"osImage": "x"}},
        }]}))
        .unwrap();
        let node = &nodes.items[0];
        assert_eq!(node.metadata.name, "a");
        assert!(
            node.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(ANNOTATION_NOT_MANAGED)
        );
        let condition = &node.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_deref()
            ),
            ("InPlaceUpdate", "True", Some("ReadyForUpdate"))
        );

        let leases: List<LeaseFacts> = serde_json::from_value(serde_json::json!({"items": [
            {"metadata": {"name": "a"}, "spec": {"holderIdentity": "a", "renewTime": "2023-11-14T22:13:20.000000Z"}},
            {"metadata": {"name": "b"}, "spec": {}},
        ]}))
        .unwrap();
        assert_eq!(
            leases.items[0].spec.as_ref().unwrap().renew_time,
            Some(at(0))
        );
        assert!(lease_expired(
            &leases.items[1],
            Duration::from_secs(40),
            at(0)
        ));

        let machines: List<MachineItem> = serde_json::from_value(serde_json::json!({"items": [
            {"metadata": {"name": "m1", "labels": {"node": "a"}}, "status": {"currentStatus": {"phase": "Running"}}},
            {"metadata": {"name": "m2", "labels": {"node": "b"}, "deletionTimestamp": "2023-11-14T22:13:20Z"}, "status": {"currentStatus": {"phase": "Running"}}},
            {"metadata": {"name": "m3"}},
        ]}))
        .unwrap();
        let facts: Vec<MachineFacts> = machines.items.iter().filter_map(MachineFacts::of).collect();
        assert_eq!(
            facts
                .iter()
                .map(|m| (m.node.as_str(), m.phase.as_str()))
                .collect::<Vec<_>>(),
            vec![("a", "Running"), ("b", "Terminating")]
        );
    }

    #[test]
    fn decides_on_the_fraction_with_more_than_one_candidate() {
        let probe = LeaseProbe {
            candidates: vec!["a".into(), "b".into(), "c".into()],
            expired: vec!["a".into(), "b".into()],
            excluded: vec![],
        };
        assert!(matches!(decide(&probe, 0.6), Decision::ScaleDown { .. }));
        let probe = LeaseProbe {
            candidates: vec![],
            expired: vec![],
            excluded: vec![],
        };
        assert!(matches!(decide(&probe, 0.6), Decision::ScaleUp { .. }));
    }
}
