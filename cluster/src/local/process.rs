//! A child process of the control plane (etcd, kube-apiserver or kube-controller-manager) with its
//! output appended to a log file (a restarted process adds to the log of the one before).
//!
//! The process is killed (SIGKILL: its data is throwaway) and reaped on [`Process::stop`] and on
//! drop, so its PID is gone when either returns; `kill_on_drop` backs this up should the drop
//! itself be skipped by a panic in between. Should the harness be killed outright, the kernel
//! kills the process with it (`rackproof_reap::dying_with_parent`: spawned from an async task,
//! so from a runtime thread that lives as long as the run), and the process is listed in the
//! run's record of children (`rackproof_reap::record`) for the next run's sweep.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

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
        let child = tokio::process::Command::from(rackproof_reap::dying_with_parent(binary))
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
        if let Some(record) = rackproof_reap::record() {
            record.add(pid);
        }
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

    /// Notes that the process was reaped: from now on its pid may be another's.
    fn set_reaped(&mut self) {
        self.reaped = true;
        if let Some(record) = rackproof_reap::record() {
            record.remove(self.pid);
        }
    }

    /// An error if the process has ended.
    pub(crate) fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.set_reaped();
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
        self.set_reaped();
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
                    self.set_reaped();
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
