//! Scenario model, loading and validation, engine, invariants, reports, and the `rackproof` CLI's
//! library side.

pub mod cli;
pub mod diagnostic;
pub mod engine;
pub mod load;
pub mod report;
pub mod scenario;
pub mod schema;
mod validate;
mod yaml_error;
