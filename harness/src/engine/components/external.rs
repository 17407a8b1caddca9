//! A component run as an external program (`orchestrator: {command: [...]}`): started through
//! the run's [`Outside`] door, every line it prints kept in the component's log, and its whole
//! process group killed when the supervisor stops it or the run ends.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

use crate::engine::components::outside::{Outside, kill_group};
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;

/// A running external component. Dropping it kills its process group.
#[derive(Debug)]
pub(crate) struct ExternalProcess {
    child: tokio::process::Child,
    pid: u32,
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
    ) -> Result<Self, String> {
        let mut command = outside.command(argv)?;
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut command = tokio::process::Command::from(command);
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            format!(
                "failed to start `{}`: {e} (is it installed and on PATH?)",
                argv.join(" ")
            )
        })?;
        let pid = child
            .id()
            .ok_or_else(|| format!("`{}` exited before it could be watched", argv.join(" ")))?;
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
        Ok(Self { child, pid })
    }

    /// How it ended, if it has: `exit code N` or `signal`.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code().map_or_else(
                || "killed by a signal".to_owned(),
                |c| format!("exit code {c}"),
            )),
            Ok(None) => None,
            Err(e) => Some(format!("lost: {e}")),
        }
    }
}

impl Drop for ExternalProcess {
    /// Kills the whole group: the program and whatever it started.
    fn drop(&mut self) {
        kill_group(self.pid);
        let _ = self.child.start_kill();
    }
}

async fn copy_lines(stream: impl AsyncRead + Unpin, name: String, logs: LineLogs, shared: Shared) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        logs.push(&shared, &name, &line);
    }
}
