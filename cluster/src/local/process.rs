//! A child process of the control plane (etcd, kube-apiserver or kube-controller-manager) with its
//! output appended to a log file (a restarted process adds to the log of the one before).
//!
//! The process is killed (SIGKILL: its data is throwaway) and reaped on [`Process::stop`] and on
//! drop, so its PID is gone when either returns; `kill_on_drop` backs this up should the drop
//! itself be skipped by a panic in between.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::Error;

/// How long a drop waits for a killed process to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(5);
const REAP_POLL: Duration = Duration::from_millis(5);

#[derive(Debug)]
pub(crate) struct Process {
    program: &'static str,
    child: Child,
    pid: u32,
    log: PathBuf,
    reaped: bool,
}

impl Process {
    /// Starts `binary args…` with stdout and stderr appended to `log` (created if missing).
    pub(crate) fn spawn(
        program: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Self, Error> {
        let spawn_error = |source| Error::Spawn {
            program,
            binary: binary.to_owned(),
            source,
        };
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|source| Error::Write {
                path: log.clone(),
                source,
            })?;
        let err = out.try_clone().map_err(|source| Error::Write {
            path: log.clone(),
            source,
        })?;
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let pid = child
            .id()
            .ok_or_else(|| spawn_error(std::io::Error::other("the process has no PID")))?;
        tracing::debug!(program, pid, log = %log.display(), "started");
        Ok(Self {
            program,
            child,
            pid,
            log,
            reaped: false,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// An error if the process has ended.
    pub(crate) fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.reaped = true;
                Err(Error::Exited {
                    program: self.program,
                    status,
                    log: self.log.clone(),
                })
            }
            Err(source) => Err(Error::Stop {
                program: self.program,
                source,
            }),
        }
    }

    /// Kills the process and waits until it is reaped.
    pub(crate) async fn stop(&mut self) -> Result<(), Error> {
        if self.reaped {
            return Ok(());
        }
        self.child.kill().await.map_err(|source| Error::Stop {
            program: self.program,
            source,
        })?;
        self.reaped = true;
        tracing::debug!(program = self.program, pid = self.pid, "stopped");
        Ok(())
    }

    /// Kills the process and reaps it without an async context (for drops).
    fn stop_blocking(&mut self) {
        if self.reaped {
            return;
        }
        if let Err(error) = self.child.start_kill() {
            tracing::warn!(program = self.program, pid = self.pid, %error, "failed to kill");
        }
        let mut waited = Duration::ZERO;
        while waited < REAP_WAIT {
            match self.child.try_wait() {
                Ok(Some(_)) => {
                    self.reaped = true;
                    return;
                }
                Ok(None) => {
                    std::thread::sleep(REAP_POLL);
                    waited += REAP_POLL;
                }
                Err(error) => {
                    tracing::warn!(program = self.program, pid = self.pid, %error, "failed to reap");
                    return;
                }
            }
        }
        tracing::warn!(
            program = self.program,
            pid = self.pid,
            "still not reaped {REAP_WAIT:?} after SIGKILL"
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop_blocking();
    }
}
