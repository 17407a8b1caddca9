//! Pure selection arithmetic for one in-place rollout: who is unavailable, whether the rollout is
//! halted, and which candidates to select next (no I/O; the deployment reconciler feeds it).
//!
//! The rules (MCM's `reconcileOldMachineSetsInPlace` / `selectNumOfMachineForUpdate`, written as
//! availability):
//!
//! 1. A member is *available* when its node is Ready — its `Ready` condition is `True` and its
//!    Lease was renewed within the node-monitor grace period (a condition nobody updated since the
//!    kubelet died says nothing) — it is not selected for update and it has no failed mark. Everything else is unavailable: nodes in progress (selected, including those
//!    whose update succeeded but that have not moved yet), failed nodes, and nodes that are NotReady
//!    or not provisioned for any other reason.
//! 2. Selection keeps `available ≥ replicas − maxUnavailable`: at most
//!    `available − (replicas − maxUnavailable)` nodes are selected in one pass. Without surge
//!    machines this is exactly "in progress + failed + NotReady ≤ maxUnavailable"; Running surge
//!    machines add availability, as in MCM.
//! 3. Selection also stops once `new MachineSet replicas + in progress + failed ≥ replicas`: the
//!    remaining old machines are surplus that the surge replaced, and are terminated instead.
//! 4. The rollout is *halted* when failed nodes reach `maxUnavailable` (at least one): nothing is
//!    selected, whatever surge capacity exists, until a person removes a failed mark.
//! 5. Candidates are taken in node-name order, so a run is reproducible.

use std::collections::BTreeSet;

/// The result label a node carries, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpdateResult {
    Successful,
    Failed,
}

/// One Machine of a MachineDeployment and what its node says.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// Node name, when the Machine is bound.
    pub(crate) node: Option<String>,
    /// Owned by an old MachineSet (still on the old template).
    pub(crate) old: bool,
    /// Node Ready condition is True and its Lease does not contradict it (`leases`).
    pub(crate) ready: bool,
    pub(crate) candidate: bool,
    pub(crate) selected: bool,
    pub(crate) result: Option<UpdateResult>,
}

/// Whether a person or the orchestrator picks nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Orchestration {
    Auto,
    Manual,
}

/// The inputs that come from the MachineDeployment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) replicas: u32,
    pub(crate) max_unavailable: u32,
    pub(crate) new_set_replicas: u32,
    pub(crate) orchestration: Orchestration,
}

/// What one pass decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) available: u32,
    pub(crate) in_progress: u32,
    pub(crate) failed: u32,
    /// Old members not yet updated (candidates, in progress or failed): the pool's pending work.
    pub(crate) pending: u32,
    pub(crate) halted: bool,
    /// Node names to label `selected-for-update` now.
    pub(crate) select: Vec<String>,
}

#[cfg(test)]
impl Plan {
    /// Members counted unavailable (in progress + failed + otherwise not available).
    pub(crate) fn unavailable(&self, members: usize) -> u32 {
        (members as u32).saturating_sub(self.available)
    }
}

pub(crate) fn plan(members: &[Member], limits: Limits) -> Plan {
    let mut available = 0u32;
    let mut in_progress = 0u32;
    let mut failed = 0u32;
    let mut pending = 0u32;
    let mut eligible = BTreeSet::new();
    for member in members {
        let is_failed = member.result == Some(UpdateResult::Failed);
        if is_failed {
            failed += 1;
        } else if member.selected && member.old {
            in_progress += 1;
        }
        if member.old {
            pending += 1;
        }
        let is_available = member.ready && !member.selected && !is_failed && member.node.is_some();
        if is_available {
            available += 1;
        }
        if let Some(node) = &member.node
            && member.old
            && member.candidate
            && is_available
            && member.result.is_none()
        {
            eligible.insert(node.clone());
        }
    }
    let halted = failed > 0 && failed >= limits.max_unavailable.max(1);
    let mut select = Vec::new();
    if limits.orchestration == Orchestration::Auto && !halted {
        let min_available = limits.replicas.saturating_sub(limits.max_unavailable);
        let by_availability = available.saturating_sub(min_available);
        let by_remaining = limits
            .replicas
            .saturating_sub(limits.new_set_replicas + in_progress + failed);
        let count = by_availability.min(by_remaining) as usize;
        select = eligible.into_iter().take(count).collect();
    }
    Plan {
        available,
        in_progress,
        failed,
        pending,
        halted,
        select,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Member {
        Member {
            node: Some(name.to_owned()),
            old: true,
            ready: true,
            candidate: true,
            selected: false,
            result: None,
        }
    }

    fn limits(replicas: u32, max_unavailable: u32) -> Limits {
        Limits {
            replicas,
            max_unavailable,
            new_set_replicas: 0,
            orchestration: Orchestration::Auto,
        }
    }

    #[test]
    fn selects_up_to_max_unavailable_in_name_order() {
        let members = vec![node("c"), node("a"), node("b"), node("d")];
        let plan = plan(&members, limits(4, 2));
        assert_eq!(plan.select, vec!["a", "b"]);
        assert!(!plan.halted);
    }

    #[test]
    fn counts_in_progress_failed_and_not_ready_as_unavailable() {
        let mut members = vec![node("a"), node("b"), node("c"), node("d"), node("e")];
        members[0].selected = true;
        members[1].ready = false;
        let plan = plan(&members, limits(5, 3));
        assert_eq!(plan.in_progress, 1);
        assert_eq!(plan.unavailable(5), 2);
        assert_eq!(plan.select, vec!["c"]);
    }

    #[test]
    fn halts_at_exactly_max_unavailable_failures() {
        let mut members = vec![node("a"), node("b"), node("c"), node("d")];
        members[0].result = Some(UpdateResult::Failed);
        members[0].selected = true;
        let one = plan(&members, limits(4, 2));
        assert!(!one.halted);
        assert_eq!(one.select, vec!["b"]);
        members[1].result = Some(UpdateResult::Failed);
        let two = plan(&members, limits(4, 2));
        assert!(two.halted);
        assert!(two.select.is_empty());
        assert_eq!(two.failed, 2);
    }

    #[test]
    fn manual_selects_nothing() {
        let members = vec![node("a"), node("b")];
        let mut l = limits(2, 1);
        l.orchestration = Orchestration::Manual;
        assert!(plan(&members, l).select.is_empty());
    }

    #[test]
    fn surge_machines_count_until_running_and_stop_selection_when_replaced() {
        // 3 replicas, maxUnavailable 1, maxSurge 1: one new machine pending.
        let mut members = vec![node("a"), node("b"), node("c")];
        let pending_new = Member {
            node: None,
            old: false,
            ready: false,
            candidate: false,
            selected: false,
            result: None,
        };
        members.push(pending_new);
        let mut l = limits(3, 1);
        l.new_set_replicas = 1;
        // 3 available, min 2: one may be selected; remaining 3 - 1 = 2.
        assert_eq!(plan(&members, l).select, vec!["a"]);
        // Two in progress plus the surge machine cover all replicas: nothing more.
        members[0].selected = true;
        members[1].selected = true;
        members[3] = Member {
            node: Some("n".into()),
            old: false,
            ready: true,
            candidate: false,
            selected: false,
            result: None,
        };
        assert!(plan(&members, l).select.is_empty());
    }

    #[test]
    fn never_selects_failed_unready_or_non_candidates() {
        let mut members = vec![node("a"), node("b"), node("c")];
        members[0].candidate = false;
        members[1].ready = false;
        let plan = plan(&members, limits(3, 3));
        assert_eq!(plan.select, vec!["c"]);
    }
}
