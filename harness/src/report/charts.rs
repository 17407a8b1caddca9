//! The charts under the lanes: how many nodes are in each phase over time (stacked), and the
//! unavailable count against `maxUnavailable`.

use std::fmt::Write as _;

use super::axis::Axis;
use super::lanes::SLICES;
use super::phases::{Histories, PHASES, colour};
use super::{LEFT, ReportInput};
use crate::engine::judge::timeline::EntryKind;

/// The height of each chart.
pub(super) const CHART_HEIGHT: u64 = 100;

/// Draws the stacked count of nodes per phase at `top`.
pub(super) fn phases(
    svg: &mut String,
    input: &ReportInput<'_>,
    histories: &Histories<'_>,
    axis: &Axis,
    top: u64,
) {
    let _ = write!(svg, r#"<text x="4" y="{}">nodes by phase</text>"#, top + 12);
    let nodes: Vec<&str> = input.nodes.iter().map(String::as_str).collect();
    let area = Area {
        top,
        height: CHART_HEIGHT,
        class: "state-area",
    };
    stacked(svg, histories, &nodes, axis, &area);
}

/// Where a stacked chart goes, and the class of its polygons.
pub(super) struct Area {
    pub(super) top: u64,
    pub(super) height: u64,
    pub(super) class: &'static str,
}

/// Draws how many of `nodes` are in each phase over time, stacked, one polygon per phase.
pub(super) fn stacked(
    svg: &mut String,
    histories: &Histories<'_>,
    nodes: &[&str],
    axis: &Axis,
    area: &Area,
) {
    let total = u64::try_from(nodes.len()).unwrap_or(0).max(1);
    let counts: Vec<Vec<u64>> = (0..SLICES)
        .map(|slice| {
            let at = axis.slice_middle(slice, SLICES);
            let mut count = vec![0; PHASES.len()];
            for node in nodes {
                let phase = histories.phase_at(node, at);
                let index = PHASES
                    .iter()
                    .position(|p| *p == phase)
                    .unwrap_or(PHASES.len() - 1);
                count[index] += 1;
            }
            count
        })
        .collect();
    let y_of = |n: u64| area.top + area.height - n * area.height / total;
    let x_of = |slice: u64| axis.x(slice * axis.total_ms / SLICES);
    for (index, phase) in PHASES.iter().enumerate() {
        if counts.iter().all(|c| c[index] == 0) {
            continue;
        }
        let below = |c: &Vec<u64>| c[..index].iter().sum::<u64>();
        let upper = (0u64..)
            .zip(&counts)
            .map(|(slice, c)| (x_of(slice), x_of(slice + 1), y_of(below(c) + c[index])));
        let lower = (0u64..)
            .zip(&counts)
            .map(|(slice, c)| (x_of(slice), x_of(slice + 1), y_of(below(c))));
        let mut points = steps(upper);
        let mut back = steps(lower);
        back.reverse();
        points.extend(back);
        let points: Vec<String> = points.iter().map(|(x, y)| format!("{x},{y}")).collect();
        let peak = counts.iter().map(|c| c[index]).max().unwrap_or(0);
        let _ = write!(
            svg,
            r#"<polygon class="{}" data-phase="{phase}" fill="{}" points="{}"><title>{phase}: up to {peak} of {total} nodes</title></polygon>"#,
            area.class,
            colour(phase),
            points.join(" ")
        );
    }
}

/// The outline of a step function given as (from x, to x, y) stretches in order: a point where
/// each run of equal y starts and ends.
fn steps(stretches: impl Iterator<Item = (u64, u64, u64)>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    for (x0, x1, y) in stretches {
        match runs.last_mut() {
            Some(last) if last.2 == y => last.1 = x1,
            _ => runs.push((x0, x1, y)),
        }
    }
    runs.into_iter()
        .flat_map(|(x0, x1, y)| [(x0, y), (x1, y)])
        .collect()
}

/// Draws the unavailable count against `maxUnavailable` at `top`.
pub(super) fn unavailable(svg: &mut String, input: &ReportInput<'_>, axis: &Axis, top: u64) {
    let max_count = input
        .timeline
        .of(EntryKind::Unavailable)
        .filter_map(|e| e.text.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        .max(u64::from(input.max_unavailable))
        .max(1);
    let y_of = |n: u64| top + CHART_HEIGHT - n * CHART_HEIGHT / max_count;
    let _ = write!(svg, r#"<text x="4" y="{}">unavailable</text>"#, top + 12);
    let limit_y = y_of(u64::from(input.max_unavailable));
    let _ = write!(
        svg,
        r##"<line class="max-unavailable" x1="{LEFT}" x2="{}" y1="{limit_y}" y2="{limit_y}" stroke="#cc0000" stroke-dasharray="4 3"><title>maxUnavailable {}</title></line>"##,
        axis.x(axis.total_ms),
        input.max_unavailable
    );
    let mut points = vec![(LEFT, y_of(0))];
    let mut last = 0;
    for entry in input.timeline.of(EntryKind::Unavailable) {
        let n = entry.text.parse::<u64>().unwrap_or(0);
        let x = axis.x(entry.at_ms);
        points.push((x, y_of(last)));
        points.push((x, y_of(n)));
        last = n;
    }
    points.push((axis.x(axis.total_ms), y_of(last)));
    let path: Vec<String> = points.iter().map(|(x, y)| format!("{x},{y}")).collect();
    let _ = write!(
        svg,
        r##"<polyline class="unavailable" fill="none" stroke="#1c4587" points="{}"/>"##,
        path.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_outline_has_a_point_pair_per_run_of_equal_height() {
        let stretches = [(0, 10, 5), (10, 20, 5), (20, 30, 7), (30, 40, 5)];
        assert_eq!(
            steps(stretches.into_iter()),
            [(0, 5), (20, 5), (20, 7), (30, 7), (30, 5), (40, 5)]
        );
        assert!(steps(std::iter::empty()).is_empty());
    }
}
