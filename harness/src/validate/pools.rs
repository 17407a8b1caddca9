//! Meaning checks about the pools: `pool` or `pools` (not both, not neither), pool names, how
//! the lab's nodes are shared out among several pools, and that whatever is about one pool of
//! several says which.

use std::collections::BTreeSet;

use crate::diagnostic::did_you_mean;
use crate::scenario::{Backend, Condition, Located, Pool, Position, Workload};

use super::{Checker, is_dns_label};

impl Checker<'_> {
    /// `pool` or `pools`, each pool's name, and the lab nodes several pools take.
    pub(super) fn pool_list(&mut self) {
        let scenario = &self.loaded.scenario;
        match (&scenario.pool, &scenario.pools) {
            (Some(_), Some(pools)) => self.at(
                pools.at,
                "the scenario gives both `pool` and `pools`",
                "give one pool as `pool:`, or several as `pools:` (a list), not both",
            ),
            (None, None) => self.top(
                "the scenario gives no `pool`",
                "add `pool: { strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }`, or several pools as `pools:` (a list)",
            ),
            (None, Some(pools)) if pools.is_empty() => self.at(
                pools.at,
                "`pools` is empty",
                "list at least one pool, or write the one pool as `pool:`",
            ),
            _ => {}
        }
        let mut seen = BTreeSet::new();
        for pool in scenario.pools() {
            if !is_dns_label(&pool.name) {
                self.at(
                    pool.at,
                    format!("pool name {:?} is not a valid Kubernetes name", pool.name),
                    "use lowercase letters, digits and '-', starting and ending with a letter or digit (e.g. `name: small`)",
                );
            }
            if !seen.insert(pool.name.clone()) {
                self.at(
                    pool.at,
                    format!("pool {:?} is listed twice", pool.name),
                    "give each pool its own `name`",
                );
            }
        }
        if scenario.several_pools() {
            self.several_pools();
        }
        self.workload_names();
    }

    /// Workloads are named once across the scenario and its pools: their pods, budgets and
    /// DaemonSets are named after them.
    fn workload_names(&mut self) {
        let scenario = &self.loaded.scenario;
        let mut seen: BTreeSet<&str> = scenario.workloads.iter().map(workload_name).collect();
        let mut twice = Vec::new();
        for pool in scenario.pools() {
            for workload in &pool.workloads {
                if !seen.insert(workload_name(workload)) {
                    twice.push((
                        pool.at,
                        pool.name.clone(),
                        workload_name(workload).to_owned(),
                    ));
                }
            }
        }
        for (at, pool, name) in twice {
            self.at(
                at,
                format!("pool {pool:?} has a workload named {name:?}, a name already taken"),
                "name each workload once across `workloads` and every pool's `workloads`",
            );
        }
    }

    /// Several pools: each gives its size, they fit in the lab, and they run on `sim`.
    fn several_pools(&mut self) {
        let scenario = &self.loaded.scenario;
        let lab_nodes = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        let mut taken = 0u32;
        for pool in scenario.pools() {
            match pool.size {
                Some(size) => taken = taken.saturating_add(size),
                None => self.at(
                    pool.at,
                    format!("pool {:?} gives no `size`", pool.name),
                    "with several pools each says how many lab nodes it takes, e.g. `size: 2`; the first pool takes the first lab nodes, the next pool the next",
                ),
            }
        }
        if taken > lab_nodes {
            let sizes: Vec<String> = scenario
                .pools()
                .iter()
                .map(|p| format!("{} {}", p.name, p.size.unwrap_or(0)))
                .collect();
            self.top(
                format!(
                    "the pools take {taken} nodes ({}) but the lab has {lab_nodes}",
                    sizes.join(", ")
                ),
                format!("set `lab.nodes` to at least {taken}, or make the pools smaller"),
            );
        }
        let real_time = scenario
            .backends
            .iter()
            .chain([&scenario.lab.backend])
            .find(|b| **b != Backend::Sim);
        if let Some(backend) = real_time {
            let at = scenario
                .pools
                .as_ref()
                .map_or(Position::default(), |p| p.at);
            self.at(
                at,
                format!(
                    "several pools run on `sim` only for now, but the scenario names backend `{}`",
                    backend.as_str()
                ),
                "set `backends: [sim]` and `lab.backend: sim` (the node images of the other backends carry one pool's identity)",
            );
        }
        for pool in scenario.pools().iter().skip(1) {
            if let Some(version) = &pool.control_plane {
                self.at(
                    version.at,
                    format!("pool {:?} gives `controlPlane`, which the cluster's pools share", pool.name),
                    "give `controlPlane` on the first pool only: the control plane is the cluster's (an `update` step that names a Kubernetes version moves it for every pool)",
                );
            }
        }
    }

    /// The pool a step or condition names is one of the scenario's, and one is named where the
    /// scenario has several and it matters.
    pub(super) fn pool_named(&mut self, name: Option<&Located<String>>, what: &str, at: Position) {
        let scenario = &self.loaded.scenario;
        let names: Vec<&str> = scenario.pools().iter().map(|p| p.name.as_str()).collect();
        match name {
            Some(name) if !names.contains(&name.as_str()) => {
                let help = match did_you_mean(name, names.iter().copied()) {
                    Some(close) => format!("did you mean {close:?}? pools: {}", names.join(", ")),
                    None => format!("the pools are: {}", names.join(", ")),
                };
                self.at(name.at, format!("no pool named {:?}", name.value), help);
            }
            None if scenario.several_pools() => self.at(
                at,
                format!("{what} does not say which pool, and the scenario has several"),
                format!("name one of {}", names.join(", ")),
            ),
            _ => {}
        }
    }

    /// A step written short or long (`scale`, `maintenanceOperation`) names one of the pools,
    /// and names one where the scenario has several; `long` writes the step's long form for a
    /// pool, as the advice to give.
    pub(super) fn step_pool(
        &mut self,
        name: Option<&Located<String>>,
        what: &str,
        at: Position,
        long: impl Fn(&str) -> String,
    ) {
        let scenario = &self.loaded.scenario;
        if name.is_none() && scenario.several_pools() {
            let first = scenario
                .pools()
                .first()
                .map_or_else(|| "NAME".to_owned(), |p| p.name.clone());
            self.at(
                at,
                format!("`{what}` does not say which pool, and the scenario has several"),
                format!("write `{}`", long(&first)),
            );
        } else {
            self.pool_named(name, &format!("`{what}`"), at);
        }
    }

    /// A condition that means one pool names it when there are several; `pool: { name, that }`
    /// wraps a condition that can be judged within a pool.
    pub(super) fn pool_condition(&mut self, condition: &Condition, somewhere: Position) {
        match condition {
            Condition::Pool(scoped) => {
                self.pool_named(Some(&scoped.name), "`pool`", scoped.name.at);
                if !scoped.that.about_a_pool() {
                    self.at(
                        scoped.that.at,
                        "`pool.that` is not a condition about a pool",
                        "use `rolloutComplete`, `rolloutHalted`, `allNodes`, `anyNode`, `count`, `poolVersion` or `lastMaintenance` (a node or the watchdog belongs to no one pool: write that condition without `pool`)",
                    );
                }
            }
            other if other.needs_a_pool() && self.loaded.scenario.several_pools() => {
                let names: Vec<&str> = self
                    .loaded
                    .scenario
                    .pools()
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect();
                self.at(
                    somewhere,
                    format!(
                        "`{}` does not say which pool, and the scenario has several",
                        condition_key(other)
                    ),
                    format!(
                        "write `pool: {{ name: {}, that: {} }}`",
                        names.first().copied().unwrap_or("NAME"),
                        condition_key(other)
                    ),
                );
            }
            _ => {}
        }
    }

    /// The pool a node starts in, if it is a member of one (not a spare).
    pub(super) fn pool_of_node(&self, node: &str) -> Option<&Pool> {
        let scenario = &self.loaded.scenario;
        let (pool, _) = scenario
            .pool_members()
            .into_iter()
            .find(|(_, members)| members.iter().any(|m| m == node))?;
        scenario.pool_named(&pool)
    }
}

/// A workload's name.
fn workload_name(workload: &Workload) -> &str {
    match workload {
        Workload::Pods(w) => &w.name,
        Workload::DaemonSet(w) | Workload::LocalStorage(w) => &w.name,
    }
}

/// A condition's key in a scenario file.
fn condition_key(condition: &Condition) -> &'static str {
    match condition {
        Condition::Node(_) => "node",
        Condition::AllNodes(_) => "allNodes",
        Condition::AnyNode(_) => "anyNode",
        Condition::Count(_) => "count",
        Condition::RolloutComplete => "rolloutComplete",
        Condition::RolloutHalted => "rolloutHalted",
        Condition::DependentsScaledDown => "dependentsScaledDown",
        Condition::DependentsRunning => "dependentsRunning",
        Condition::Leader(_) => "leader",
        Condition::PoolVersion(_) => "poolVersion",
        Condition::LastMaintenance(_) => "lastMaintenance",
        Condition::Pool(_) => "pool",
    }
}
