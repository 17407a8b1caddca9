//! The run's timeline: every state change, step, fault, BMC action, console line and violation,
//! in order, with the time since the start. Written to `timeline.json` and drawn in the report.

use std::time::Duration;

use serde::Serialize;

/// One thing that happened.
#[derive(Debug, Clone, Serialize)]
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

/// What kind of thing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    pub entries: Vec<Entry>,
}

impl Timeline {
    /// Records an entry.
    pub fn push(&mut self, at: Duration, node: Option<&str>, kind: EntryKind, text: impl Into<String>) {
        let at_ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
        self.entries.push(Entry { at_ms, node: node.map(str::to_owned), kind, text: text.into() });
    }

    /// The entries of one kind.
    pub fn of(&self, kind: EntryKind) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }
}
