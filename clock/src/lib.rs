//! The one clock every Rackproof component reads (ARCHITECTURE.md, "Time").
//!
//! Components never call `SystemTime::now()`, `Instant::now()` or `Timestamp::now()`; they hold
//! a [`Clock`] and ask it. Two kinds exist:
//!
//! - [`Clock::wall`]: the operating system's clock, for production and lab runs;
//! - [`Clock::simulated`]: an epoch plus the time elapsed on tokio's clock. Under a paused tokio
//!   runtime (`tokio::time::pause`, or `#[tokio::test(start_paused = true)]`) tokio advances time
//!   by itself whenever every task is idle, so a rollout with production timeouts (2 h drain,
//!   10 min update timeout) runs in milliseconds, and the same inputs give the same timeline.
//!
//! Sleeping and timeouts go through tokio in both kinds, so the same component code is correct
//! under either. `tests/clock_discipline.rs` fails the build's tests when a crate reads time
//! around this type.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

/// A source of the current time and of sleeps. Cheap to clone; clones share the same time.
#[derive(Clone)]
pub struct Clock {
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Wall,
    Simulated { epoch: Timestamp, start: Instant },
}

impl Clock {
    /// The operating system's clock.
    pub fn wall() -> Self {
        Self { kind: Kind::Wall }
    }

    /// A clock that reads `epoch` now and advances with tokio's clock from here on.
    ///
    /// Must be called inside a tokio runtime. With the runtime's clock paused, time advances only
    /// when every task waits on a timer, which makes runs fast and deterministic.
    pub fn simulated(epoch: Timestamp) -> Self {
        #[expect(
            clippy::disallowed_methods,
            reason = "the clock is the one place that reads tokio's time"
        )]
        let start = Instant::now();
        Self {
            kind: Kind::Simulated { epoch, start },
        }
    }

    /// Whether this clock is simulated (virtual time).
    pub fn is_simulated(&self) -> bool {
        matches!(self.kind, Kind::Simulated { .. })
    }

    /// The current time as a timestamp (what goes into API objects, logs and timelines).
    pub fn now(&self) -> Timestamp {
        match self.kind {
            Kind::Wall => {
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the clock is the one place that reads wall time"
                )]
                let now = Timestamp::now();
                now
            }
            Kind::Simulated { epoch, start } => {
                let elapsed = self.instant().saturating_duration_since(start);
                epoch
                    .checked_add(elapsed)
                    .expect("simulated time stays within jiff's range (year 9999)")
            }
        }
    }

    /// The current monotonic instant, for measuring intervals and computing deadlines.
    pub fn instant(&self) -> Instant {
        #[expect(
            clippy::disallowed_methods,
            reason = "the clock is the one place that reads tokio's time"
        )]
        let now = Instant::now();
        now
    }

    /// Time elapsed since `earlier`, never negative.
    pub fn since(&self, earlier: Instant) -> Duration {
        self.instant().saturating_duration_since(earlier)
    }

    /// Sleeps for `duration` on this clock.
    pub async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    /// Sleeps until the wall or simulated time reaches `deadline` (returns at once if it has).
    pub async fn sleep_until(&self, deadline: Timestamp) {
        let remaining = self.until(deadline);
        if !remaining.is_zero() {
            tokio::time::sleep(remaining).await;
        }
    }

    /// How long until `deadline`; zero if it has passed.
    pub fn until(&self, deadline: Timestamp) -> Duration {
        let now = self.now();
        if deadline <= now {
            return Duration::ZERO;
        }
        let span = deadline.duration_since(now);
        Duration::try_from(span).unwrap_or(Duration::ZERO)
    }

    /// Runs `future` for at most `duration` on this clock.
    pub async fn timeout<F: Future>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        tokio::time::timeout(duration, future)
            .await
            .map_err(|_| Elapsed { after: duration })
    }

    /// A new interval ticking every `period`; the first tick completes at once. Missed ticks are
    /// delayed, not burst, so a slow reconcile never causes a storm of catch-up ticks.
    pub fn interval(&self, period: Duration) -> tokio::time::Interval {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Wall => f.write_str("Clock::Wall"),
            Kind::Simulated { epoch, .. } => {
                write!(f, "Clock::Simulated(epoch {epoch}, now {})", self.now())
            }
        }
    }
}

/// A [`Clock::timeout`] ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    /// The limit that passed.
    pub after: Duration,
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timed out after {}", format_duration(self.after))
    }
}

impl std::error::Error for Elapsed {}

/// Formats a duration the way scenarios and reports write it: `1h2m3s`, `10m`, `250ms`.
pub fn format_duration(duration: Duration) -> String {
    let total_ms = duration.as_millis();
    if total_ms == 0 {
        return "0s".to_owned();
    }
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let mut secs = duration.as_secs();
    let ms = total_ms % 1000;
    let mut out = String::new();
    let hours = secs / 3600;
    secs %= 3600;
    let minutes = secs / 60;
    secs %= 60;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if secs > 0 || ms > 0 {
        if ms > 0 {
            out.push_str(&format!("{secs}.{ms:03}s"));
        } else {
            out.push_str(&format!("{secs}s"));
        }
    }
    out
}

/// The longest duration [`parse_duration`] accepts: a century. Longer ones are typos, and a
/// timestamp that far ahead could leave the calendar's range when a run adds it to the clock.
pub const LONGEST_DURATION: Duration = Duration::from_secs(36_500 * 86_400);

/// Parses a duration written as `90s`, `10m`, `2h`, `1h30m`, `250ms` or `1.5s`.
///
/// A bare number is refused: every duration in a scenario or config names its unit. So is a
/// duration longer than [`LONGEST_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::new(text, "it is empty"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(DurationError::new(text, "a unit must follow a number"));
        }
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let value: f64 = number
            .parse()
            .map_err(|_| DurationError::new(text, "a number is malformed"))?;
        let unit_secs = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "" => return Err(DurationError::new(text, "the number has no unit")),
            _ => return Err(DurationError::new(text, "units are ms, s, m, h and d")),
        };
        let too_long = || DurationError::new(text, "it is too long (the longest is 36500d)");
        let part = Duration::try_from_secs_f64(value * unit_secs).map_err(|_| too_long())?;
        total = total
            .checked_add(part)
            .filter(|sum| *sum <= LONGEST_DURATION)
            .ok_or_else(too_long)?;
        rest = next;
    }
    Ok(total)
}

/// A duration string that [`parse_duration`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    text: String,
    why: &'static str,
}

impl DurationError {
    fn new(text: &str, why: &'static str) -> Self {
        Self {
            text: text.to_owned(),
            why,
        }
    }
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: {}; write it like `90s`, `10m`, `2h`, `1h30m` or `250ms`",
            self.text, self.why
        )
    }
}

impl std::error::Error for DurationError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn simulated_clock_advances_with_paused_tokio_time() {
        let epoch: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::simulated(epoch);
        assert_eq!(clock.now(), epoch);
        clock.sleep(Duration::from_secs(7200)).await;
        assert_eq!(
            clock.now(),
            "2026-01-01T02:00:00Z".parse::<Timestamp>().unwrap()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_time_and_sleep_until_reaches_deadline() {
        let epoch: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::simulated(epoch);
        let other = clock.clone();
        let deadline: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        other.sleep_until(deadline).await;
        assert_eq!(clock.now(), deadline);
        assert_eq!(clock.until(deadline), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_reports_the_limit() {
        let clock = Clock::simulated(Timestamp::UNIX_EPOCH);
        let err = clock
            .timeout(Duration::from_secs(600), std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "timed out after 10m");
    }

    #[test]
    fn parses_and_formats_durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.500s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn refuses_durations_without_units() {
        let err = parse_duration("90").unwrap_err().to_string();
        assert!(err.contains("has no unit"), "{err}");
        assert!(
            parse_duration("10x")
                .unwrap_err()
                .to_string()
                .contains("units are")
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn refuses_durations_too_long_to_represent() {
        for text in [
            "99999999999999999999h",
            "99999999999999999999999ms",
            "10000000000000000000s10000000000000000000s",
            "36501d",
            "876601h",
        ] {
            let err = parse_duration(text).unwrap_err().to_string();
            assert!(err.contains("too long"), "{text}: {err}");
        }
        assert_eq!(
            parse_duration("36500d").unwrap(),
            Duration::from_secs(36_500 * 86_400)
        );
    }
}
