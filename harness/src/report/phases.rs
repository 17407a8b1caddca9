//! Each node's phase over time, read from the timeline's state changes, and the phases' colours.

use std::collections::BTreeMap;

use crate::engine::judge::timeline::{EntryKind, Timeline};

/// The phases a lane shows, in the order the legend and the state chart list them (the judge's
/// `lane_phase` names them).
pub(super) const PHASES: [&str; 9] = [
    "ready",
    "candidate",
    "draining",
    "drained",
    "updating",
    "rebooting",
    "notReady",
    "failed",
    "absent",
];

/// The phases of a node under update, from its selection on.
const UPDATE_PHASES: [&str; 5] = ["draining", "drained", "updating", "rebooting", "failed"];

/// The fill colour of a phase.
pub(super) fn colour(phase: &str) -> &'static str {
    match phase {
        "ready" => "#cfe8cf",
        "candidate" => "#e3eef9",
        "draining" => "#ffe8a8",
        "drained" => "#ffd27a",
        "updating" => "#9fc5f8",
        "rebooting" => "#6fa8dc",
        "failed" => "#e06666",
        "notReady" => "#b7b7b7",
        _ => "#f3f3f3",
    }
}

/// Every node's changes of phase, in order: (moment, phase).
#[derive(Debug, Default)]
pub(super) struct Histories<'a> {
    pub(super) of: BTreeMap<&'a str, Vec<(u64, &'a str)>>,
}

impl<'a> Histories<'a> {
    /// The histories of `nodes` (each starts empty) from `timeline`.
    pub(super) fn read(nodes: &'a [String], timeline: &'a Timeline) -> Self {
        let mut of: BTreeMap<&str, Vec<(u64, &str)>> =
            nodes.iter().map(|n| (n.as_str(), Vec::new())).collect();
        for entry in timeline.of(EntryKind::NodeState) {
            if let Some(changes) = entry.node.as_deref().and_then(|n| of.get_mut(n)) {
                changes.push((entry.at_ms, entry.text.as_str()));
            }
        }
        // In time order (a timeline read back from a file may not be); a stable sort keeps the
        // order of one moment's changes.
        for changes in of.values_mut() {
            changes.sort_by_key(|(at, _)| *at);
        }
        Self { of }
    }

    /// Node `node`'s phase at `at_ms` (`absent` before its first change).
    pub(super) fn phase_at(&self, node: &str, at_ms: u64) -> &'a str {
        let Some(changes) = self.of.get(node) else {
            return "absent";
        };
        let after = changes.partition_point(|(at, _)| *at <= at_ms);
        after.checked_sub(1).map_or("absent", |i| changes[i].1)
    }

    /// When node `node`'s update started: its first change into a phase of an update (selected
    /// and on), if it had one.
    pub(super) fn update_started_at(&self, node: &str) -> Option<u64> {
        self.of
            .get(node)?
            .iter()
            .find(|(_, phase)| UPDATE_PHASES.contains(phase))
            .map(|(at, _)| *at)
    }

    /// Whether node `node` failed, or went NotReady after it had been ready (an outage, not
    /// its first boot).
    pub(super) fn troubled(&self, node: &str) -> bool {
        let Some(changes) = self.of.get(node) else {
            return false;
        };
        let first_ready = changes.iter().position(|(_, p)| *p == "ready");
        changes.iter().enumerate().any(|(i, (_, phase))| {
            *phase == "failed" || (*phase == "notReady" && first_ready.is_some_and(|r| i > r))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_nodes_phase_is_its_last_change_so_far() {
        let mut timeline = Timeline::default();
        let ms = Duration::from_millis;
        timeline.push(ms(10), Some("n1"), EntryKind::NodeState, "ready");
        timeline.push(ms(50), Some("n1"), EntryKind::NodeState, "draining");
        timeline.push(ms(90), Some("n1"), EntryKind::NodeState, "failed");
        timeline.push(ms(60), Some("other"), EntryKind::NodeState, "draining");
        timeline.push(ms(0), Some("n2"), EntryKind::NodeState, "notReady");
        timeline.push(ms(5), Some("n2"), EntryKind::NodeState, "ready");
        timeline.push(ms(0), Some("n3"), EntryKind::NodeState, "ready");
        timeline.push(ms(7), Some("n3"), EntryKind::NodeState, "notReady");
        let nodes = vec![
            "n1".to_owned(),
            "n2".to_owned(),
            "n3".to_owned(),
            "n4".to_owned(),
        ];
        let histories = Histories::read(&nodes, &timeline);
        assert_eq!(histories.phase_at("n1", 0), "absent");
        assert_eq!(histories.phase_at("n1", 50), "draining");
        assert_eq!(histories.phase_at("n1", 89), "draining");
        assert_eq!(histories.phase_at("n1", 1000), "failed");
        assert_eq!(histories.phase_at("n4", 1000), "absent");
        assert_eq!(histories.update_started_at("n1"), Some(50));
        assert_eq!(
            histories.update_started_at("n2"),
            None,
            "NotReady before it came up"
        );
        assert!(
            !histories.troubled("n2"),
            "NotReady before it came up is its first boot"
        );
        assert!(
            histories.troubled("n3"),
            "NotReady after it was ready is an outage"
        );
        assert!(histories.troubled("n1"), "it failed");
        assert!(!histories.of.contains_key("other"), "only the run's nodes");
    }
}
