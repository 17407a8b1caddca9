//! Conditions over the observed world, compiled once (regexes) and evaluated at every change.

use regex::Regex;

use crate::engine::components::supervisor::leader_lease;
use crate::engine::judge::world::World;
use crate::scenario::{Condition, NodeState};

/// A condition ready to evaluate.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    condition: Condition,
    reason: Option<Regex>,
    description: Option<Regex>,
}

impl Check {
    /// Compiles a condition. Regexes were checked when the scenario loaded.
    pub(crate) fn new(condition: &Condition) -> Self {
        let compile = |pattern: Option<&str>| pattern.and_then(|r| Regex::new(r).ok());
        let inner = match condition {
            Condition::Pool(scoped) => &scoped.that.value,
            other => other,
        };
        let (reason, description) = match inner {
            Condition::Node(node) => (compile(node.reason.as_deref()), None),
            Condition::LastMaintenance(m) => (
                compile(m.reason.as_deref()),
                compile(m.description.as_deref()),
            ),
            _ => (None, None),
        };
        Self {
            condition: condition.clone(),
            reason,
            description,
        }
    }

    /// Whether the condition holds in `world`.
    pub(crate) fn holds(&self, world: &World) -> bool {
        self.holds_in(world, &self.condition, None)
    }

    /// Whether `condition` holds in `world` within `pool` (`None`: every pool, or the only one).
    fn holds_in(&self, world: &World, condition: &Condition, pool: Option<&str>) -> bool {
        let views = || {
            world
                .registered_views()
                .filter(move |v| world.in_pool(v, pool))
        };
        match condition {
            Condition::Node(node) => {
                world.node_is(&node.name, node.is)
                    && match (&self.reason, world.nodes.get(node.name.as_str())) {
                        (None, _) => true,
                        (Some(pattern), Some(view)) => view
                            .failed_reason
                            .as_deref()
                            .is_some_and(|r| pattern.is_match(r)),
                        (Some(_), None) => false,
                    }
            }
            Condition::AllNodes(all) => {
                views().next().is_some() && views().all(|v| world.view_is(v, all.are))
            }
            Condition::AnyNode(any) => views().any(|v| world.view_is(v, any.are)),
            Condition::Count(c) => {
                let n = views().filter(|v| world.view_is(v, c.are)).count();
                u32::try_from(n).is_ok_and(|n| n == c.count)
            }
            // Without a pool: every pool's rollout (validation allows that with one pool only).
            Condition::RolloutComplete => match pool {
                Some(pool) => world.rollout_complete(pool),
                None => {
                    !world.pools.is_empty() && world.pools.keys().all(|p| world.rollout_complete(p))
                }
            },
            Condition::RolloutHalted => match pool {
                Some(pool) => world.rollout_halted(pool),
                None => world.pools.keys().any(|p| world.rollout_halted(p)),
            },
            Condition::Pool(scoped) => {
                self.holds_in(world, &scoped.that, Some(scoped.name.as_str()))
            }
            Condition::DependentsScaledDown => world.dependents_scaled_down(),
            Condition::DependentsRunning => world.dependents_running(),
            Condition::Leader(leader) => leader_lease(leader.of)
                .is_some_and(|lease| world.leaders.get(lease) == Some(&leader.is.value)),
            Condition::PoolVersion(v) => {
                let matches = |want: &Option<crate::scenario::Located<String>>,
                               have: &Option<String>| {
                    want.as_ref()
                        .is_none_or(|w| have.as_deref() == Some(w.value.as_str()))
                };
                world.pool(pool).is_some_and(|state| {
                    matches(&v.os, &state.view.os) && matches(&v.kubernetes, &state.view.kubernetes)
                })
            }
            Condition::LastMaintenance(m) => world
                .pool(pool)
                .and_then(|state| state.view.last_maintenance.as_ref())
                .is_some_and(|last| {
                    last.state == m.state.as_api()
                        && self.reason.as_ref().is_none_or(|r| {
                            last.failure_reason
                                .as_deref()
                                .is_some_and(|f| r.is_match(f))
                        })
                        && self
                            .description
                            .as_ref()
                            .is_none_or(|d| d.is_match(&last.description))
                }),
        }
    }

    /// A short description for reports: `node-3 is failed (reason ~ /timed out/)`.
    pub(crate) fn describe(&self) -> String {
        describe(&self.condition)
    }
}

/// A short description of a condition.
pub(crate) fn describe(condition: &Condition) -> String {
    match condition {
        Condition::Node(node) => {
            let mut text = format!("{} is {}", node.name.value, state_name(node.is));
            if let Some(reason) = &node.reason {
                text.push_str(&format!(" (reason ~ /{reason}/)"));
            }
            text
        }
        Condition::AllNodes(all) => format!("all nodes are {}", state_name(all.are)),
        Condition::AnyNode(any) => format!("some node is {}", state_name(any.are)),
        Condition::Count(c) => format!("exactly {} nodes are {}", c.count, state_name(c.are)),
        Condition::RolloutComplete => "the rollout is complete".to_owned(),
        Condition::RolloutHalted => "the rollout is halted".to_owned(),
        Condition::DependentsScaledDown => "the watchdog's dependents are scaled down".to_owned(),
        Condition::DependentsRunning => {
            "the watchdog's dependents run with their replicas".to_owned()
        }
        Condition::Leader(leader) => format!("{} leads", leader.is.value),
        Condition::PoolVersion(v) => {
            let mut parts = Vec::new();
            if let Some(os) = &v.os {
                parts.push(format!("os {}", os.value));
            }
            if let Some(k) = &v.kubernetes {
                parts.push(format!("kubernetes {}", k.value));
            }
            format!("the pool names {}", parts.join(" and "))
        }
        Condition::Pool(scoped) => {
            format!("in pool {}: {}", scoped.name.value, describe(&scoped.that))
        }
        Condition::LastMaintenance(m) => {
            let mut text = format!("the last maintenance {}", m.state.as_api());
            if let Some(reason) = &m.reason {
                text.push_str(&format!(" (reason ~ /{reason}/)"));
            }
            if let Some(description) = &m.description {
                text.push_str(&format!(" (description ~ /{description}/)"));
            }
            text
        }
    }
}

/// The scenario-file name of a node state.
pub(crate) fn state_name(state: NodeState) -> &'static str {
    match state {
        NodeState::Candidate => "candidate",
        NodeState::Selected => "selected",
        NodeState::Drained => "drained",
        NodeState::ReadyForUpdate => "readyForUpdate",
        NodeState::Updated => "updated",
        NodeState::Failed => "failed",
        NodeState::Ready => "ready",
        NodeState::NotReady => "notReady",
    }
}
