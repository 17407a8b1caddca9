//! The self-contained HTML report of a run: a time axis with ticks; a swimlane per node showing
//! its phase over time (past a few dozen nodes, lanes for the nodes something happened to and one
//! per wave for the rest, see [`lanes`]); steps, faults and failures marked on the lane they
//! concern and linked to their row of the timeline; how many nodes are in each phase over time;
//! the unavailable count against `maxUnavailable`; the timeline as a table. No scripts, no
//! external assets: one file that opens anywhere, small at a thousand nodes.

mod axis;
mod charts;
mod lanes;
mod phases;
mod table;

use std::fmt::Write as _;
use std::time::Duration;

use crate::engine::judge::timeline::Timeline;
use axis::Axis;
use lanes::Layout;
use phases::{Histories, PHASES, colour};

/// What the report shows besides the timeline.
#[derive(Debug, Clone)]
pub struct ReportInput<'a> {
    pub scenario: &'a str,
    pub backend: &'a str,
    pub verdict: &'a str,
    pub nodes: &'a [String],
    pub max_unavailable: u32,
    pub duration_ms: u64,
    pub failures: &'a [String],
    pub timeline: &'a Timeline,
}

/// Where the lanes and charts start (the names are left of it).
const LEFT: u64 = 150;
/// The width of the time axis.
const WIDTH: u64 = 1000;
/// The space between the parts of the drawing.
const GAP: u64 = 24;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A moment of the run as the report writes it.
fn at(ms: u64) -> String {
    rackproof_clock::format_duration(Duration::from_millis(ms))
}

/// Renders the report.
pub fn render(input: &ReportInput<'_>) -> String {
    let axis = Axis {
        total_ms: input.duration_ms.max(1),
        left: LEFT,
        width: WIDTH,
    };
    let histories = Histories::read(input.nodes, input.timeline);
    let layout = Layout::of(input, &histories, &axis);
    let lanes_top = 20;
    let phases_top = lanes_top + layout.height() + GAP;
    let unavailable_top = phases_top + charts::CHART_HEIGHT + GAP;
    let bottom = unavailable_top + charts::CHART_HEIGHT;
    let svg_height = bottom + 20;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{svg_height}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + 30
    );
    for (moment, label) in axis.ticks() {
        let x = axis.x(moment);
        let _ = write!(
            svg,
            r##"<line class="grid" x1="{x}" x2="{x}" y1="{lanes_top}" y2="{bottom}" stroke="#e6e6e6"/><text class="tick" x="{x}" y="12" text-anchor="middle">{label}</text><text x="{x}" y="{}" text-anchor="middle">{label}</text>"##,
            bottom + 14
        );
    }
    layout.draw(&mut svg, &histories, &axis, lanes_top);
    charts::phases(&mut svg, input, &histories, &axis, phases_top);
    charts::unavailable(&mut svg, input, &axis, unavailable_top);
    layout.mark(&mut svg, input, &axis, lanes_top);
    svg.push_str("</svg>");

    let failures: String = input
        .failures
        .iter()
        .map(|f| format!("<li>{}</li>", escape(f)))
        .collect();
    let legend: String = PHASES
        .iter()
        .map(|p| {
            format!(
                r#"<span class="key" style="background:{}">{p}</span>"#,
                colour(p)
            )
        })
        .chain([
            r#"<span class="key mark" style="color:#674ea7">| step</span>"#.to_owned(),
            r#"<span class="key mark" style="color:#e69138">| fault</span>"#.to_owned(),
            r#"<span class="key mark" style="color:#cc0000">| failure</span>"#.to_owned(),
        ])
        .collect();
    let table = table::render(input, &layout);
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{scenario} — Rackproof</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.3em; }} .verdict {{ font-weight: bold; }}
.passed {{ color: #38761d; }} .failed {{ color: #cc0000; }}
.key {{ display: inline-block; padding: 1px 6px; margin-right: 4px; border-radius: 3px; font-size: 0.85em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }} td {{ padding: 1px 8px; border-bottom: 1px solid #eee; }}
tr:target {{ background: #fff2cc; }}
</style></head><body>
<h1>{scenario} on {backend}</h1>
<p class="verdict {verdict}" id="verdict">{verdict}</p>
<ul id="failures">{failures}</ul>
<p>{nodes} nodes · {duration} · {legend}</p>
{svg}
<h2>Timeline</h2>
{table}
</body></html>
"#,
        scenario = escape(input.scenario),
        backend = escape(input.backend),
        verdict = escape(input.verdict),
        nodes = input.nodes.len(),
        duration = at(input.duration_ms),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::judge::timeline::EntryKind;

    fn report(nodes: &[String], timeline: &Timeline, duration_ms: u64) -> String {
        render(&ReportInput {
            scenario: "demo",
            backend: "sim",
            verdict: "failed",
            nodes,
            max_unavailable: 1,
            duration_ms,
            failures: &["maxUnavailable: too many".to_owned()],
            timeline,
        })
    }

    #[test]
    fn draws_a_lane_per_node_the_limit_and_marks_failures() {
        let mut timeline = Timeline::default();
        let s = Duration::from_secs;
        timeline.push(s(0), Some("node-1"), EntryKind::NodeState, "ready");
        timeline.push(s(60), Some("node-1"), EntryKind::NodeState, "draining");
        timeline.push(s(60), None, EntryKind::Unavailable, "1");
        timeline.push(
            s(90),
            Some("node-1"),
            EntryKind::Fault,
            "power cut <during slot write>",
        );
        timeline.push(
            s(120),
            None,
            EntryKind::Violation,
            "maxUnavailable: too many",
        );
        let nodes = vec!["node-1".to_owned(), "node-2".to_owned()];
        let html = report(&nodes, &timeline, 180_000);
        assert_eq!(html.matches(r#"class="phase""#).count(), 2);
        assert!(html.contains(r#"data-phase="draining""#));
        assert!(html.contains(r#"class="max-unavailable""#));
        assert!(html.contains(r#"class="fault""#));
        assert!(html.contains(r#"class="failure""#));
        assert!(
            html.contains("power cut &lt;during slot write&gt;"),
            "text is escaped"
        );
        assert!(html.contains(">node-2</text>"));
        assert!(!html.contains("<script"), "the report is static");
    }

    #[test]
    fn a_time_axis_with_ticks_and_marks_on_their_lane_linked_to_their_entry() {
        let mut timeline = Timeline::default();
        let s = Duration::from_secs;
        timeline.push(s(0), None, EntryKind::Step, "update to 1.1.0");
        timeline.push(s(0), Some("node-1"), EntryKind::NodeState, "ready");
        timeline.push(s(0), Some("node-2"), EntryKind::NodeState, "ready");
        timeline.push(s(90), Some("node-2"), EntryKind::Fault, "power cut");
        let nodes = vec!["node-1".to_owned(), "node-2".to_owned()];
        let html = report(&nodes, &timeline, 180_000);
        let ticks: Vec<&str> = html
            .split(r#"class="tick""#)
            .skip(1)
            .map(|t| t.split('>').nth(1).unwrap().split('<').next().unwrap())
            .collect();
        assert_eq!(
            ticks,
            [
                "0s", "15s", "30s", "45s", "1m", "1m15s", "1m30s", "1m45s", "2m", "2m15s", "2m30s",
                "2m45s", "3m"
            ]
        );
        // The fault (entry 3) is marked on node-2's lane (the second, y 42–64) and links to its row.
        assert!(
            html.contains(
                r##"<a href="#entry-3"><line class="fault" x1="650" x2="650" y1="43" y2="63""##
            ),
            "{html}"
        );
        assert!(html.contains(r#"<tr id="entry-3" class="Fault">"#));
        // The step concerns no node: it spans every lane.
        assert!(html.contains(
            r##"<a href="#entry-0"><line class="step" x1="150" x2="150" y1="20" y2="64""##
        ));
        assert!(html.contains(r#"<tr id="entry-0" class="Step">"#));
    }

    #[test]
    fn a_thousand_nodes_read_as_waves_a_phase_chart_and_the_nodes_something_happened_to() {
        let nodes: Vec<String> = (1..=1000).map(|i| format!("node-{i}")).collect();
        let mut timeline = Timeline::default();
        let s = Duration::from_secs;
        timeline.push(s(0), None, EntryKind::Step, "update to 1.1.0");
        for (i, node) in (0u64..).zip(&nodes) {
            let start = 60 + i * 3;
            timeline.push(s(0), Some(node), EntryKind::NodeState, "ready");
            timeline.push(s(0), Some(node), EntryKind::Lab, "powered on");
            for (offset, phase) in [
                (0, "draining"),
                (20, "drained"),
                (25, "updating"),
                (40, "rebooting"),
                (70, "ready"),
            ] {
                timeline.push(s(start + offset), Some(node), EntryKind::NodeState, phase);
            }
        }
        timeline.push(s(700), Some("node-500"), EntryKind::NodeState, "failed");
        timeline.push(s(800), Some("node-77"), EntryKind::Fault, "power cut");
        let html = report(&nodes, &timeline, 3_200_000);
        assert!(html.len() < 400_000, "{} bytes", html.len());
        let own: Vec<&str> = html
            .split(r#"<text x="4" y=""#)
            .skip(1)
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .filter(|t| t.starts_with("node-"))
            .collect();
        assert_eq!(own, ["node-500", "node-77"], "lanes of their own");
        let groups = html.matches(r#"class="group""#).count();
        assert!((2..=13).contains(&groups), "{groups} group lanes");
        assert!(
            html.contains(">69 nodes from 0s<"),
            "waves name when they started"
        );
        for phase in ["ready", "draining", "updating", "rebooting"] {
            assert!(
                html.contains(&format!(r#"class="state-area" data-phase="{phase}""#)),
                "{phase}"
            );
        }
        assert!(html.contains(r#"id="left-out""#));
        assert!(html.contains(r#"<tr id="entry-0" class="Step">"#));
    }
}
