//! The self-contained HTML report of a run: a swimlane per node showing its phase over time, the
//! unavailable count against `maxUnavailable`, faults, violations and broken expectations marked.
//! No scripts, no external assets: one file that opens anywhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::engine::judge::timeline::{EntryKind, Timeline};

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

const LANE_HEIGHT: u64 = 22;
const LEFT: u64 = 110;
const WIDTH: u64 = 1000;

fn colour(phase: &str) -> &'static str {
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

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn x(at_ms: u64, total_ms: u64) -> u64 {
    LEFT + at_ms.saturating_mul(WIDTH) / total_ms.max(1)
}

/// Renders the report.
pub fn render(input: &ReportInput<'_>) -> String {
    let total = input.duration_ms.max(1);
    let mut lanes: BTreeMap<&str, Vec<(u64, &str)>> = input
        .nodes
        .iter()
        .map(|n| (n.as_str(), Vec::new()))
        .collect();
    for entry in input.timeline.of(EntryKind::NodeState) {
        if let Some(lane) = entry.node.as_deref().and_then(|n| lanes.get_mut(n)) {
            lane.push((entry.at_ms, entry.text.as_str()));
        }
    }
    let lanes_height = LANE_HEIGHT * u64::try_from(input.nodes.len()).unwrap_or(0);
    let chart_top = lanes_height + 30;
    let chart_height = 80;
    let svg_height = chart_top + chart_height + 30;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{svg_height}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + 20
    );
    for (row, (node, changes)) in lanes.iter().enumerate() {
        let y = LANE_HEIGHT * u64::try_from(row).unwrap_or(0);
        let _ = write!(svg, r#"<text x="4" y="{}">{}</text>"#, y + 15, escape(node));
        for (i, (at, phase)) in changes.iter().enumerate() {
            let end = changes.get(i + 1).map_or(total, |(next, _)| *next);
            let (x0, x1) = (x(*at, total), x(end, total));
            let _ = write!(
                svg,
                r#"<rect class="phase" data-phase="{phase}" x="{x0}" y="{}" width="{}" height="{}" fill="{}"><title>{} {phase} from {}</title></rect>"#,
                y + 2,
                (x1 - x0).max(1),
                LANE_HEIGHT - 4,
                colour(phase),
                escape(node),
                rackproof_clock::format_duration(std::time::Duration::from_millis(*at)),
            );
        }
    }
    // Unavailable count against maxUnavailable.
    let max_count = input
        .timeline
        .of(EntryKind::Unavailable)
        .filter_map(|e| e.text.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        .max(u64::from(input.max_unavailable))
        .max(1);
    let y_of = |n: u64| chart_top + chart_height - n * chart_height / max_count;
    let _ = write!(
        svg,
        r#"<text x="4" y="{}">unavailable</text>"#,
        chart_top + 12
    );
    let limit_y = y_of(u64::from(input.max_unavailable));
    let _ = write!(
        svg,
        r##"<line class="max-unavailable" x1="{LEFT}" x2="{}" y1="{limit_y}" y2="{limit_y}" stroke="#cc0000" stroke-dasharray="4 3"><title>maxUnavailable {}</title></line>"##,
        LEFT + WIDTH,
        input.max_unavailable
    );
    let mut points = vec![(LEFT, y_of(0))];
    let mut last = 0;
    for entry in input.timeline.of(EntryKind::Unavailable) {
        let n = entry.text.parse::<u64>().unwrap_or(0);
        let px = x(entry.at_ms, total);
        points.push((px, y_of(last)));
        points.push((px, y_of(n)));
        last = n;
    }
    points.push((LEFT + WIDTH, y_of(last)));
    let path: Vec<String> = points.iter().map(|(px, py)| format!("{px},{py}")).collect();
    let _ = write!(
        svg,
        r##"<polyline class="unavailable" fill="none" stroke="#1c4587" points="{}"/>"##,
        path.join(" ")
    );
    // Faults and failures as vertical markers.
    for entry in &input.timeline.entries {
        let (class, stroke) = match entry.kind {
            EntryKind::Fault => ("fault", "#e69138"),
            EntryKind::Violation | EntryKind::ExpectationBroken => ("failure", "#cc0000"),
            _ => continue,
        };
        let px = x(entry.at_ms, total);
        let _ = write!(
            svg,
            r#"<line class="{class}" x1="{px}" x2="{px}" y1="0" y2="{}" stroke="{stroke}" stroke-width="2"><title>{}</title></line>"#,
            chart_top + chart_height,
            escape(&entry.text)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{}</text></svg>"#,
        svg_height - 6,
        LEFT + WIDTH,
        svg_height - 6,
        rackproof_clock::format_duration(std::time::Duration::from_millis(total))
    );

    let mut rows = String::new();
    for entry in &input.timeline.entries {
        let _ = write!(
            rows,
            "<tr class=\"{:?}\"><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td></tr>",
            entry.kind,
            rackproof_clock::format_duration(std::time::Duration::from_millis(entry.at_ms)),
            escape(entry.node.as_deref().unwrap_or("")),
            entry.kind,
            escape(&entry.text)
        );
    }
    let failures: String = input
        .failures
        .iter()
        .map(|f| format!("<li>{}</li>", escape(f)))
        .collect();
    let legend: String = [
        "ready",
        "candidate",
        "draining",
        "drained",
        "updating",
        "rebooting",
        "failed",
        "notReady",
    ]
    .iter()
    .map(|p| {
        format!(
            r#"<span class="key" style="background:{}">{p}</span>"#,
            colour(p)
        )
    })
    .collect();
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{scenario} — Rackproof</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.3em; }} .verdict {{ font-weight: bold; }}
.passed {{ color: #38761d; }} .failed {{ color: #cc0000; }}
.key {{ display: inline-block; padding: 1px 6px; margin-right: 4px; border-radius: 3px; font-size: 0.85em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }} td {{ padding: 1px 8px; border-bottom: 1px solid #eee; }}
</style></head><body>
<h1>{scenario} on {backend}</h1>
<p class="verdict {verdict}" id="verdict">{verdict}</p>
<ul id="failures">{failures}</ul>
<p>{legend}</p>
{svg}
<h2>Timeline</h2>
<table id="timeline"><tr><th>at</th><th>node</th><th>kind</th><th>what</th></tr>{rows}</table>
</body></html>
"#,
        scenario = escape(input.scenario),
        backend = escape(input.backend),
        verdict = escape(input.verdict),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn draws_a_lane_per_node_the_limit_and_marks_failures() {
        let mut timeline = Timeline::default();
        timeline.push(
            Duration::ZERO,
            Some("node-1"),
            EntryKind::NodeState,
            "ready",
        );
        timeline.push(
            Duration::from_secs(60),
            Some("node-1"),
            EntryKind::NodeState,
            "draining",
        );
        timeline.push(Duration::from_secs(60), None, EntryKind::Unavailable, "1");
        timeline.push(
            Duration::from_secs(90),
            Some("node-1"),
            EntryKind::Fault,
            "power cut <during slot write>",
        );
        timeline.push(
            Duration::from_secs(120),
            None,
            EntryKind::Violation,
            "maxUnavailable: too many",
        );
        let nodes = vec!["node-1".to_owned(), "node-2".to_owned()];
        let failures = vec!["maxUnavailable: too many".to_owned()];
        let html = render(&ReportInput {
            scenario: "demo",
            backend: "sim",
            verdict: "failed",
            nodes: &nodes,
            max_unavailable: 1,
            duration_ms: 180_000,
            failures: &failures,
            timeline: &timeline,
        });
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
}
