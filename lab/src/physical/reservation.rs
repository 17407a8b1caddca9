//! Node reservations, so two runs never drive the same node.
//!
//! 1. [`Reservation::acquire`] opens (creating if needed) `DIR/NODE.lock` and takes an exclusive
//!    `flock` on it without waiting. The directory is `$RACKPROOF_LOCK_DIR`, else `locks` in the
//!    rackproof cache ([`crate::env::Env::lock_dir`]); share it between everyone who drives the
//!    same rack (the same host, or a shared filesystem with working `flock`).
//! 2. Holding the lock, it writes the holder's PID, command line and start time into the file.
//! 3. Someone else's `acquire` fails at once with [`ReservationError::Held`], naming that holder.
//! 4. Dropping the [`Reservation`] empties the file and closes it, which releases the lock. The
//!    kernel also releases it when the holding process dies, however it dies, so a crashed run
//!    never leaves a node reserved. Lock files are never deleted (deleting would let a second
//!    run lock a new file while a third still holds the old one).
//!
//! `flock` locks belong to an open file description: two `acquire`s in one process conflict
//! too, and a child process that inherits the descriptor keeps the lock while it lives.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use rackproof_clock::Clock;
use rustix::fs::{FlockOperation, flock};

/// A node reserved for this process until dropped.
#[derive(Debug)]
pub struct Reservation {
    node: String,
    path: PathBuf,
    file: File,
}

/// A reservation that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ReservationError {
    #[error("cannot create the reservation directory {}", dir.display())]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: cannot open reservation lock {}", path.display())]
    Open {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: cannot lock {}", path.display())]
    Lock {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: cannot record the holder in {}", path.display())]
    Write {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node} is reserved by {holder} (lock {})", path.display())]
    Held {
        node: String,
        path: PathBuf,
        holder: Holder,
    },
}

/// Who holds a reservation, as recorded in its lock file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holder {
    pub pid: Option<u32>,
    pub command: Option<String>,
    pub since: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), Some(command)) => write!(f, "pid {pid} ({command})")?,
            (Some(pid), None) => write!(f, "pid {pid}")?,
            (None, Some(command)) => write!(f, "an unknown pid ({command})")?,
            (None, None) => f.write_str("another process (no holder recorded)")?,
        }
        if let Some(since) = &self.since {
            write!(f, " since {since}")?;
        }
        Ok(())
    }
}

impl Holder {
    fn parse(text: &str) -> Self {
        let mut holder = Self::default();
        for line in text.lines() {
            if let Some((key, value)) = line.split_once(':') {
                let value = value.trim();
                match key.trim() {
                    "pid" => holder.pid = value.parse().ok(),
                    "command" => holder.command = Some(value.to_owned()),
                    "since" => holder.since = Some(value.to_owned()),
                    _ => {}
                }
            }
        }
        holder
    }
}

impl Reservation {
    /// Reserves `node` in `dir` (see the module docs), or says who holds it.
    pub fn acquire(dir: &Path, node: &str, clock: &Clock) -> Result<Self, ReservationError> {
        std::fs::create_dir_all(dir).map_err(|source| ReservationError::Dir {
            dir: dir.to_owned(),
            source,
        })?;
        let path = dir.join(format!("{node}.lock"));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(|source| ReservationError::Open {
                node: node.to_owned(),
                path: path.clone(),
                source,
            })?;
        if let Err(errno) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if errno == rustix::io::Errno::WOULDBLOCK {
                let mut text = String::new();
                // An unreadable record still means the node is held.
                let _ = file.read_to_string(&mut text);
                return Err(ReservationError::Held {
                    node: node.to_owned(),
                    path,
                    holder: Holder::parse(&text),
                });
            }
            return Err(ReservationError::Lock {
                node: node.to_owned(),
                path,
                source: errno.into(),
            });
        }
        let command: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let record = format!(
            "pid: {}\ncommand: {}\nsince: {}\n",
            std::process::id(),
            command.join(" ").replace('\n', " "),
            clock.now()
        );
        let write_err = |source| ReservationError::Write {
            node: node.to_owned(),
            path: path.clone(),
            source,
        };
        file.set_len(0).map_err(write_err)?;
        file.write_all(record.as_bytes()).map_err(write_err)?;
        file.flush().map_err(write_err)?;
        tracing::debug!(node, path = %path.display(), "node reserved");
        Ok(Self {
            node: node.to_owned(),
            path,
            file,
        })
    }

    /// Reserves every node in `nodes` (in name order), or none of them.
    pub fn acquire_all<'a>(
        dir: &Path,
        nodes: impl IntoIterator<Item = &'a str>,
        clock: &Clock,
    ) -> Result<Vec<Self>, ReservationError> {
        let mut names: Vec<&str> = nodes.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        // On an error, the reservations taken so far drop and release.
        names
            .into_iter()
            .map(|node| Self::acquire(dir, node, clock))
            .collect()
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Still holding the lock: nobody reads a stale holder afterwards. Closing releases it.
        if let Err(error) = self.file.set_len(0) {
            tracing::debug!(node = %self.node, %error, "could not clear the reservation record");
        }
        tracing::debug!(node = %self.node, "node released");
    }
}
