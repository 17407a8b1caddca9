//! The safety invariants, checked on every observed change by comparing the world before and
//! after it (and, for `selectedOnce`, what each node finished before). A violation names the
//! invariant, the node and what was seen.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::judge::world::World;
use crate::scenario::{InvariantName, Invariants};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: InvariantName,
    pub node: Option<String>,
    pub message: String,
}

/// Checks the enabled invariants.
#[derive(Debug, Clone)]
pub struct InvariantChecker {
    enabled: BTreeSet<InvariantKey>,
    /// Each node that finished an update successfully, and the round it finished
    /// ([`World::spec_round`] then).
    finished_round: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct InvariantKey(u8);

fn key(name: InvariantName) -> InvariantKey {
    InvariantKey(match name {
        InvariantName::MaxUnavailable => 0,
        InvariantName::DrainedBeforeReady => 1,
        InvariantName::FailedStaysCordoned => 2,
        InvariantName::CleanAfterSuccess => 3,
        InvariantName::WatchdogIgnoresUpdates => 4,
        InvariantName::DependentsRestored => 5,
        InvariantName::SelectedOnce => 6,
    })
}

const ALL: [InvariantName; 7] = [
    InvariantName::MaxUnavailable,
    InvariantName::DrainedBeforeReady,
    InvariantName::FailedStaysCordoned,
    InvariantName::CleanAfterSuccess,
    InvariantName::WatchdogIgnoresUpdates,
    InvariantName::DependentsRestored,
    InvariantName::SelectedOnce,
];

impl InvariantChecker {
    /// All invariants but those the scenario disables.
    pub fn new(config: &Invariants) -> Self {
        let disabled: BTreeSet<InvariantKey> = config.disable.iter().map(|d| key(d.name)).collect();
        Self {
            enabled: ALL
                .iter()
                .map(|n| key(*n))
                .filter(|k| !disabled.contains(k))
                .collect(),
            finished_round: BTreeMap::new(),
        }
    }

    fn on(&self, name: InvariantName) -> bool {
        self.enabled.contains(&key(name))
    }

    /// The violations that the change from `before` to `after` shows. `before` may hold only the
    /// nodes that changed: only those are compared.
    pub fn check(&mut self, before: &World, after: &World) -> Vec<Violation> {
        let mut found = Vec::new();
        if self.on(InvariantName::MaxUnavailable) {
            max_unavailable(before, after, &mut found);
        }
        for (name, was) in &before.nodes {
            let Some(now) = after.nodes.get(name) else {
                continue;
            };
            let node = Some(name.clone());
            let became_ready_for_update = now.in_place_reason.as_deref()
                == Some(inplace_api::keys::REASON_READY_FOR_UPDATE)
                && was.in_place_reason != now.in_place_reason;
            if self.on(InvariantName::DrainedBeforeReady)
                && became_ready_for_update
                && (!now.unschedulable || now.evictable_pods > 0)
            {
                found.push(Violation {
                    invariant: InvariantName::DrainedBeforeReady,
                    node: node.clone(),
                    message: format!(
                        "{name} became ReadyForUpdate while {}",
                        if now.unschedulable {
                            format!(
                                "{} evictable pods were still bound to it",
                                now.evictable_pods
                            )
                        } else {
                            "it was not cordoned".to_owned()
                        }
                    ),
                });
            }
            if self.on(InvariantName::FailedStaysCordoned)
                && was.failed()
                && now.failed()
                && was.unschedulable
                && !now.unschedulable
            {
                found.push(Violation {
                    invariant: InvariantName::FailedStaysCordoned,
                    node: node.clone(),
                    message: format!(
                        "{name} was uncordoned while it still carries the failed mark"
                    ),
                });
            }
            let finished = was.candidate && !now.candidate && !now.failed();
            let round = after.pool_of(now).map_or(0, |p| p.spec_round);
            if finished {
                self.finished_round.insert(name.clone(), round);
            }
            if self.on(InvariantName::SelectedOnce)
                && !was.selected
                && now.selected
                && self.finished_round.get(name) == Some(&round)
            {
                found.push(Violation {
                    invariant: InvariantName::SelectedOnce,
                    node: node.clone(),
                    message: format!(
                        "{name} was selected again for the pool spec it had already been updated to (round {round})"
                    ),
                });
            }
            if self.on(InvariantName::CleanAfterSuccess) && finished {
                let mut leftovers = Vec::new();
                if now.selected {
                    leftovers.push("the selected-for-update label");
                }
                if now.result.is_some() {
                    leftovers.push("the update-result label");
                }
                if now.failed_reason.is_some() {
                    leftovers.push("the update-failed-reason annotation");
                }
                if now.unschedulable {
                    leftovers.push("the cordon");
                }
                if !leftovers.is_empty() {
                    found.push(Violation {
                        invariant: InvariantName::CleanAfterSuccess,
                        node,
                        message: format!(
                            "{name} finished its update but kept {}",
                            leftovers.join(", ")
                        ),
                    });
                }
            }
        }
        if self.on(InvariantName::WatchdogIgnoresUpdates)
            && !before.dependents_scaled_down()
            && after.dependents_scaled_down()
            && after.outage.is_empty()
        {
            let updating: Vec<&str> = after
                .nodes
                .iter()
                .filter(|(_, v)| v.in_progress() || v.failed())
                .map(|(n, _)| n.as_str())
                .collect();
            found.push(Violation {
                invariant: InvariantName::WatchdogIgnoresUpdates,
                node: None,
                message: format!(
                    "the watchdog scaled its dependents down with no real outage (nodes under update or failed: {})",
                    if updating.is_empty() { "none".to_owned() } else { updating.join(", ") }
                ),
            });
        }
        found
    }

    /// Checks that only make sense at the end of a run.
    pub fn check_end(&self, world: &World) -> Vec<Violation> {
        let mut found = Vec::new();
        if self.on(InvariantName::DependentsRestored)
            && world.outage.is_empty()
            && !world.dependents_running()
        {
            found.push(Violation {
                invariant: InvariantName::DependentsRestored,
                node: None,
                message: format!(
                    "the outage is over but the dependents run {:?} instead of {:?}",
                    world
                        .dependents
                        .iter()
                        .map(|(n, d)| (n.as_str(), d.replicas))
                        .collect::<Vec<_>>(),
                    world.dependents_at_start
                ),
            });
        }
        found
    }
}

/// Each pool keeps its own `maxUnavailable` over its own nodes (Auto pools: in Manual pools the
/// person selecting decides).
fn max_unavailable(before: &World, after: &World, found: &mut Vec<Violation>) {
    for (name, was) in &before.nodes {
        let Some(now) = after.nodes.get(name) else {
            continue;
        };
        let newly_selected = now.in_progress() && !was.in_progress();
        if !newly_selected {
            continue;
        }
        let pool = after.pool_name_of(now);
        let Some(state) = pool.and_then(|p| after.pools.get(p)) else {
            continue;
        };
        if state.manual {
            continue;
        }
        let limit = state.max_unavailable;
        let floor = state.size.saturating_sub(limit);
        // Availability as the lab has it: a node powered off or with an expired Lease is down
        // even while its `Ready` condition still says `True`.
        let available = after.truly_available(pool);
        if available < floor {
            let stale = after.stale_ready();
            let stale = if stale.is_empty() {
                String::new()
            } else {
                format!(
                    "; down in the lab while their Ready condition says True: {}",
                    stale.join(", ")
                )
            };
            found.push(Violation {
                invariant: InvariantName::MaxUnavailable,
                node: Some(name.clone()),
                message: format!(
                    "{name} was taken out for update leaving {available} of {} nodes{} available (maxUnavailable {limit}; unavailable by their conditions: {}{stale})",
                    state.size,
                    match pool {
                        Some(pool) if after.pools.len() > 1 => format!(" of pool {pool}"),
                        _ => String::new(),
                    },
                    after.unavailable_in(pool)
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::judge::world::{NodeView, PoolState};

    fn pool(size: usize, max_unavailable: u32) -> PoolState {
        PoolState {
            target_os: "1.1.0".into(),
            max_unavailable,
            size: u32::try_from(size).unwrap(),
            ..PoolState::default()
        }
    }

    fn world(nodes: &[(&str, NodeView)], max_unavailable: u32) -> World {
        World {
            nodes: nodes
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
            pools: BTreeMap::from([("workers".to_owned(), pool(nodes.len(), max_unavailable))]),
            ..World::default()
        }
    }

    /// Two pools of two nodes each, `maxUnavailable: 1` each; nodes `a*` in pool `big`, `b*`
    /// in pool `small`.
    fn two_pools(nodes: &[(&str, NodeView)]) -> World {
        World {
            nodes: nodes
                .iter()
                .map(|(n, v)| {
                    let pool = if n.starts_with('a') { "big" } else { "small" };
                    let view = NodeView {
                        pool: Some(pool.to_owned()),
                        ..v.clone()
                    };
                    ((*n).to_owned(), view)
                })
                .collect(),
            pools: BTreeMap::from([
                ("big".to_owned(), pool(2, 1)),
                ("small".to_owned(), pool(2, 1)),
            ]),
            ..World::default()
        }
    }

    #[test]
    fn each_pool_keeps_its_own_max_unavailable() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        // One node out in each pool: each pool is at its limit, neither above it.
        let before = two_pools(&[
            ("a1", selected()),
            ("a2", ready()),
            ("b1", ready()),
            ("b2", ready()),
        ]);
        let after = two_pools(&[
            ("a1", selected()),
            ("a2", ready()),
            ("b1", selected()),
            ("b2", ready()),
        ]);
        assert_eq!(checker.check(&before, &after), []);
        // A second node out in pool big is a violation of big's limit, named as big's.
        let before = after.clone();
        let after = two_pools(&[
            ("a1", selected()),
            ("a2", selected()),
            ("b1", selected()),
            ("b2", ready()),
        ]);
        let violations = checker.check(&before, &after);
        assert!(
            violations
                .iter()
                .any(|v| v.invariant == InvariantName::MaxUnavailable
                    && v.node.as_deref() == Some("a2")
                    && v.message.contains("of pool big")),
            "{violations:?}"
        );
    }

    fn ready() -> NodeView {
        NodeView {
            registered: true,
            ready: true,
            candidate: true,
            os_version: Some("1.0.0".into()),
            ..NodeView::default()
        }
    }

    fn selected() -> NodeView {
        NodeView {
            selected: true,
            unschedulable: true,
            ..ready()
        }
    }

    #[test]
    fn selecting_a_second_node_at_max_unavailable_one_is_a_violation() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let before = world(&[("a", selected()), ("b", ready())], 1);
        let after = world(&[("a", selected()), ("b", selected())], 1);
        let violations = checker.check(&before, &after);
        assert!(
            violations
                .iter()
                .any(|v| v.invariant == InvariantName::MaxUnavailable
                    && v.node.as_deref() == Some("b")),
            "{violations:?}"
        );
    }

    #[test]
    fn a_not_ready_node_counts_against_the_next_selection() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let dead = NodeView {
            ready: false,
            ..ready()
        };
        let before = world(&[("a", dead.clone()), ("b", ready())], 1);
        let after = world(&[("a", dead), ("b", selected())], 1);
        assert_eq!(checker.check(&before, &after).len(), 1);
    }

    #[test]
    fn a_node_down_in_the_lab_counts_against_the_next_selection_whatever_its_condition_says() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut before = world(&[("a", ready()), ("b", ready()), ("c", ready())], 1);
        before.now = Some(now);
        // a's kubelet died minutes ago; nobody marked it NotReady.
        before
            .lease_expiry
            .insert("a".into(), "2026-01-01T00:05:00Z".parse().unwrap());
        before
            .lease_expiry
            .insert("b".into(), "2026-01-01T00:10:30Z".parse().unwrap());
        let mut after = world(&[("a", ready()), ("b", selected()), ("c", ready())], 1);
        after.now = before.now;
        after.lease_expiry = before.lease_expiry.clone();
        let violations = checker.check(&before.with_only(&["b".into()]), &after);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].message.contains("says True: a"),
            "{violations:?}"
        );
        // The same with a powered off instead.
        after.lease_expiry.clear();
        after.powered_off.insert("a".into());
        assert_eq!(
            checker
                .check(&before.with_only(&["b".into()]), &after)
                .len(),
            1
        );
        // Alive: no violation.
        after.powered_off.clear();
        assert!(
            checker
                .check(&before.with_only(&["b".into()]), &after)
                .is_empty()
        );
    }

    #[test]
    fn ready_for_update_before_the_drain_finished_is_a_violation() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let before = world(&[("a", selected())], 1);
        let mut early = selected();
        early.in_place_reason = Some(inplace_api::keys::REASON_READY_FOR_UPDATE.into());
        early.evictable_pods = 2;
        let after = world(&[("a", early)], 1);
        let violations = checker.check(&before, &after);
        assert_eq!(
            violations[0].invariant,
            InvariantName::DrainedBeforeReady,
            "{violations:?}"
        );
    }

    #[test]
    fn uncordoning_a_failed_node_is_a_violation_and_can_be_disabled() {
        let failed = NodeView {
            result: Some("failed".into()),
            ..selected()
        };
        let uncordoned = NodeView {
            unschedulable: false,
            ..failed.clone()
        };
        let before = world(&[("a", failed)], 1);
        let after = world(&[("a", uncordoned)], 1);
        let mut all = InvariantChecker::new(&Invariants::default());
        assert!(
            all.check(&before, &after)
                .iter()
                .any(|v| v.invariant == InvariantName::FailedStaysCordoned)
        );
        let config = Invariants {
            disable: vec![crate::scenario::DisabledInvariant {
                name: InvariantName::FailedStaysCordoned,
                reason: "test".into(),
            }],
        };
        assert!(
            InvariantChecker::new(&config)
                .check(&before, &after)
                .is_empty()
        );
    }

    #[test]
    fn leftover_labels_after_success_are_a_violation() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let before = world(
            &[(
                "a",
                NodeView {
                    result: Some("successful".into()),
                    ..selected()
                },
            )],
            1,
        );
        let after = world(
            &[(
                "a",
                NodeView {
                    candidate: false,
                    selected: false,
                    unschedulable: false,
                    result: Some("successful".into()),
                    ..ready()
                },
            )],
            1,
        );
        let violations = checker.check(&before, &after);
        assert!(
            violations[0].message.contains("update-result"),
            "{violations:?}"
        );
    }

    #[test]
    fn a_scale_down_without_an_outage_is_a_violation() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let mut before = world(&[("a", selected())], 1);
        before.dependents.insert(
            "kcm".into(),
            crate::engine::judge::world::DependentView { replicas: 1 },
        );
        let mut after = before.clone();
        after.dependents.insert(
            "kcm".into(),
            crate::engine::judge::world::DependentView { replicas: 0 },
        );
        assert_eq!(
            checker.check(&before, &after)[0].invariant,
            InvariantName::WatchdogIgnoresUpdates
        );
        after.outage.insert("b".into());
        assert!(checker.check(&before, &after).is_empty());
    }

    #[test]
    fn selecting_a_node_again_for_the_update_it_finished_is_a_violation_but_not_for_the_next() {
        let mut checker = InvariantChecker::new(&Invariants::default());
        let done = NodeView {
            os_version: Some("1.1.0".into()),
            candidate: false,
            ..ready()
        };
        let reselected = NodeView {
            selected: true,
            unschedulable: true,
            ..done.clone()
        };
        let mut round = |view_before: &NodeView, view_after: &NodeView, updates: u32| {
            let mut before = world(&[("a", view_before.clone())], 1);
            before
                .pools
                .values_mut()
                .for_each(|p| p.spec_round = updates);
            let mut after = world(&[("a", view_after.clone())], 1);
            after
                .pools
                .values_mut()
                .for_each(|p| p.spec_round = updates);
            checker.check(&before, &after)
        };
        assert!(
            round(&selected(), &done, 1).is_empty(),
            "a finishes update 1"
        );
        let again = round(&done, &reselected, 1);
        assert!(
            again
                .iter()
                .any(|v| v.invariant == InvariantName::SelectedOnce
                    && v.node.as_deref() == Some("a")),
            "{again:?}"
        );
        assert!(
            round(&done, &reselected, 2)
                .iter()
                .all(|v| v.invariant != InvariantName::SelectedOnce),
            "update 2 may select it"
        );
    }
}
