//! Durations in scenario files, written with a unit: `90s`, `10m`, `2h`, `1h30m`, `250ms`.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration that names its unit. Bare numbers are refused, so `timeout: 10` never means
/// "10 what?".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(pub Duration);

impl Span {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&rackproof_clock::format_duration(self.0))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&rackproof_clock::format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        rackproof_clock::parse_duration(&text)
            .map(Span)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&rackproof_clock::format_duration(self.0))
    }
}

impl JsonSchema for Span {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$",
            "description": "A duration with units, e.g. `90s`, `10m`, `2h`, `1h30m`, `250ms`.",
            "examples": ["90s", "10m", "2h"]
        })
    }
}
