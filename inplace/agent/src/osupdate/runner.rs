//! Running the OSC's OS-update command: as a child process on real nodes, in-process in
//! simulation (same argument vector, same logic, [`super::run`]).
//!
//! The agent hands each run an attempt number; a runner never runs one attempt twice on its
//! own (no internal retries). A run that exceeds its timeout is killed and reported as
//! [`RunError::TimedOut`], which the agent treats like a network problem (retriable): a stuck
//! download is the usual cause.

use std::time::Duration;

use inplace_api::keys::OsUpdateExit;
use rackproof_clock::Clock;

use super::OsUpdateEnv;

/// One run of the OS-update command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsUpdateInvocation {
    /// `status.inPlaceUpdates.osUpdate.command`.
    pub command: String,
    /// `status.inPlaceUpdates.osUpdate.args`.
    pub args: Vec<String>,
    /// Limit for the whole run.
    pub timeout: Duration,
    /// Which attempt this is (1-based) for the attempted version.
    pub attempt: u32,
    /// The node it runs on (`RACKPROOF_NODE` in the command's environment).
    pub node: String,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsUpdateOutcome {
    /// The exit code's meaning.
    pub exit: OsUpdateExit,
    /// The combined output (last 4 KiB), for the failure reason.
    pub output: String,
}

/// A run that did not produce an exit code.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The command could not be started.
    #[error("failed to start OS-update command {command:?}: {detail}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        detail: String,
    },
    /// The command ran longer than allowed and was killed.
    #[error("OS-update command {command:?} timed out after {}", rackproof_clock::format_duration(*after))]
    TimedOut {
        /// The command.
        command: String,
        /// The limit.
        after: Duration,
    },
    /// The command was killed by a signal.
    #[error("OS-update command {command:?} was killed by a signal")]
    Killed {
        /// The command.
        command: String,
    },
    /// The in-process runner was asked to run something other than `rackproof-agent os-update`.
    #[error(
        "the in-process runner only runs `rackproof-agent os-update`, not {command:?} {args:?}"
    )]
    Unsupported {
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Runs the OS-update command.
#[async_trait::async_trait]
pub trait OsUpdateRunner: Send + Sync + std::fmt::Debug {
    /// Runs `invocation` once.
    async fn run(&self, invocation: &OsUpdateInvocation) -> Result<OsUpdateOutcome, RunError>;
}

fn tail(text: &str) -> String {
    const MAX: usize = 4096;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut start = text.len() - MAX;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Runs the command as a child process (killed when the run is dropped or times out). The
/// attempt number is passed as `RACKPROOF_OS_UPDATE_ATTEMPT` and the node as `RACKPROOF_NODE` in
/// the environment. Each line the command prints is logged as it comes (target `os-update`), so
/// an operator follows a long install live in the agent's log.
#[derive(Debug, Clone)]
pub struct SubprocessRunner {
    clock: Clock,
}

impl SubprocessRunner {
    /// A runner timing runs on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self { clock }
    }
}

#[async_trait::async_trait]
impl OsUpdateRunner for SubprocessRunner {
    async fn run(&self, invocation: &OsUpdateInvocation) -> Result<OsUpdateOutcome, RunError> {
        use std::process::Stdio;
        let mut child = tokio::process::Command::new(&invocation.command)
            .args(&invocation.args)
            .env(
                "RACKPROOF_OS_UPDATE_ATTEMPT",
                invocation.attempt.to_string(),
            )
            .env("RACKPROOF_NODE", &invocation.node)
            // Its lines end up inside the agent's log lines: no colour codes in them.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| RunError::Spawn {
                command: invocation.command.clone(),
                detail: e.to_string(),
            })?;
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let run = async {
            let (out, err) = tokio::join!(log_lines(stdout), log_lines(stderr));
            let status = child.wait().await;
            (status, out + &err)
        };
        let (status, text) = match self.clock.timeout(invocation.timeout, run).await {
            Err(_) => {
                return Err(RunError::TimedOut {
                    command: invocation.command.clone(),
                    after: invocation.timeout,
                });
            }
            Ok((Err(e), _)) => {
                return Err(RunError::Spawn {
                    command: invocation.command.clone(),
                    detail: e.to_string(),
                });
            }
            Ok((Ok(status), text)) => (status, text),
        };
        let Some(code) = status.code() else {
            return Err(RunError::Killed {
                command: invocation.command.clone(),
            });
        };
        Ok(OsUpdateOutcome {
            exit: OsUpdateExit::from_code(code),
            output: tail(&text),
        })
    }
}

/// Logs every line of `pipe` as it arrives and returns them all.
async fn log_lines(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    use tokio::io::AsyncBufReadExt as _;
    let Some(pipe) = pipe else {
        return String::new();
    };
    let mut lines = tokio::io::BufReader::new(pipe).lines();
    let mut text = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "os-update", "{line}");
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Runs `rackproof-agent os-update ARGS` in-process against an [`OsUpdateEnv`] (simulation).
/// The command must name the agent binary (any path ending in `rackproof-agent`) and the first
/// argument must be `os-update`; everything after it is parsed exactly as the binary would.
#[derive(Debug, Clone)]
pub struct InProcessRunner {
    env: OsUpdateEnv,
    clock: Clock,
}

impl InProcessRunner {
    /// Runs against `env`, timing runs on `clock`.
    pub fn new(env: OsUpdateEnv, clock: Clock) -> Self {
        Self { env, clock }
    }
}

/// The binary's name.
pub const AGENT_BINARY: &str = "rackproof-agent";

#[async_trait::async_trait]
impl OsUpdateRunner for InProcessRunner {
    async fn run(&self, invocation: &OsUpdateInvocation) -> Result<OsUpdateOutcome, RunError> {
        let is_agent = std::path::Path::new(&invocation.command)
            .file_name()
            .is_some_and(|n| n == AGENT_BINARY);
        let Some(("os-update", rest)) = invocation
            .args
            .split_first()
            .map(|(first, rest)| (first.as_str(), rest))
            .filter(|_| is_agent)
        else {
            return Err(RunError::Unsupported {
                command: invocation.command.clone(),
                args: invocation.args.clone(),
            });
        };
        let mut output = Vec::new();
        let run = super::run(rest, &self.env, &mut output);
        let exit = self
            .clock
            .timeout(invocation.timeout, run)
            .await
            .map_err(|_| RunError::TimedOut {
                command: invocation.command.clone(),
                after: invocation.timeout,
            })?;
        Ok(OsUpdateOutcome {
            exit,
            output: tail(&String::from_utf8_lossy(&output)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation(command: &str, args: &[&str]) -> OsUpdateInvocation {
        OsUpdateInvocation {
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            timeout: Duration::from_secs(5),
            attempt: 1,
            node: "node-1".into(),
        }
    }

    #[tokio::test]
    async fn the_subprocess_runner_reports_exit_codes_output_and_spawn_failures() {
        let runner = SubprocessRunner::new(Clock::wall());
        let outcome = runner
            .run(&invocation(
                "sh",
                &["-c", "echo network problems >&2; exit 3"],
            ))
            .await
            .unwrap();
        assert_eq!(outcome.exit, OsUpdateExit::NetworkProblem);
        assert!(
            outcome.output.contains("network problems"),
            "{}",
            outcome.output
        );
        let outcome = runner
            .run(&invocation(
                "sh",
                &["-c", "echo $RACKPROOF_OS_UPDATE_ATTEMPT $RACKPROOF_NODE"],
            ))
            .await
            .unwrap();
        assert_eq!(
            (outcome.exit, outcome.output.trim()),
            (OsUpdateExit::Success, "1 node-1")
        );
        assert!(matches!(
            runner.run(&invocation("/nonexistent/update", &[])).await,
            Err(RunError::Spawn { .. })
        ));
        let mut slow = invocation("sleep", &["5"]);
        slow.timeout = Duration::from_millis(100);
        assert!(matches!(
            runner.run(&slow).await,
            Err(RunError::TimedOut { .. })
        ));
    }

    #[tokio::test]
    async fn the_in_process_runner_runs_only_the_agents_os_update() {
        let runner = InProcessRunner::new(OsUpdateEnv::default(), Clock::wall());
        let err = runner
            .run(&invocation("/usr/bin/other", &["os-update"]))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Unsupported { .. }));
        let outcome = runner
            .run(&invocation(
                "/opt/bin/rackproof-agent",
                &["os-update", "--bogus"],
            ))
            .await
            .unwrap();
        assert_eq!(outcome.exit, OsUpdateExit::InvalidArguments);
        assert!(
            outcome.output.contains("invalid arguments"),
            "{}",
            outcome.output
        );
    }
}
