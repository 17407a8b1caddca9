//! Redfish BMC client and emulator.
//!
//! - [`emulator`]: an axum Redfish service in front of any [`rackproof_driver::SharedMachine`],
//!   with basic and session auth, task monitors and runtime [fault rules](emulator::FaultRule)
//!   (status codes, latency, ignored actions, session expiry, vendor profiles).
//! - [`client`]: a Redfish client (reqwest + rustls with the ring provider) that implements
//!   [`rackproof_driver::Power`] and [`rackproof_driver::BootControl`], so the harness drives an
//!   emulated node and a rack server through the same code.

pub mod client;
pub mod emulator;

pub use client::{
    AuthMode, ClientOptions, Credentials, Endpoint, Quirks, RedfishClient, RedfishError,
    RetryPolicy, TlsPolicy,
};
pub use emulator::{
    ConfigError, Emulator, EmulatorConfig, FaultEffect, FaultId, FaultRule, InvalidFault,
    RequestRecord, RunningEmulator, ServeError, VendorProfile, app,
};
