//! Meaning checks after a scenario parsed: names refer to nodes that exist, versions to images
//! that exist, regular expressions compile, and fields agree with each other. A scenario that
//! passes these is then judged by the worker pool's own rules ([`pool_rules`]).

mod pool_rules;
mod pools;

use std::collections::BTreeSet;

use crate::diagnostic::{Diagnostic, did_you_mean};
use crate::load::LoadedScenario;
use crate::scenario::{
    Backend, Component, Condition, Expectation, FaultAction, LeaderCondition, Located, NodeName,
    Position, Step, Strategy, Trigger,
};

/// Every problem found, in file order of discovery.
pub(crate) fn check(loaded: &LoadedScenario) -> Vec<Diagnostic> {
    let mut checker = Checker {
        loaded,
        problems: Vec::new(),
        nodes: BTreeSet::new(),
    };
    checker.name();
    checker.lab();
    checker.components();
    checker.images();
    checker.pool_list();
    checker.pool();
    checker.steps();
    checker.faults();
    checker.expectations();
    if checker.problems.is_empty() {
        pool_rules::check(loaded)
    } else {
        checker.problems
    }
}

struct Checker<'a> {
    loaded: &'a LoadedScenario,
    problems: Vec<Diagnostic>,
    nodes: BTreeSet<String>,
}

impl Checker<'_> {
    fn at(&mut self, at: Position, message: impl Into<String>, help: impl Into<String>) {
        self.problems
            .push(self.loaded.sources.diagnostic(at, message).with_help(help));
    }

    fn top(&mut self, message: impl Into<String>, help: impl Into<String>) {
        self.at(
            Position {
                source: 1,
                line: 0,
                column: 0,
            },
            message,
            help,
        );
    }

    /// The name becomes a folder under the artifacts folder: one plain path component.
    fn name(&mut self) {
        let name = &self.loaded.name;
        if crate::engine::artifacts::is_plain_component(name) {
            return;
        }
        let at = match &self.loaded.scenario.name {
            Some(written) => written.at,
            None => Position {
                source: 1,
                line: 0,
                column: 0,
            },
        };
        self.at(
            at,
            format!("scenario name {name:?} cannot name the run's artifacts folder"),
            "use 1-100 letters, digits, '-', '_' or '.', not starting with '.' (e.g. `name: auto-happy-path`)",
        );
    }

    fn lab(&mut self) {
        let lab = &self.loaded.scenario.lab;
        match (&lab.nodes, &lab.names) {
            (Some(_), Some(_)) => self.top(
                "`lab` gives both `nodes` and `names`",
                "give either a count (`nodes: 4`) or the names",
            ),
            (None, None) => self.top(
                "`lab` gives neither `nodes` nor `names`",
                "add `nodes: 4` or `names: [node-a, node-b]`",
            ),
            (Some(0), None) => self.top("`lab.nodes` is 0", "a lab needs at least one node"),
            _ => {}
        }
        if let Some(names) = &lab.names {
            let mut seen = BTreeSet::new();
            for name in names {
                if !is_dns_label(name) {
                    self.at(name.at, format!("node name {:?} is not a valid Kubernetes node name", name.value), "use lowercase letters, digits and '-', starting and ending with a letter or digit");
                }
                if !seen.insert(name.value.clone()) {
                    self.at(
                        name.at,
                        format!("node {:?} is listed twice", name.value),
                        "give each node a unique name",
                    );
                }
            }
        }
        self.nodes = lab.node_names().into_iter().collect();
        if let Some(timing) = &lab.boot_timing {
            for (stage, value) in timing.stages() {
                if value.is_some_and(|v| v.get().is_zero()) {
                    self.top(format!("`lab.bootTiming.{stage}` is 0s"), format!("every boot stage takes time: give a duration like `{}`, or leave `{stage}` out for the default", if stage == "firmware" { "3m" } else { "2s" }));
                }
            }
            if !matches!(lab.backend, Backend::Sim) {
                self.top(
                    format!(
                        "`lab.bootTiming` is for simulated machines, but the backend is `{}`",
                        lab.backend.as_str()
                    ),
                    "remove `bootTiming`: QEMU and rack machines take the time they take",
                );
            }
        }
        if lab.backend == Backend::Physical && lab.inventory.is_none() {
            self.top("backend `physical` needs `lab.inventory`", "point `inventory` at the rack's inventory file (or give `rackproof run --inventory`)");
        }
        if self.loaded.scenario.backends.is_empty() {
            self.top(
                "`backends` is empty",
                "list where this scenario runs, e.g. `backends: [sim]`",
            );
        }
    }

    fn components(&mut self) {
        let replicas = &self.loaded.scenario.components.replicas;
        match replicas.value {
            0 => self.at(
                replicas.at,
                "`components.replicas` is 0",
                "give 1 to 3 instances; to run no orchestrator or watchdog, set it to `off`",
            ),
            1..=3 => {}
            n => self.at(
                replicas.at,
                format!("`components.replicas` is {n}"),
                "give 1 to 3: a second instance shows the takeover, a third a takeover after a takeover",
            ),
        }
    }

    fn images(&mut self) {
        let mut seen = BTreeSet::new();
        for image in &self.loaded.scenario.images {
            if !seen.insert(image.version.value.clone()) {
                self.at(
                    image.version.at,
                    format!("image version {:?} is listed twice", image.version.value),
                    "list each version once",
                );
            }
        }
        if self.loaded.scenario.images.is_empty() {
            self.top(
                "`images` is empty",
                "list at least the version the pool starts on",
            );
        }
    }

    fn known_version(&mut self, version: &Located<String>, what: &str) {
        let versions: Vec<&str> = self
            .loaded
            .scenario
            .images
            .iter()
            .map(|i| i.version.value.as_str())
            .collect();
        if !versions.contains(&version.value.as_str()) {
            let help = match did_you_mean(&version.value, versions.iter().copied()) {
                Some(close) => format!("did you mean {close:?}? images: {}", versions.join(", ")),
                None => format!("add it to `images`, or use one of: {}", versions.join(", ")),
            };
            self.at(
                version.at,
                format!("{what} {:?} is not among `images`", version.value),
                help,
            );
        }
    }

    fn known_node(&mut self, node: &NodeName) {
        if !self.nodes.contains(&node.value) {
            let help = match did_you_mean(&node.value, self.nodes.iter().map(String::as_str)) {
                Some(close) => format!("did you mean {close:?}?"),
                None => format!(
                    "the lab's nodes are: {}",
                    self.nodes.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            };
            self.at(
                node.at,
                format!("no node named {:?} in the lab", node.value),
                help,
            );
        }
    }

    fn regex(&mut self, pattern: &str, at: Position, what: &str) {
        if let Err(e) = regex::Regex::new(pattern) {
            self.at(
                at,
                format!("{what} {pattern:?} is not a valid regular expression: {e}"),
                "see https://docs.rs/regex for the syntax",
            );
        }
    }

    fn pool(&mut self) {
        let lab_nodes = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        let several = self.loaded.scenario.several_pools();
        for pool in self.loaded.scenario.pools() {
            self.known_version(&pool.os, "the pool's OS version");
            let size = pool.size.unwrap_or(lab_nodes);
            if size == 0 || size > lab_nodes {
                self.at(
                    pool.at,
                    format!("`pool.size` is {size} but the lab has {lab_nodes} nodes"),
                    "give a size between 1 and the lab's node count",
                );
            }
            let taken: u32 = if several {
                self.loaded
                    .scenario
                    .pools()
                    .iter()
                    .map(|p| p.size.unwrap_or(0))
                    .sum()
            } else {
                size
            };
            let surge = pool.max_surge.resolve(size, false);
            if surge > 0 && taken.saturating_add(surge) > lab_nodes {
                self.at(
                    pool.max_surge.at,
                    format!("`maxSurge` {surge} needs {surge} spare lab nodes, but the pools take {taken} of the lab's {lab_nodes}"),
                    format!("set `lab.nodes` to {} and `pool.size` to {size}", taken + surge),
                );
            }
            if let Some(maintenance) = &pool.maintenance {
                self.time_window(&maintenance.time_window);
            }
        }
        for entry in &self.loaded.scenario.catalog.kubernetes {
            if let Err(e) = inplace_api::version::KubeVersion::parse(&entry.version) {
                self.at(
                    entry.version.at,
                    format!(
                        "catalog Kubernetes version {:?} is not a version: {e}",
                        entry.version.value
                    ),
                    "write MAJOR.MINOR.PATCH, e.g. \"1.34.2\"",
                );
            }
        }
        let fraction = self.loaded.scenario.watchdog.node_lease_failure_fraction;
        if !(fraction > 0.0 && fraction <= 1.0) {
            self.top(
                format!("`watchdog.nodeLeaseFailureFraction` is {fraction}"),
                "use a fraction in (0, 1], e.g. 0.6",
            );
        }
    }

    /// The window as the maintenance controller reads it, refused where it is written.
    fn time_window(&mut self, window: &crate::scenario::TimeWindow) {
        use inplace_api::maintenance::{TimeWindow, TimeWindowError};
        let (begin, end) = match (&window.begin, &window.end, window.opens_after, window.lasts) {
            (Some(begin), Some(end), None, None) => (begin, end),
            (None, None, Some(_), Some(lasts)) => {
                let minutes = lasts.get().as_secs() / 60;
                if !(30..=360).contains(&minutes) || lasts.get().as_secs() % 60 != 0 {
                    self.top(
                        format!(
                            "maintenance window: `lasts: {lasts}` is not 30 minutes to 6 hours"
                        ),
                        "give whole minutes from 30m to 6h, e.g. `lasts: 30m`",
                    );
                }
                return;
            }
            _ => {
                return self.top(
                    "maintenance window: give `begin` and `end`, or `opensAfter` and `lasts`",
                    "times of day for production windows (`begin: \"220000+0000\"`, `end: \"230000+0000\"`); for a run on the wall clock, relative to its start (`opensAfter: 1m`, `lasts: 30m`)",
                );
            }
        };
        if let Err(e) = TimeWindow::parse(begin, end) {
            let at = match &e {
                TimeWindowError::Malformed { field: "end", .. } => end.at,
                _ => begin.at,
            };
            self.at(
                at,
                format!("maintenance window: {e}"),
                "write each end as HHMMSS+ZZZZ (hours, minutes, seconds and the offset to UTC), 30 minutes to 6 hours apart, e.g. `timeWindow: { begin: \"220000+0000\", end: \"230000+0000\" }`",
            );
        }
    }

    fn steps(&mut self) {
        for step in &self.loaded.scenario.steps {
            match step {
                Step::Update(update) => {
                    let at = update
                        .os
                        .as_ref()
                        .or(update.kubernetes.as_ref())
                        .or(update.control_plane.as_ref())
                        .map_or(Position::default(), |v| v.at);
                    self.pool_named(update.pool.as_ref(), "`update`", at);
                    if let Some(os) = &update.os {
                        self.known_version(os, "the update's OS version");
                    }
                    if let Some(pattern) = &update.expect_refused {
                        self.regex(
                            pattern,
                            Position {
                                source: 1,
                                ..Position::default()
                            },
                            "`expectRefused`",
                        );
                    }
                }
                Step::Select(nodes) | Step::Unselect(nodes) => {
                    for node in nodes {
                        self.known_node(node);
                        let manual = self
                            .pool_of_node(node)
                            .is_none_or(|pool| *pool.strategy == Strategy::ManualInPlaceUpdate);
                        if !manual {
                            self.at(node.at, "`select`/`unselect` apply to pools with strategy `ManualInPlaceUpdate`", "set `pool.strategy: ManualInPlaceUpdate`, or drop the step");
                        }
                    }
                }
                Step::ClearFailed(nodes) => nodes.iter().for_each(|n| self.known_node(n)),
                Step::WaitUntil(wait) => self.condition(&wait.until, wait.until.at),
                Step::Fault(action) => self.fault_action(action),
                Step::Publish(publish) => {
                    self.known_version(&publish.version, "the published version");
                }
                Step::Scale(scale) => {
                    self.step_pool(scale.pool.as_ref(), "scale", scale.nodes.at, |pool| {
                        format!("scale: {{ pool: {pool}, nodes: {} }}", scale.nodes.value)
                    });
                }
                Step::MaintenanceOperation(op) => {
                    self.step_pool(
                        op.pool.as_ref(),
                        "maintenanceOperation",
                        op.operation.at,
                        |pool| {
                            format!(
                                "maintenanceOperation: {{ pool: {pool}, operation: {} }}",
                                op.operation.value
                            )
                        },
                    );
                }
                Step::Sleep(_) | Step::Run(_) => {}
            }
        }
    }

    fn faults(&mut self) {
        for fault in &self.loaded.scenario.faults {
            match &fault.when {
                Trigger::After(_) => {}
                Trigger::NodeReaches(event) => self.known_node(&event.node),
                Trigger::Console(console) => {
                    self.known_node(&console.node);
                    self.regex(&console.matches, console.node.at, "`console.matches`");
                }
                Trigger::Boot(boot) => self.known_node(&boot.node),
            }
            self.fault_action(&fault.action);
        }
    }

    fn fault_action(&mut self, action: &FaultAction) {
        match action {
            FaultAction::Power(f) => self.known_node(&f.node),
            FaultAction::BootFailure(f) => {
                self.known_node(&f.node);
                self.known_version(&f.version, "the boot failure's version");
            }
            FaultAction::PowerCut(f) => self.known_node(&f.node),
            FaultAction::Bmc(f) => self.known_node(&f.node),
            FaultAction::Partition(f) => self.known_node(&f.node),
            FaultAction::Kill(kill) => match (kill.component.on_a_node(), &kill.node) {
                (true, Some(node)) => self.known_node(node),
                (true, None) => self.at(
                    kill.component.at,
                    format!("`kill` of the {} needs `node`", kill.component.name()),
                    format!("say whose {}: `node: node-2`", kill.component.name()),
                ),
                (false, Some(node)) => self.at(
                    node.at,
                    "`node` applies only to `component: agent` and `component: kubelet`",
                    "remove `node`",
                ),
                (false, None) => {}
            },
            FaultAction::NodesDie(nodes) => nodes.iter().for_each(|n| self.known_node(n)),
            FaultAction::ImageServer(f) => self.known_node(&f.node),
        }
    }

    /// A condition written at `at`: the pool it is about, then what it says.
    fn condition(&mut self, condition: &Condition, at: Position) {
        self.pool_condition(condition, at);
        self.condition_meaning(condition);
    }

    fn condition_meaning(&mut self, condition: &Condition) {
        let somewhere = Position {
            source: 1,
            ..Position::default()
        };
        match condition {
            Condition::Pool(scoped) => self.condition_meaning(&scoped.that),
            Condition::Node(node) => {
                self.known_node(&node.name);
                if let Some(reason) = &node.reason {
                    self.regex(reason, node.name.at, "`reason`");
                }
            }
            Condition::Leader(leader) => self.leader(leader),
            Condition::PoolVersion(version) => {
                if let Some(os) = &version.os {
                    self.known_version(os, "`poolVersion.os`");
                }
                if version.os.is_none() && version.kubernetes.is_none() {
                    self.top(
                        "`poolVersion` names no version",
                        "give `os`, `kubernetes` or both, e.g. `poolVersion: { os: \"1.1.0\" }`",
                    );
                }
            }
            Condition::LastMaintenance(m) => {
                if let Some(reason) = &m.reason {
                    self.regex(reason, somewhere, "`lastMaintenance.reason`");
                }
                if let Some(description) = &m.description {
                    self.regex(description, somewhere, "`lastMaintenance.description`");
                }
            }
            _ => {}
        }
    }

    /// `leader.is` names an instance the run has: `<component>-<1..replicas>`.
    fn leader(&mut self, leader: &LeaderCondition) {
        let component = match leader.of {
            Component::Orchestrator => "orchestrator",
            Component::Watchdog => "watchdog",
            Component::Agent | Component::Kubelet => {
                return self.at(
                    leader.is.at,
                    format!("the {} does not elect a leader", leader.of.name()),
                    "use `of: orchestrator` or `of: watchdog`",
                );
            }
        };
        let replicas = self.loaded.scenario.components.replicas.value;
        if replicas < 2 {
            return self.at(
                leader.is.at,
                format!(
                    "`leader` needs several instances, but `components.replicas` is {replicas}"
                ),
                "set `components: { replicas: 2 }`",
            );
        }
        let names: Vec<String> = (1..=replicas).map(|i| format!("{component}-{i}")).collect();
        if !names.contains(&leader.is.value) {
            self.at(
                leader.is.at,
                format!(
                    "{:?} is not an instance of the {component}",
                    leader.is.value
                ),
                format!("the instances are {}", names.join(", ")),
            );
        }
    }

    fn expectations(&mut self) {
        for expectation in &self.loaded.scenario.expect {
            match expectation {
                Expectation::Eventually(e) => {
                    self.condition(&e.that, e.that.at);
                    if e.not_before.is_some_and(|n| n > e.within) {
                        self.top(
                            format!(
                                "`eventually` has notBefore {} after within {}",
                                e.not_before.unwrap_or_default(),
                                e.within
                            ),
                            "`notBefore` must not be later than `within`",
                        );
                    }
                }
                Expectation::Never(c) => self.condition(c, c.at),
                Expectation::Timed(t) => {
                    self.condition(&t.from, t.from.at);
                    self.condition(&t.to, t.to.at);
                    if t.at_least > t.at_most {
                        self.top(
                            format!(
                                "`timed` has atLeast {} above atMost {}",
                                t.at_least, t.at_most
                            ),
                            "swap them",
                        );
                    }
                }
            }
        }
    }
}

/// Kubernetes node names as used here: DNS-1123 labels.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::load::{LoadError, load_str};

    const BODY: &str = "lab:\n  backend: sim\n  nodes: 3\nimages:\n  - version: \"1.0.0\"\npool:\n  strategy: AutoInPlaceUpdate\n  os: \"1.0.0\"\n  kubernetes: \"1.34.2\"\n";

    fn refused(path: &str, text: &str) -> String {
        match load_str(Path::new(path), text) {
            Ok(loaded) => panic!("{:?} should have been refused", loaded.name),
            Err(LoadError::Invalid(problems)) => problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
            Err(other) => panic!("expected a diagnostic, got {other}"),
        }
    }

    #[test]
    fn scenario_names_that_are_not_one_plain_path_component_are_refused_where_written() {
        for bad in ["../escape", "a/b", "..", ".hidden", "with space", ""] {
            let text = refused("dir/s.yaml", &format!("name: {bad:?}\n{BODY}"));
            assert!(text.contains("dir/s.yaml:1:7"), "{bad:?}: {text}");
            assert!(text.contains("scenario name"), "{bad:?}: {text}");
            assert!(text.contains("help:"), "{bad:?}: {text}");
        }
        // A name taken from the file name is checked too.
        let text = refused("dir/...yaml", BODY);
        assert!(text.contains("scenario name \"..\""), "{text}");
        for good in ["auto-happy-path", "v1.2_rollout", "Large-Rollout"] {
            let loaded = load_str(Path::new("s.yaml"), &format!("name: {good}\n{BODY}")).unwrap();
            assert_eq!(loaded.name, good);
        }
    }
}
