//! A component run as an external program (`orchestrator: {command: [...]}`): started through
//! the run's [`Outside`] door, every line it prints kept in the component's log, and its whole
//! process group killed when the supervisor stops it, when it exits (before it is reaped), or
//! when the run ends. Its group is signalled only while the leader is un-reaped: tokio's
//! `Child::id` is `None` once it was, and the id may then be another process's.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use crate::engine::components::outside::{Outside, OutsideError};
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;

/// Why an external component could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExternalError {
    /// Its command line is not one the outside door can run.
    #[error(transparent)]
    Command(#[from] OutsideError),
    /// Its program could not be started.
    #[error("failed to start `{command}` (is it installed and on PATH?)")]
    Start {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

/// A running external component. Dropping it kills its process group.
#[derive(Debug)]
pub(crate) struct ExternalProcess {
    child: tokio::process::Child,
}

impl ExternalProcess {
    /// Starts `argv` (through `outside`, with the extra variables `env`) as component `name`; its
    /// stdout and stderr go to `logs` under `name`.
    pub(crate) fn start(
        outside: &Outside,
        argv: &[String],
        env: &[(&str, String)],
        name: &str,
        logs: &LineLogs,
        shared: &Shared,
    ) -> Result<Self, ExternalError> {
        let mut command = outside.command(argv)?;
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut command = tokio::process::Command::from(command);
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| ExternalError::Start {
            command: argv.join(" "),
            source,
        })?;
        if let (Some(record), Some(pid)) = (rackproof_reap::record(), child.id()) {
            record.add_group(pid);
        }
        if let Some(out) = child.stdout.take() {
            tokio::spawn(copy_lines(
                out,
                name.to_owned(),
                logs.clone(),
                shared.clone(),
            ));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(copy_lines(
                err,
                name.to_owned(),
                logs.clone(),
                shared.clone(),
            ));
        }
        Ok(Self { child })
    }

    /// How it ended, if it has: `exit code N` or `signal`.
    pub(crate) fn exited(&mut self) -> Option<String> {
        let pid = self.child.id().and_then(pid_of)?;
        // Look without reaping (the leader stays a zombie, its group id ours), kill what is left
        // of the group, then reap.
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            Ok(None) => return None,
            Ok(Some(_)) | Err(_) => self.kill_group(),
        }
        let leader = self.child.id();
        match self.child.try_wait() {
            Ok(Some(status)) => {
                forget(leader);
                Some(status.code().map_or_else(
                    || "killed by a signal".to_owned(),
                    |c| format!("exit code {c}"),
                ))
            }
            Ok(None) => None,
            Err(e) => Some(format!("lost: {e}")),
        }
    }
}

impl Drop for ExternalProcess {
    /// Kills the whole group: the program and whatever it started.
    fn drop(&mut self) {
        let leader = self.child.id();
        self.kill_group();
        let _ = self.child.start_kill();
        forget(leader);
    }
}

/// Takes a stopped leader off the process's record of children (`rackproof_reap`).
fn forget(leader: Option<u32>) {
    if let (Some(record), Some(pid)) = (rackproof_reap::record(), leader) {
        record.remove(pid);
    }
}

impl ExternalProcess {
    /// SIGKILL to the group, if its leader is un-reaped.
    fn kill_group(&self) {
        if let Some(pid) = self.child.id().and_then(pid_of) {
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }
}

fn pid_of(id: u32) -> Option<Pid> {
    i32::try_from(id).ok().and_then(Pid::from_raw)
}

async fn copy_lines(stream: impl AsyncRead + Unpin, name: String, logs: LineLogs, shared: Shared) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        logs.push(&shared, &name, &line);
    }
}
