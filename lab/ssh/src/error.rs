//! What can go wrong talking SSH to a node. Every error names the `host:port` and the operation;
//! none carries key material (host keys appear only as SHA-256 fingerprints).

use std::path::PathBuf;

/// An SSH operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The target description is unusable.
    #[error("invalid ssh target {address}: {reason}")]
    InvalidTarget {
        /// `host:port`.
        address: String,
        /// What is wrong.
        reason: String,
    },
    /// The client's private key could not be loaded.
    #[error("loading private key {path} for {address}")]
    ClientKey {
        /// `host:port`.
        address: String,
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<russh::keys::Error>,
    },
    /// The client's private key is passphrase-protected (not supported).
    #[error(
        "loading private key {path} for {address}: the key is passphrase-protected; use an unencrypted key"
    )]
    EncryptedClientKey {
        /// `host:port`.
        address: String,
        /// The key file.
        path: PathBuf,
    },
    /// The server presented a host key other than the pinned one.
    #[error(
        "host key of {address} does not match the pinned key: expected {expected}, the server presented {presented}"
    )]
    HostKeyMismatch {
        /// `host:port`.
        address: String,
        /// SHA-256 fingerprint of the pinned key.
        expected: String,
        /// SHA-256 fingerprint of the key the server presented.
        presented: String,
    },
    /// The target pins no host key and does not accept unknown ones.
    #[error(
        "host key {presented} of {address} is not pinned; set host_key to it (or accept_unknown_host_key: true to accept it once)"
    )]
    UnknownHostKey {
        /// `host:port`.
        address: String,
        /// SHA-256 fingerprint of the key the server presented.
        presented: String,
        /// The presented key as an OpenSSH public-key line, for pinning.
        public_key: String,
    },
    /// The server refused the client key.
    #[error("authenticating as {user} on {address}: the server refused the key {key_path}")]
    AuthRejected {
        /// `host:port`.
        address: String,
        /// The login.
        user: String,
        /// The private key file that was offered.
        key_path: PathBuf,
    },
    /// An operation ran out of time.
    #[error("{operation} on {address}: timed out after {after}")]
    Timeout {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// The limit, as `10s`.
        after: String,
    },
    /// The SSH layer failed (connection refused, protocol error, channel refused).
    #[error("{operation} on {address}")]
    Ssh {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// Why.
        #[source]
        source: Box<russh::Error>,
    },
    /// The TCP connection could not be made.
    #[error("{operation} on {address}")]
    Connect {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The connection dropped while a command that must not run twice was running.
    #[error(
        "{operation} on {address}: the connection was lost; the command may or may not have completed"
    )]
    ConnectionLost {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
    },
    /// The server closed the channel without an exit status.
    #[error("{operation} on {address}: the server closed the channel without an exit status")]
    NoExitStatus {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
    },
    /// A remote helper command of a copy failed.
    #[error("{operation} on {address}: remote command exited with {status}: {stderr}")]
    RemoteFailed {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// The exit status, as `code 1` or `signal KILL`.
        status: String,
        /// The remote standard error (trimmed, shortened).
        stderr: String,
    },
    /// A local file could not be read or written.
    #[error("{operation} on {address}: local file {path}")]
    Local {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// The local file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An upload source gave a different number of bytes than announced.
    #[error(
        "{operation} on {address}: the source gave {sent} bytes, not the announced {expected}; the remote file was left unchanged"
    )]
    ShortUpload {
        /// `host:port`.
        address: String,
        /// What was running.
        operation: String,
        /// Bytes sent.
        sent: u64,
        /// Bytes announced.
        expected: u64,
    },
    /// A path or mode argument is unusable.
    #[error("{operation} on {address}: {reason}")]
    InvalidArgument {
        /// `host:port`.
        address: String,
        /// What was asked.
        operation: String,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// The `host:port` the error is about.
    pub fn address(&self) -> &str {
        match self {
            Self::InvalidTarget { address, .. }
            | Self::ClientKey { address, .. }
            | Self::EncryptedClientKey { address, .. }
            | Self::HostKeyMismatch { address, .. }
            | Self::UnknownHostKey { address, .. }
            | Self::AuthRejected { address, .. }
            | Self::Timeout { address, .. }
            | Self::Ssh { address, .. }
            | Self::Connect { address, .. }
            | Self::ConnectionLost { address, .. }
            | Self::NoExitStatus { address, .. }
            | Self::RemoteFailed { address, .. }
            | Self::Local { address, .. }
            | Self::ShortUpload { address, .. }
            | Self::InvalidArgument { address, .. } => address,
        }
    }
}
