//! The timeline as a table, each row an anchor the marks on the lanes link to. When nodes share
//! lanes, the routine rows about nodes without a lane of their own (their states, events, power
//! and console) and the Kubernetes Events are left to `timeline.json`, and the table says how
//! many.

use std::fmt::Write as _;

use super::lanes::Layout;
use super::{ReportInput, escape};
use crate::engine::judge::timeline::EntryKind;

/// The table's HTML.
pub(super) fn render(input: &ReportInput<'_>, layout: &Layout<'_>) -> String {
    let mut rows = String::new();
    let mut left_out = 0usize;
    for (i, entry) in input.timeline.entries.iter().enumerate() {
        let routine = matches!(
            entry.kind,
            EntryKind::NodeState
                | EntryKind::Event
                | EntryKind::Lab
                | EntryKind::Bmc
                | EntryKind::Console
        );
        let grouped_node = entry.node.as_deref().is_some_and(|n| !layout.own(n));
        if layout.grouped() && ((routine && grouped_node) || entry.kind == EntryKind::Event) {
            left_out += 1;
            continue;
        }
        let _ = write!(
            rows,
            "<tr id=\"entry-{i}\" class=\"{:?}\"><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td></tr>",
            entry.kind,
            super::at(entry.at_ms),
            escape(entry.node.as_deref().unwrap_or("")),
            entry.kind,
            escape(&entry.text)
        );
    }
    let note = match left_out {
        0 => String::new(),
        n => format!(
            r#"<p id="left-out">{n} entries (Kubernetes Events, and the states, power and console of nodes without a lane of their own) are in <code>timeline.json</code>.</p>"#
        ),
    };
    format!(
        r#"{note}<table id="timeline"><tr><th>at</th><th>node</th><th>kind</th><th>what</th></tr>{rows}</table>"#
    )
}
