//! The JSON Schema of scenario files, for editors (yaml-language-server) and `rackproof schema`.

use crate::scenario::Scenario;

/// The modeline that makes yaml-language-server check a scenario against the schema.
pub const MODELINE_PREFIX: &str = "# yaml-language-server: $schema=";

/// The scenario JSON Schema, pretty-printed.
pub fn scenario_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_string_pretty(&schema).expect("a JSON Schema serializes")
}
