//! Integration tests of the in-place rollout against the embedded API server, in virtual time.

#[path = "../support/mod.rs"]
mod support;

mod auto;
mod drain;
mod failures;
mod manual;
