//! SSH to lab nodes with `russh`: run commands, copy files, collect logs, pin host keys.
//!
//! The same code reaches dropbear in the QEMU/libvirt node images and OpenSSH on physical hosts.
//!
//! - [`SshTarget`] is the plain-data description (inventory/scenario YAML) of one endpoint.
//! - [`SshSession::connect`] connects with public-key authentication (ed25519 or RSA keys in
//!   OpenSSH format), refusing host keys that are not pinned unless the target says
//!   `accept_unknown_host_key: true` (module `hostkey` has the rules).
//! - [`SshSession::run`], [`SshSession::upload`], [`SshSession::download`] and
//!   [`SshSession::collect_logs`] each take a time limit measured on the `rackproof_clock::Clock`.
//! - Copies go over exec channels and `cat` (module `copy`), not SFTP, because dropbear ships
//!   without an SFTP server; uploads are atomic (temp file, size check, rename).
//! - [`dropbear_host_key`] reads the public half of a dropbear host key file, so a node booting
//!   an image whose key was generated at build time is pinned before it ever answers.
//! - [`generate_client_key`] writes a fresh ed25519 client key pair (OpenSSH format).
//! - A dropped connection is re-established once for idempotent operations only (module
//!   `session`).
//!
//! Crypto is `ring` (russh's `ring` feature), not aws-lc-rs. Errors name `host:port` and the
//! operation and never contain key material.

mod copy;
mod dropbear;
mod error;
mod hostkey;
mod keygen;
mod logs;
mod session;
mod shell;
mod target;

pub use dropbear::{DropbearKeyError, dropbear_host_key, dropbear_host_key_pin};
pub use error::Error;
pub use hostkey::{HostKeyTrust, SeenHostKey};
pub use keygen::{KeygenError, generate_client_key, public_path};
pub use logs::{CollectedLog, CollectedLogs, MissingLog};
pub use session::{ExitStatus, Output, SshSession};
pub use target::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_PORT, HostKeyPin, SshTarget};
