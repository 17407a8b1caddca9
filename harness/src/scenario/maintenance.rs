//! Maintenance windows in scenario files: the run's clock start (so a daily window means a time
//! of day), the pool's maintenance settings (the Shoot's `spec.maintenance`), and the catalog
//! fields a maintenance decides by (the CloudProfile's classification, expiration date and
//! image `updateStrategy`).

use std::borrow::Cow;
use std::fmt;

use jiff::Timestamp;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Located, Span};

/// An instant written in RFC 3339 with its offset (`2026-03-02T01:00:00Z`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub Timestamp);

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<Timestamp>().map(Instant).map_err(|e| {
            serde::de::Error::custom(format!(
                "{text:?} is not an instant: write the date, the time of day and the offset in RFC 3339, e.g. \"2026-03-02T01:00:00Z\" ({e})"
            ))
        })
    }
}

impl Serialize for Instant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0.to_string())
    }
}

impl JsonSchema for Instant {
    fn schema_name() -> Cow<'static, str> {
        "Instant".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "An instant in RFC 3339, with its offset, e.g. `2026-03-02T01:00:00Z`.",
            "examples": ["2026-03-02T01:00:00Z"]
        })
    }
}

/// The run's clock.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClockSettings {
    /// The instant the run starts at (virtual time only: a simulated run's clock starts here;
    /// default `2026-01-01T00:00:00Z`). Maintenance windows are times of day, so this decides
    /// how long the run waits for the first one.
    #[serde(default)]
    pub start: Option<Instant>,
}

/// The pool's maintenance settings (the Shoot's `spec.maintenance`). With them, the maintenance
/// controller runs in the control plane (gardener-controller-manager's role).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Maintenance {
    /// The daily window, `begin` and `end` written `HHMMSS+ZZZZ` (e.g. `220000+0000`), 30
    /// minutes to 6 hours; `end` before `begin` crosses midnight. Work starts at most 15 minutes
    /// before the end.
    pub time_window: TimeWindow,
    /// Which versions move to higher ones in the window (each `true` when absent, as in
    /// Gardener); expired versions move regardless.
    #[serde(default)]
    pub auto_update: AutoUpdate,
    /// Whether a person's spec change waits for the window before it is rolled out.
    #[serde(default)]
    pub confine_spec_update_rollout: bool,
}

/// A daily maintenance window: `begin` and `end` as times of day, or (for runs on the wall
/// clock, where the time of day is whenever the run happens) `opensAfter` and `lasts`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimeWindow {
    /// Start, `HHMMSS+ZZZZ`.
    #[serde(default)]
    pub begin: Option<Located<String>>,
    /// End, `HHMMSS+ZZZZ`.
    #[serde(default)]
    pub end: Option<Located<String>>,
    /// Instead of `begin` and `end`: the window begins this long after the run starts (the
    /// time of day then, in UTC, to the second) ...
    #[serde(default)]
    pub opens_after: Option<Span>,
    /// ... and lasts this long (30 minutes to 6 hours).
    #[serde(default)]
    pub lasts: Option<Span>,
}

impl TimeWindow {
    /// `begin` and `end` as the pool states them (`HHMMSS+ZZZZ`), for a run that starts at
    /// `start`; `None` when the scenario gives neither form completely (validation says so).
    pub fn resolve(&self, start: Timestamp) -> Option<(String, String)> {
        if let (Some(begin), Some(end)) = (&self.begin, &self.end) {
            return Some((begin.value.clone(), end.value.clone()));
        }
        let (opens_after, lasts) = (self.opens_after?, self.lasts?);
        let time_of_day = |at: Timestamp| at.strftime("%H%M%S+0000").to_string();
        let begin = start.checked_add(opens_after.get()).ok()?;
        // Whole seconds, rounded up: the window never opens before `opensAfter` has passed.
        let begin =
            Timestamp::from_second(begin.as_second() + i64::from(begin.subsec_nanosecond() > 0))
                .ok()?;
        let end = begin.checked_add(lasts.get()).ok()?;
        Some((time_of_day(begin), time_of_day(end)))
    }
}

/// Opt-ins to automatic version updates.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AutoUpdate {
    /// Move the pool's Kubernetes version to the newest patch of its minor (default `true`).
    #[serde(default)]
    pub kubernetes_version: Option<bool>,
    /// Move the OS image to the newest version `catalog.updateStrategy` allows (default `true`).
    #[serde(default)]
    pub machine_image_version: Option<bool>,
}

/// A version's logical state in the catalog (`supported` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Classification {
    /// New, not for production: never a maintenance target.
    Preview,
    /// Recommended.
    Supported,
    /// Approaching its end of life.
    Deprecated,
}

/// How far an automatic update of the OS image may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ImageUpdateStrategy {
    /// Only to a higher patch of the same major.minor.
    Patch,
    /// Only within the same major.
    Minor,
    /// To any higher version.
    Major,
}

/// The image catalog's fields beyond the image versions (the CloudProfile's role).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Catalog {
    /// How far a maintenance may move the OS image (default `major`).
    #[serde(default)]
    pub update_strategy: Option<ImageUpdateStrategy>,
    /// Kubernetes versions on offer besides those the pool and the steps name, and the
    /// classification or expiration date of any of them.
    #[serde(default)]
    pub kubernetes: Vec<KubernetesVersion>,
}

/// A Kubernetes version of the catalog.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubernetesVersion {
    /// `MAJOR.MINOR.PATCH`.
    pub version: Located<String>,
    #[serde(default)]
    pub classification: Option<Classification>,
    /// From this instant on the version is expired (a pool on it is forced off in its window).
    #[serde(default)]
    pub expiration_date: Option<Instant>,
}

/// How the last maintenance ended (`status.lastMaintenance.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MaintenanceState {
    Succeeded,
    Failed,
}

impl MaintenanceState {
    /// The value in `status.lastMaintenance.state`.
    pub fn as_api(self) -> &'static str {
        match self {
            Self::Succeeded => inplace_api::crd::MAINTENANCE_SUCCEEDED,
            Self::Failed => inplace_api::crd::MAINTENANCE_FAILED,
        }
    }
}
