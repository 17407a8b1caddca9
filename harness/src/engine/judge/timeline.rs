//! The run's timeline: every state change, step, fault, BMC action, console line and violation,
//! in order, with the time since the start. Written to `timeline.json` and drawn in the report.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One thing that happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Milliseconds since the scenario started (virtual on `sim`).
    pub at_ms: u64,
    /// The node it concerns, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub kind: EntryKind,
    pub text: String,
}

impl std::fmt::Display for Entry {
    /// One line of the progress display: `  1m02.5s node-1   NodeState: drained`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = rackproof_clock::format_duration(Duration::from_millis(self.at_ms));
        write!(
            f,
            "  {at:>8} {:<8} {:?}: {}",
            self.node.as_deref().unwrap_or("-"),
            self.kind,
            self.text
        )
    }
}

/// What kind of thing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EntryKind {
    /// A node's update state changed (`state` in the text).
    NodeState,
    /// The count of unavailable nodes changed (the number in the text).
    Unavailable,
    Step,
    Fault,
    /// The lab: machines provisioned, powered, up.
    Lab,
    /// A component started, stopped or killed.
    Component,
    Bmc,
    Console,
    Event,
    Watchdog,
    Violation,
    ExpectationBroken,
    ExpectationMet,
}

/// The timeline of one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub entries: Vec<Entry>,
}

impl Timeline {
    /// Records an entry.
    pub fn push(
        &mut self,
        at: Duration,
        node: Option<&str>,
        kind: EntryKind,
        text: impl Into<String>,
    ) {
        let at_ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
        self.entries.push(Entry {
            at_ms,
            node: node.map(str::to_owned),
            kind,
            text: text.into(),
        });
    }

    /// Puts entries of the same millisecond in a fixed order: by node, kind, then text, except
    /// that one node's state changes, and the steps (one task runs them, one after the other),
    /// keep the order they happened in; and of several unavailable
    /// counts in one millisecond only the last is kept. Tasks that act at the same virtual
    /// instant are scheduled in no particular order; this makes the same seed give the same
    /// timeline, byte for byte.
    pub fn canonicalize(&mut self) {
        let key = |e: &Entry| {
            let text = if matches!(e.kind, EntryKind::NodeState | EntryKind::Step) {
                String::new()
            } else {
                e.text.clone()
            };
            (e.at_ms, e.node.clone(), e.kind as u8, text)
        };
        // Unavailable counts: the last of each millisecond, in the order observed.
        let mut last_count: std::collections::BTreeMap<u64, usize> =
            std::collections::BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.kind == EntryKind::Unavailable {
                last_count.insert(e.at_ms, i);
            }
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries = entries
            .into_iter()
            .enumerate()
            .filter(|(i, e)| {
                e.kind != EntryKind::Unavailable || last_count.get(&e.at_ms) == Some(i)
            })
            .map(|(_, e)| e)
            .collect();
        self.entries.sort_by_key(key);
    }

    /// The entries of one kind.
    pub fn of(&self, kind: EntryKind) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_order_keeps_a_nodes_states_in_sequence_and_the_last_count() {
        let mut a = Timeline::default();
        let ms = Duration::from_millis(10);
        a.push(ms, None, EntryKind::Event, "b");
        a.push(ms, Some("n1"), EntryKind::NodeState, "draining");
        a.push(ms, None, EntryKind::Unavailable, "2");
        a.push(ms, None, EntryKind::Event, "a");
        a.push(ms, Some("n1"), EntryKind::NodeState, "drained");
        a.push(ms, None, EntryKind::Unavailable, "1");
        let mut b = Timeline::default();
        b.push(ms, Some("n1"), EntryKind::NodeState, "draining");
        b.push(ms, None, EntryKind::Event, "a");
        b.push(ms, None, EntryKind::Unavailable, "3");
        b.push(ms, Some("n1"), EntryKind::NodeState, "drained");
        b.push(ms, None, EntryKind::Event, "b");
        b.push(ms, None, EntryKind::Unavailable, "1");
        a.canonicalize();
        b.canonicalize();
        let show = |t: &Timeline| t.entries.iter().map(|e| e.text.clone()).collect::<Vec<_>>();
        assert_eq!(show(&a), show(&b));
        let states: Vec<_> = a
            .of(EntryKind::NodeState)
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(
            states,
            ["draining", "drained"],
            "a node's states keep their order"
        );
        let counts: Vec<_> = a
            .of(EntryKind::Unavailable)
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(counts, ["1"], "only the last count of the millisecond");
    }
}
