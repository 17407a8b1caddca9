//! One authenticated SSH connection to a node, with deadlines and reconnection.
//!
//! Reconnection rule: an operation whose connection turns out to be closed is retried once on a
//! fresh connection (same pinned host key, same deadline) when either nothing had reached the
//! server yet (the channel was not open, the command not sent), or the operation is idempotent
//! (downloads, uploads, log collection). A command from [`SshSession::run`] that was already sent
//! is never re-run: the caller gets [`Error::ConnectionLost`].

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_clock::{Clock, format_duration};
use russh::client::{self, Handle};
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg};
use russh::{ChannelMsg, Sig};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::error::Error;
use crate::hostkey::{PinningHandler, SeenHostKey, Verdict};
use crate::shell::describe_command;
use crate::target::{HostKeyPin, SshTarget};

/// How a remote command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(u32),
    /// It was killed by this signal (`KILL`, `TERM`, ...).
    Signal(String),
}

impl ExitStatus {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        matches!(self, Self::Code(0))
    }

    /// The exit code, if it exited rather than being killed.
    pub fn code(&self) -> Option<u32> {
        match self {
            Self::Code(code) => Some(*code),
            Self::Signal(_) => None,
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(code) => write!(f, "code {code}"),
            Self::Signal(signal) => write!(f, "signal {signal}"),
        }
    }
}

/// What a remote command produced. Output is kept in memory: run commands with bounded output
/// and use [`SshSession::download`] for files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// How it ended.
    pub exit_status: ExitStatus,
    /// Everything it wrote to standard output.
    pub stdout: Vec<u8>,
    /// Everything it wrote to standard error.
    pub stderr: Vec<u8>,
}

impl Output {
    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// An authenticated SSH connection to one node.
pub struct SshSession {
    target: SshTarget,
    clock: Clock,
    key: Arc<PrivateKey>,
    handle: Handle<PinningHandler>,
    host_key: SeenHostKey,
    connections: u32,
}

impl fmt::Debug for SshSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshSession")
            .field("address", &self.target.address())
            .field("user", &self.target.user)
            .field("host_key", &self.host_key.fingerprint())
            .field("connections", &self.connections)
            .finish_non_exhaustive()
    }
}

impl SshSession {
    /// Connects, checks the host key (module `hostkey`) and authenticates with the target's key,
    /// all within `target.connect_timeout` on `clock`.
    pub async fn connect(target: &SshTarget, clock: &Clock) -> Result<Self, Error> {
        let address = target.address();
        target.validate().map_err(|reason| Error::InvalidTarget {
            address: address.clone(),
            reason,
        })?;
        let key = Arc::new(load_key(target)?);
        let deadline = Deadline::new(clock, target.connect_timeout);
        let (handle, host_key) = open(
            target,
            &key,
            target.host_key.clone(),
            target.accept_unknown_host_key,
            &deadline,
        )
        .await?;
        tracing::debug!(address, fingerprint = %host_key.fingerprint(), "ssh connected");
        Ok(Self {
            target: target.clone(),
            clock: clock.clone(),
            key,
            handle,
            host_key,
            connections: 1,
        })
    }

    /// The target this session talks to.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The host key the server presented, and whether it was pinned or accepted as unknown.
    pub fn host_key(&self) -> &SeenHostKey {
        &self.host_key
    }

    /// How many connections this session has made (1 + reconnections).
    pub fn connections(&self) -> u32 {
        self.connections
    }

    /// Whether the current connection is still open, as far as this side has seen (a peer that
    /// went away is noticed when its close arrives).
    pub fn is_connected(&self) -> bool {
        !self.handle.is_closed()
    }

    /// Runs `command` through the remote user's shell with empty standard input, and returns its
    /// exit status and output. A non-zero exit is an [`Output`], not an error. Never re-run once
    /// sent (see the module docs).
    pub async fn run(&mut self, command: &str, timeout: Duration) -> Result<Output, Error> {
        let operation = describe_command(command);
        let deadline = Deadline::new(&self.clock, timeout);
        let mut retried = false;
        loop {
            let attempt = within(&deadline, &self.target, &operation, async {
                let (mut read, write) = self
                    .open_channel()
                    .await
                    .map_err(Attempt::before_exec)?
                    .split();
                write
                    .exec(true, command)
                    .await
                    .map_err(Attempt::before_exec)?;
                write.eof().await.map_err(Attempt::after_exec)?;
                collect_output(&mut read, None).await
            })
            .await;
            match self
                .settle(attempt, &operation, false, &mut retried, &deadline)
                .await?
            {
                Some(output) => return Ok(output),
                None => continue,
            }
        }
    }

    /// Closes the connection politely.
    pub async fn close(self) -> Result<(), Error> {
        self.handle
            .disconnect(russh::Disconnect::ByApplication, "", "en")
            .await
            .map_err(|source| Error::Ssh {
                address: self.target.address(),
                operation: "disconnect".into(),
                source: Box::new(source),
            })
    }

    /// Opens a session channel on the current connection.
    pub(crate) async fn open_channel(&self) -> Result<russh::Channel<client::Msg>, russh::Error> {
        if self.handle.is_closed() {
            return Err(russh::Error::Disconnect);
        }
        self.handle.channel_open_session().await
    }

    pub(crate) fn address(&self) -> String {
        self.target.address()
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Turns one attempt's result into: done (`Some`), retry on a new connection (`None`), or an
    /// error. `idempotent` operations may be retried after they reached the server.
    pub(crate) async fn settle<T>(
        &mut self,
        attempt: Result<T, Attempt>,
        operation: &str,
        idempotent: bool,
        retried: &mut bool,
        deadline: &Deadline,
    ) -> Result<Option<T>, Error> {
        let failure = match attempt {
            Ok(value) => return Ok(Some(value)),
            Err(failure) => failure,
        };
        let address = self.address();
        let connection_lost =
            self.handle.is_closed() && !matches!(failure.kind, AttemptKind::Final(_));
        if connection_lost && !*retried && (idempotent || !failure.sent) {
            *retried = true;
            tracing::info!(address, operation, "ssh connection lost; reconnecting");
            self.reconnect(deadline).await?;
            return Ok(None);
        }
        Err(match failure.kind {
            AttemptKind::Final(error) => error,
            _ if connection_lost && failure.sent => Error::ConnectionLost {
                address,
                operation: operation.to_owned(),
            },
            AttemptKind::Ssh(source) => Error::Ssh {
                address,
                operation: operation.to_owned(),
                source,
            },
            AttemptKind::NoExitStatus => Error::NoExitStatus {
                address,
                operation: operation.to_owned(),
            },
        })
    }

    async fn reconnect(&mut self, deadline: &Deadline) -> Result<(), Error> {
        let limit = Deadline::new(
            &self.clock,
            deadline.remaining().min(self.target.connect_timeout),
        );
        let pin = Some(HostKeyPin::Key(self.host_key.key.clone()));
        let (handle, _) = open(&self.target, &self.key, pin, false, &limit).await?;
        self.handle = handle;
        self.connections += 1;
        Ok(())
    }
}

/// A point in time on the session's clock by which an operation must finish.
#[derive(Debug)]
pub(crate) struct Deadline {
    clock: Clock,
    end: Instant,
    limit: Duration,
}

impl Deadline {
    pub(crate) fn new(clock: &Clock, limit: Duration) -> Self {
        Self {
            clock: clock.clone(),
            end: clock.instant() + limit,
            limit,
        }
    }

    pub(crate) fn remaining(&self) -> Duration {
        self.end.saturating_duration_since(self.clock.instant())
    }
}

/// Runs `future` until `deadline`, turning a timeout into [`Error::Timeout`].
pub(crate) async fn within<T>(
    deadline: &Deadline,
    target: &SshTarget,
    operation: &str,
    future: impl Future<Output = Result<T, Attempt>>,
) -> Result<T, Attempt> {
    match deadline.clock.timeout(deadline.remaining(), future).await {
        Ok(result) => result,
        Err(_) => Err(Attempt::fatal(Error::Timeout {
            address: target.address(),
            operation: operation.to_owned(),
            after: format_duration(deadline.limit),
        })),
    }
}

/// Why one attempt of an operation failed, and whether the server may have acted on it.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) kind: AttemptKind,
    /// The command reached the server.
    pub(crate) sent: bool,
}

#[derive(Debug)]
pub(crate) enum AttemptKind {
    Ssh(Box<russh::Error>),
    NoExitStatus,
    /// Not a connection problem: never retried.
    Final(Error),
}

impl Attempt {
    pub(crate) fn before_exec(error: russh::Error) -> Self {
        Self {
            kind: AttemptKind::Ssh(Box::new(error)),
            sent: false,
        }
    }

    pub(crate) fn after_exec(error: russh::Error) -> Self {
        Self {
            kind: AttemptKind::Ssh(Box::new(error)),
            sent: true,
        }
    }

    pub(crate) fn fatal(error: Error) -> Self {
        Self {
            kind: AttemptKind::Final(error),
            sent: true,
        }
    }
}

/// Where a download's standard output goes: a local file, counted.
pub(crate) struct StdoutSink<'a> {
    pub(crate) file: &'a mut tokio::fs::File,
    pub(crate) written: u64,
    pub(crate) error: &'a (dyn Fn(std::io::Error) -> Error + Sync),
}

impl StdoutSink<'_> {
    async fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        self.file.write_all(data).await.map_err(self.error)?;
        self.written += data.len() as u64;
        Ok(())
    }
}

/// Reads a channel to its end: stdout goes to `sink` (kept in the output without one), stderr
/// is kept. Fails with `NoExitStatus` if the channel ends without one.
pub(crate) async fn collect_output(
    channel: &mut russh::ChannelReadHalf,
    mut sink: Option<&mut StdoutSink<'_>>,
) -> Result<Output, Attempt> {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut status = None;
    while let Some(message) = channel.wait().await {
        match message {
            ChannelMsg::Data { data } => match sink.as_deref_mut() {
                Some(sink) => sink.write(&data).await.map_err(Attempt::fatal)?,
                None => stdout.extend_from_slice(&data),
            },
            ChannelMsg::ExtendedData { data, ext: 1 } => stderr.extend_from_slice(&data),
            ChannelMsg::ExitStatus { exit_status } => status = Some(ExitStatus::Code(exit_status)),
            ChannelMsg::ExitSignal { signal_name, .. } => {
                status = Some(ExitStatus::Signal(signal_name_text(&signal_name)))
            }
            ChannelMsg::Failure => {
                return Err(Attempt {
                    kind: AttemptKind::Ssh(Box::new(russh::Error::RequestDenied)),
                    sent: false,
                });
            }
            ChannelMsg::Close => break,
            _ => {}
        }
    }
    match status {
        Some(exit_status) => Ok(Output {
            exit_status,
            stdout,
            stderr,
        }),
        None => Err(Attempt {
            kind: AttemptKind::NoExitStatus,
            sent: true,
        }),
    }
}

fn signal_name_text(signal: &Sig) -> String {
    match signal {
        Sig::Custom(name) => name.clone(),
        other => format!("{other:?}"),
    }
}

fn load_key(target: &SshTarget) -> Result<PrivateKey, Error> {
    let address = target.address();
    let path = target.private_key.clone();
    match russh::keys::load_secret_key(&path, None) {
        Ok(key) => Ok(key),
        Err(russh::keys::Error::KeyIsEncrypted) => Err(Error::EncryptedClientKey { address, path }),
        Err(source) => Err(Error::ClientKey {
            address,
            path,
            source: Box::new(source),
        }),
    }
}

fn client_config() -> Arc<client::Config> {
    Arc::new(client::Config {
        keepalive_interval: Some(Duration::from_secs(30)),
        keepalive_max: 3,
        nodelay: true,
        ..client::Config::default()
    })
}

/// TCP connect, key exchange with host-key check, public-key authentication.
async fn open(
    target: &SshTarget,
    key: &Arc<PrivateKey>,
    pin: Option<HostKeyPin>,
    accept_unknown: bool,
    deadline: &Deadline,
) -> Result<(Handle<PinningHandler>, SeenHostKey), Error> {
    let address = target.address();
    let operation = "connect";
    let attempt = within(deadline, target, operation, async {
        let stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|source| {
                Attempt::fatal(Error::Connect {
                    address: address.clone(),
                    operation: operation.into(),
                    source,
                })
            })?;
        let verdict = Arc::new(Mutex::new(None));
        let handler = PinningHandler {
            pin,
            accept_unknown,
            verdict: verdict.clone(),
        };
        let connected = client::connect_stream(client_config(), stream, handler).await;
        let recorded = verdict.lock().ok().and_then(|mut slot| slot.take());
        let (mut handle, seen) = match (connected, recorded) {
            (Ok(handle), Some(Verdict::Trusted(seen))) => (handle, seen),
            (
                _,
                Some(
                    refused @ (Verdict::Mismatch { .. }
                    | Verdict::Unknown { .. }
                    | Verdict::Certificate),
                ),
            ) => {
                return Err(Attempt::fatal(refusal(&address, refused)));
            }
            (Err(source), _) => {
                return Err(Attempt::fatal(Error::Ssh {
                    address: address.clone(),
                    operation: operation.into(),
                    source: Box::new(source),
                }));
            }
            (Ok(_), None) => {
                return Err(Attempt::fatal(Error::Ssh {
                    address: address.clone(),
                    operation: operation.into(),
                    source: Box::new(russh::Error::UnknownKey),
                }));
            }
        };
        let hash = if key.algorithm().is_rsa() {
            handle
                .best_supported_rsa_hash()
                .await
                .ok()
                .flatten()
                .flatten()
        } else {
            None
        };
        let auth = handle
            .authenticate_publickey(
                target.user.clone(),
                PrivateKeyWithHashAlg::new(key.clone(), hash),
            )
            .await
            .map_err(|source| {
                Attempt::fatal(Error::Ssh {
                    address: address.clone(),
                    operation: "authenticate".into(),
                    source: Box::new(source),
                })
            })?;
        if !auth.success() {
            return Err(Attempt::fatal(Error::AuthRejected {
                address: address.clone(),
                user: target.user.clone(),
                key_path: target.private_key.clone(),
            }));
        }
        Ok((handle, seen))
    })
    .await;
    attempt.map_err(|failure| match failure.kind {
        AttemptKind::Final(error) => error,
        AttemptKind::Ssh(source) => Error::Ssh {
            address: address.clone(),
            operation: operation.into(),
            source,
        },
        AttemptKind::NoExitStatus => Error::NoExitStatus {
            address: address.clone(),
            operation: operation.into(),
        },
    })
}

fn refusal(address: &str, verdict: Verdict) -> Error {
    let address = address.to_owned();
    match verdict {
        Verdict::Mismatch {
            expected,
            presented,
        } => Error::HostKeyMismatch {
            address,
            expected,
            presented,
        },
        Verdict::Unknown {
            presented,
            public_key,
        } => Error::UnknownHostKey {
            address,
            presented,
            public_key,
        },
        Verdict::Certificate | Verdict::Trusted(_) => Error::InvalidTarget {
            address,
            reason: "the server presented a host certificate; pin a plain host key".into(),
        },
    }
}
