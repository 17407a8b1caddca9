//! The lanes: one per node while there are few; past [`OWN_LANES`], lanes of their own for the
//! nodes something happened to (a fault, a violation, a failure, NotReady after being ready) and one lane per wave for the
//! rest (the nodes whose update started in the same part of the run), each showing how many of
//! its nodes are in each phase. Steps, faults and failures are marked on the lane they concern and link
//! to their row of the timeline table.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::axis::Axis;
use super::charts::{Area, stacked};
use super::phases::{Histories, colour};
use super::{ReportInput, escape};
use crate::engine::judge::timeline::EntryKind;

/// At most this many nodes get a lane of their own.
pub(super) const OWN_LANES: usize = 40;
/// Past [`OWN_LANES`], the run is cut into this many equal periods: nodes whose update started in
/// the same period share a lane.
const WAVES: u64 = 12;
/// A group lane is drawn in this many time slices.
pub(super) const SLICES: u64 = 240;
/// The height of a lane.
pub(super) const LANE_HEIGHT: u64 = 22;

/// A lane of the report.
#[derive(Debug)]
pub(super) enum Lane<'a> {
    Node(&'a str),
    Group {
        label: GroupLabel,
        nodes: Vec<&'a str>,
    },
}

impl Lane<'_> {
    fn holds(&self, node: &str) -> bool {
        match self {
            Lane::Node(own) => *own == node,
            Lane::Group { nodes, .. } => nodes.contains(&node),
        }
    }
}

/// A group lane's name: short beside the lane, long in its tooltip.
#[derive(Debug)]
pub(super) struct GroupLabel {
    short: String,
    long: String,
}

/// Which lanes the report draws.
#[derive(Debug)]
pub(super) struct Layout<'a> {
    pub(super) lanes: Vec<Lane<'a>>,
}

impl<'a> Layout<'a> {
    /// The lanes for `input` (see the module docs).
    pub(super) fn of(input: &ReportInput<'a>, histories: &Histories<'a>, axis: &Axis) -> Self {
        if input.nodes.len() <= OWN_LANES {
            return Self {
                lanes: input.nodes.iter().map(|n| Lane::Node(n.as_str())).collect(),
            };
        }
        let named: BTreeSet<&str> = input
            .timeline
            .entries
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EntryKind::Fault | EntryKind::Violation | EntryKind::ExpectationBroken
                )
            })
            .filter_map(|e| e.node.as_deref())
            .collect();
        let own: BTreeSet<&str> = input
            .nodes
            .iter()
            .map(String::as_str)
            .filter(|n| named.contains(n) || histories.troubled(n))
            .take(OWN_LANES)
            .collect();
        let mut waves: Vec<Vec<&str>> = vec![Vec::new(); usize::try_from(WAVES).unwrap_or(1)];
        let mut never = Vec::new();
        for node in input
            .nodes
            .iter()
            .map(String::as_str)
            .filter(|n| !own.contains(n))
        {
            match histories.update_started_at(node) {
                Some(at) => {
                    let wave = (at.saturating_mul(WAVES) / axis.total_ms.max(1)).min(WAVES - 1);
                    waves[usize::try_from(wave).unwrap_or(0)].push(node);
                }
                None => never.push(node),
            }
        }
        let period = axis.total_ms / WAVES;
        let mut lanes: Vec<Lane<'a>> = own.into_iter().map(Lane::Node).collect();
        for (wave, nodes) in (0u64..).zip(waves) {
            if nodes.is_empty() {
                continue;
            }
            let (from, to) = (seconds(wave * period), seconds((wave + 1) * period));
            lanes.push(Lane::Group {
                label: GroupLabel {
                    short: format!("{} from {from}", count(nodes.len())),
                    long: format!(
                        "{}, whose update started between {from} and {to}",
                        count(nodes.len())
                    ),
                },
                nodes,
            });
        }
        if !never.is_empty() {
            lanes.push(Lane::Group {
                label: GroupLabel {
                    short: format!("{} not updated", count(never.len())),
                    long: format!("{}, whose update never started", count(never.len())),
                },
                nodes: never,
            });
        }
        Self { lanes }
    }

    /// The lanes' total height.
    pub(super) fn height(&self) -> u64 {
        LANE_HEIGHT * u64::try_from(self.lanes.len()).unwrap_or(0)
    }

    /// The vertical band of the lane that holds `node`: (top, bottom).
    fn band_of(&self, node: &str, top: u64) -> Option<(u64, u64)> {
        let row = self.lanes.iter().position(|lane| lane.holds(node))?;
        let y = top + LANE_HEIGHT * u64::try_from(row).unwrap_or(0);
        Some((y + 1, y + LANE_HEIGHT - 1))
    }

    /// Draws the lanes from `top`.
    pub(super) fn draw(&self, svg: &mut String, histories: &Histories<'_>, axis: &Axis, top: u64) {
        for (row, lane) in (0u64..).zip(&self.lanes) {
            let y = top + LANE_HEIGHT * row;
            match lane {
                Lane::Node(node) => {
                    let _ = write!(svg, r#"<text x="4" y="{}">{}</text>"#, y + 15, escape(node));
                    let changes = histories
                        .of
                        .get(node)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    for (i, (at, phase)) in changes.iter().enumerate() {
                        let end = changes.get(i + 1).map_or(axis.total_ms, |(next, _)| *next);
                        let title = format!("{} {phase} from {}", escape(node), super::at(*at));
                        segment(svg, axis, (*at, end), y, phase, "phase", &title);
                    }
                }
                Lane::Group { label, nodes } => {
                    let _ = write!(
                        svg,
                        r#"<text class="group" x="4" y="{}" font-size="10">{}<title>{}</title></text>"#,
                        y + 15,
                        escape(&label.short),
                        escape(&label.long)
                    );
                    let area = Area {
                        top: y + 2,
                        height: LANE_HEIGHT - 4,
                        class: "group-area",
                    };
                    stacked(svg, histories, nodes, axis, &area);
                }
            }
        }
    }

    /// Marks steps, faults and failures: on the lane of the node they concern, else across all
    /// lanes (from `top`); each links to its row of the timeline table.
    pub(super) fn mark(&self, svg: &mut String, input: &ReportInput<'_>, axis: &Axis, top: u64) {
        for (i, entry) in input.timeline.entries.iter().enumerate() {
            let (class, stroke) = match entry.kind {
                EntryKind::Step => ("step", "#674ea7"),
                EntryKind::Fault => ("fault", "#e69138"),
                EntryKind::Violation | EntryKind::ExpectationBroken => ("failure", "#cc0000"),
                _ => continue,
            };
            let (y0, y1) = entry
                .node
                .as_deref()
                .and_then(|node| self.band_of(node, top))
                .unwrap_or((top, top + self.height()));
            let x = axis.x(entry.at_ms);
            let _ = write!(
                svg,
                r##"<a href="#entry-{i}"><line class="{class}" x1="{x}" x2="{x}" y1="{y0}" y2="{y1}" stroke="{stroke}" stroke-width="2"/><circle class="{class}" cx="{x}" cy="{y0}" r="3" fill="{stroke}"/><title>{} {}</title></a>"##,
                super::at(entry.at_ms),
                escape(&entry.text)
            );
        }
    }

    /// Whether some nodes share lanes.
    pub(super) fn grouped(&self) -> bool {
        self.lanes
            .iter()
            .any(|lane| matches!(lane, Lane::Group { .. }))
    }

    /// Whether `node` has a lane of its own.
    pub(super) fn own(&self, node: &str) -> bool {
        self.lanes
            .iter()
            .any(|lane| matches!(lane, Lane::Node(n) if *n == node))
    }
}

/// A moment rounded to the second, as the report writes it.
fn seconds(ms: u64) -> String {
    super::at((ms + 500) / 1000 * 1000)
}

fn count(nodes: usize) -> String {
    match nodes {
        1 => "1 node".to_owned(),
        n => format!("{n} nodes"),
    }
}

/// One coloured stretch of a lane.
fn segment(
    svg: &mut String,
    axis: &Axis,
    (from, to): (u64, u64),
    y: u64,
    phase: &str,
    class: &str,
    title: &str,
) {
    let (x0, x1) = (axis.x(from), axis.x(to));
    let _ = write!(
        svg,
        r#"<rect class="{class}" data-phase="{phase}" x="{x0}" y="{}" width="{}" height="{}" fill="{}"><title>{title}</title></rect>"#,
        y + 2,
        x1.saturating_sub(x0).max(1),
        LANE_HEIGHT - 4,
        colour(phase),
    );
}
