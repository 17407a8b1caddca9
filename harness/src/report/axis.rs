//! The time axis: where a moment of the run is drawn, and ticks at round intervals.

use std::time::Duration;

/// Round tick intervals, shortest first (milliseconds).
const STEPS_MS: [u64; 20] = [
    100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
    900_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 21_600_000, 43_200_000,
];

/// At most this many ticks across the axis.
const MAX_TICKS: u64 = 12;

/// A run of `total_ms` drawn `width` pixels wide from `left`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Axis {
    pub(super) total_ms: u64,
    pub(super) left: u64,
    pub(super) width: u64,
}

impl Axis {
    /// The x of a moment (clamped to the run).
    pub(super) fn x(&self, at_ms: u64) -> u64 {
        let total = self.total_ms.max(1);
        self.left + at_ms.min(total).saturating_mul(self.width) / total
    }

    /// The moment in the middle of slice `i` of `slices` equal slices.
    pub(super) fn slice_middle(&self, i: u64, slices: u64) -> u64 {
        (2 * i + 1).saturating_mul(self.total_ms) / (2 * slices.max(1))
    }

    /// The interval between ticks: the shortest round one that gives at most [`MAX_TICKS`].
    pub(super) fn tick_step_ms(&self) -> u64 {
        STEPS_MS
            .iter()
            .copied()
            .find(|step| self.total_ms / step <= MAX_TICKS)
            .unwrap_or_else(|| {
                let day = 86_400_000;
                (self.total_ms / MAX_TICKS).div_ceil(day).max(1) * day
            })
    }

    /// Ticks from 0 up to the end of the run: (moment, label).
    pub(super) fn ticks(&self) -> Vec<(u64, String)> {
        let step = self.tick_step_ms();
        (0..=self.total_ms / step)
            .map(|i| {
                let at = i * step;
                (
                    at,
                    rackproof_clock::format_duration(Duration::from_millis(at)),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(total_ms: u64) -> Axis {
        Axis {
            total_ms,
            left: 100,
            width: 1000,
        }
    }

    #[test]
    fn ticks_are_round_and_few() {
        let labels =
            |total| -> Vec<String> { axis(total).ticks().into_iter().map(|(_, l)| l).collect() };
        assert_eq!(
            labels(3_000),
            ["0s", "500ms", "1s", "1.500s", "2s", "2.500s", "3s"]
        );
        assert_eq!(labels(95_000)[..3], ["0s", "10s", "20s"]);
        assert_eq!(labels(2 * 3_600_000 + 5).len(), 13, "every 10 minutes");
        for total in [1, 999, 61_000, 86_400_000, 30 * 86_400_000] {
            let ticks = axis(total).ticks();
            assert!(
                !ticks.is_empty() && ticks.len() as u64 <= MAX_TICKS + 1,
                "{total}: {}",
                ticks.len()
            );
        }
    }

    #[test]
    fn moments_map_onto_the_width_and_stay_inside_it() {
        let a = axis(2_000);
        assert_eq!(a.x(0), 100);
        assert_eq!(a.x(1_000), 600);
        assert_eq!(a.x(2_000), 1100);
        assert_eq!(a.x(9_000), 1100, "clamped");
        assert_eq!(axis(0).x(5), 1100);
        assert_eq!(a.slice_middle(0, 4), 250);
        assert_eq!(a.slice_middle(3, 4), 1750);
    }
}
