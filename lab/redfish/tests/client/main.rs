//! The Redfish client against the emulator over real TCP on 127.0.0.1: every reset type, boot
//! override, sessions (with expiry and re-login), retries, TLS policies, each fault rule and
//! vendor profile, and credential hygiene.

#[path = "../common/mod.rs"]
mod common;
mod quirks;
mod resets;
mod support;
mod transport;
