//! Scenario model, engine, invariants, reports and the `rackproof` CLI.
