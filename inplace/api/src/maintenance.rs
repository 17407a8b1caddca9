//! The daily maintenance time window of a pool (the Shoot's `spec.maintenance.timeWindow`):
//! `begin` and `end` written `HHMMSS+ZZZZ` (the offset is to UTC), 30 minutes to 6 hours long,
//! crossing midnight allowed.
//!
//! Two spans matter: the whole window `[begin, end)`, and the *effective* window
//! `[begin, end − 15 min)` in which maintenance work may start (Gardener subtracts 15 minutes so
//! that work can, best effort, finish before the end).

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;

const DAY: i64 = 24 * 3600;
/// Shortest window.
pub const MIN_WINDOW: Duration = Duration::from_secs(30 * 60);
/// Longest window.
pub const MAX_WINDOW: Duration = Duration::from_secs(6 * 3600);
/// What is cut from the end of the window for starting work.
pub const END_MARGIN: Duration = Duration::from_secs(15 * 60);

/// A window that can't be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeWindowError {
    /// `begin` or `end` is not `HHMMSS+ZZZZ`.
    #[error("{field} {text:?} is not a time of day written HHMMSS+ZZZZ: {why}")]
    Malformed {
        /// `begin` or `end`.
        field: &'static str,
        /// What was written.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The window is shorter than 30 minutes or longer than 6 hours.
    #[error("the window from {begin} to {end} lasts {minutes} minutes, not 30 minutes to 6 hours")]
    Length {
        /// `begin` as written.
        begin: String,
        /// `end` as written.
        end: String,
        /// Its length.
        minutes: i64,
    },
}

/// A parsed daily window, as seconds of the UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// Start, seconds after 00:00 UTC.
    begin: i64,
    /// Length in seconds (1800 to 21600).
    length: i64,
}

impl TimeWindow {
    /// Parses `begin` and `end` (`220000+0100`) and checks the length.
    pub fn parse(begin: &str, end: &str) -> Result<Self, TimeWindowError> {
        let b = time_of_day("begin", begin)?;
        let e = time_of_day("end", end)?;
        let length = (e - b).rem_euclid(DAY);
        let range = MIN_WINDOW.as_secs() as i64..=MAX_WINDOW.as_secs() as i64;
        if !range.contains(&length) {
            return Err(TimeWindowError::Length {
                begin: begin.to_owned(),
                end: end.to_owned(),
                minutes: length / 60,
            });
        }
        Ok(Self { begin: b, length })
    }

    /// The window's length.
    pub fn length(&self) -> Duration {
        Duration::from_secs(self.length as u64)
    }

    /// The begin of the window that contains `now`, if `now` is in the whole window.
    pub fn current_begin(&self, now: Timestamp) -> Option<Timestamp> {
        let into = self.seconds_into(now);
        (into < self.length).then(|| shift(now, -into))
    }

    /// Whether work may start at `now`: inside `[begin, end − 15 min)`.
    pub fn in_effective(&self, now: Timestamp) -> bool {
        self.seconds_into(now) < self.length - END_MARGIN.as_secs() as i64
    }

    /// Whether `now` is inside the whole window `[begin, end)`.
    pub fn contains(&self, now: Timestamp) -> bool {
        self.seconds_into(now) < self.length
    }

    /// The next begin strictly after `now`.
    pub fn next_begin(&self, now: Timestamp) -> Timestamp {
        let into = self.seconds_into(now);
        shift(now, DAY - into)
    }

    /// Seconds since the most recent begin (0 ≤ result < one day).
    fn seconds_into(&self, now: Timestamp) -> i64 {
        (now.as_second().rem_euclid(DAY) - self.begin).rem_euclid(DAY)
    }
}

impl fmt::Display for TimeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = (self.begin + self.length) % DAY;
        let hm = |s: i64| format!("{:02}:{:02}", s / 3600, s % 3600 / 60);
        write!(f, "{}–{} UTC", hm(self.begin), hm(end))
    }
}

/// `now` moved by `seconds`, keeping sub-second parts out (windows are whole seconds).
fn shift(now: Timestamp, seconds: i64) -> Timestamp {
    Timestamp::from_second(now.as_second() + seconds).unwrap_or(now)
}

/// Seconds after 00:00 UTC of `HHMMSS+ZZZZ`.
fn time_of_day(field: &'static str, text: &str) -> Result<i64, TimeWindowError> {
    let err = |why| TimeWindowError::Malformed {
        field,
        text: text.to_owned(),
        why,
    };
    let bytes = text.as_bytes();
    if bytes.len() != 11 || !(bytes[6] == b'+' || bytes[6] == b'-') {
        return Err(err("write it like 220000+0100 (22:00:00 at UTC+01:00)"));
    }
    let digits = |range: std::ops::Range<usize>| -> Result<i64, TimeWindowError> {
        let part = &text[range];
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err("only digits may stand around the sign"));
        }
        Ok(part.parse::<i64>().unwrap_or(0))
    };
    let (h, m, s) = (digits(0..2)?, digits(2..4)?, digits(4..6)?);
    let (zh, zm) = (digits(7..9)?, digits(9..11)?);
    if h > 23 || m > 59 || s > 59 {
        return Err(err("hours go to 23, minutes and seconds to 59"));
    }
    if zh > 14 || zm > 59 {
        return Err(err("the offset goes from -1400 to +1400"));
    }
    let sign = if bytes[6] == b'-' { -1 } else { 1 };
    let local = h * 3600 + m * 60 + s;
    Ok((local - sign * (zh * 3600 + zm * 60)).rem_euclid(DAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn offset_is_relative_to_utc() {
        let w = TimeWindow::parse("220000+0100", "230000+0100").unwrap();
        assert_eq!(w.to_string(), "21:00–22:00 UTC");
        assert!(!w.contains(at("2026-01-01T20:59:59Z")));
        assert!(w.contains(at("2026-01-01T21:00:00Z")));
        assert!(w.in_effective(at("2026-01-01T21:44:59Z")));
        assert!(!w.in_effective(at("2026-01-01T21:45:00Z")), "end − 15 min");
        assert!(w.contains(at("2026-01-01T21:59:59Z")));
        assert!(!w.contains(at("2026-01-01T22:00:00Z")));
        assert_eq!(
            w.next_begin(at("2026-01-01T21:30:00Z")),
            at("2026-01-02T21:00:00Z")
        );
        assert_eq!(
            w.current_begin(at("2026-01-01T21:30:00Z")),
            Some(at("2026-01-01T21:00:00Z"))
        );
        assert_eq!(w.current_begin(at("2026-01-01T22:30:00Z")), None);
    }

    #[test]
    fn window_may_cross_midnight() {
        let w = TimeWindow::parse("230000+0000", "010000+0000").unwrap();
        assert_eq!(w.length(), Duration::from_secs(2 * 3600));
        assert!(w.contains(at("2026-01-01T23:30:00Z")));
        assert!(w.contains(at("2026-01-02T00:30:00Z")));
        assert!(!w.in_effective(at("2026-01-02T00:50:00Z")));
        assert_eq!(
            w.current_begin(at("2026-01-02T00:30:00Z")),
            Some(at("2026-01-01T23:00:00Z"))
        );
        assert_eq!(
            w.next_begin(at("2026-01-01T12:00:00Z")),
            at("2026-01-01T23:00:00Z")
        );
    }

    #[test]
    fn length_is_thirty_minutes_to_six_hours() {
        assert!(TimeWindow::parse("220000+0000", "223000+0000").is_ok());
        assert!(TimeWindow::parse("220000+0000", "040000+0000").is_ok());
        let short = TimeWindow::parse("220000+0000", "222959+0000").unwrap_err();
        assert_eq!(
            short.to_string(),
            "the window from 220000+0000 to 222959+0000 lasts 29 minutes, not 30 minutes to 6 hours"
        );
        assert!(matches!(
            TimeWindow::parse("220000+0000", "040001+0000"),
            Err(TimeWindowError::Length { .. })
        ));
        assert!(matches!(
            TimeWindow::parse("220000+0000", "220000+0000"),
            Err(TimeWindowError::Length { minutes: 0, .. })
        ));
    }

    #[test]
    fn malformed_times_name_the_field_and_the_form() {
        let e = TimeWindow::parse("22:00+0100", "230000+0100").unwrap_err();
        assert_eq!(
            e.to_string(),
            "begin \"22:00+0100\" is not a time of day written HHMMSS+ZZZZ: write it like 220000+0100 (22:00:00 at UTC+01:00)"
        );
        let e = TimeWindow::parse("220000+0100", "250000+0100").unwrap_err();
        assert!(matches!(e, TimeWindowError::Malformed { field: "end", .. }));
        assert!(TimeWindow::parse("2200a0+0100", "230000+0100").is_err());
        assert!(TimeWindow::parse("220000+1500", "230000+1500").is_err());
    }
}
