//! IPMI over LAN (RMCP+, IPMI v2.0 "lanplus"): a BMC emulator that Debian's `ipmitool -I lanplus`
//! drives, and a native client for physical BMCs.
//!
//! # Emulator
//!
//! [`IpmiEmulator::start`] puts a UDP BMC on 127.0.0.1 in front of any
//! [`rackproof_driver::SharedMachine`]. It answers what `ipmitool -I lanplus -H 127.0.0.1 -p PORT
//! -U USER -P PASS` needs for `power status|on|off|cycle|reset|soft`, `chassis status`,
//! `chassis bootdev pxe|disk [options=persistent]`, `chassis bootparam get 5` and `mc info`:
//! ASF presence ping, Get Channel Authentication Capabilities, Get Channel Cipher Suites, RMCP+
//! Open Session, RAKP 1–4, cipher suites 3 and 17 (ipmitool 1.8.19 asks for the cipher suite list
//! and picks 17 when offered, else 3), session sequence numbers, integrity (HMAC-SHA1-96,
//! HMAC-SHA256-128) and confidentiality (AES-CBC-128), Set Session Privilege Level, Close
//! Session, Get Device ID, Get Chassis Status, Chassis Control and Get/Set System Boot Options
//! (parameters 0, 4 and 5).
//!
//! The layers: [`codec`] (message layouts, pure), [`crypto`] and [`secure`] (keys, RAKP codes,
//! sealing packets), [`bmc`] (session table, one datagram in → one out), [`handler`]
//! (transport-free: typed machine requests → typed responses against the machine) and
//! [`emulator`] (the UDP socket).
//!
//! # Client: native, not ipmitool
//!
//! [`IpmiClient`] speaks RMCP+ itself, reusing the same codec and crypto, and implements
//! [`rackproof_driver::Power`] and [`rackproof_driver::BootControl`]. Decided against shelling
//! out to ipmitool because:
//!
//! - ipmitool takes the password on its command line (`-P`, visible in `/proc/*/cmdline`) or
//!   through a file or environment variable; the native client keeps it in memory only, so
//!   credentials can never leak into process listings, logs or error messages;
//! - its results are human-readable text whose wording changes between versions, and its
//!   failures are exit code 1 with prose; the native client returns typed values and
//!   completion codes;
//! - it is synchronous and forks a process per command (plus a full session handshake each
//!   time); the native client is async, keeps one session open across calls, and re-opens it
//!   when the BMC drops it;
//! - it adds a Debian package to every deployment that drives a physical rack.
//!
//! ipmitool remains the reference peer: the tests drive the emulator with it, so the emulator
//! and the native client cannot agree on a private dialect.
//!
//! # Out of scope
//!
//! IPMI v1.5 sessions (MD2/MD5/password auth types), cipher suites other than 3 and 17, two-key
//! logins (Kg), Serial over LAN, bridging, SDRs/sensors/SEL, and more than one user per emulated
//! BMC.

pub mod bmc;
pub mod client;
pub mod codec;
pub mod credentials;
pub mod crypto;
pub mod emulator;
pub mod handler;
pub mod secure;

pub use bmc::{Bmc, BmcConfig};
pub use client::{ClientError, ClientOptions, IpmiClient};
pub use credentials::{Credentials, CredentialsError};
pub use emulator::{EmulatorError, IpmiEmulator};
