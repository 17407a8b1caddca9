//! The emulator called as a tower service (no socket): status codes, bodies, auth, sessions and
//! every fault effect, in virtual time where time matters.

#[path = "../common/mod.rs"]
mod common;
mod faults;
mod resources;
mod sessions;
mod support;
