//! The door a run opens for programs outside its process: `run` steps and components given as
//! external commands. The cluster's API is reached over HTTPS on 127.0.0.1 with an admin
//! kubeconfig (the embedded server is served for them; a local control plane is already), and every program starts in the scenario file's directory, in a process group of
//! its own (so a kill reaches its children too), with:
//!
//! - `KUBECONFIG`: the admin kubeconfig;
//! - `RACKPROOF_NAMESPACE`: the namespace of the Machines, the dependents and the pool;
//! - `RACKPROOF_POOL`: the worker pool's name;
//! - `RACKPROOF_IMAGE_SERVER_URL`, `RACKPROOF_CATALOG`, `RACKPROOF_CONTROL_PLANE_VERSION`: what an
//!   orchestrator needs to publish the pool's OSC, and `RACKPROOF_OSC_NAMESPACE`, where
//!   (`kube-system`, or the run's namespace on an existing cluster);
//! - `PATH` with the `rackproof` binary's directory first, so a scenario can name `rackproof`.
//!
//! A `run` step stops virtual time while it runs: it is a blocking task, and tokio's paused clock
//! does not advance while one runs, so the command sees the cluster as it was when the step
//! started, apart from its own changes. Its `timeout` is wall time.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rackproof_apiserver::HttpsServer;

use crate::engine::cluster::api::ApiCluster;
use crate::engine::cluster::api::ClusterError;
use crate::engine::components::group::GroupLeader;
use rackproof_clock::Clock;

use crate::scenario::RunCommand;

/// How often a running step is checked for its exit.
const POLL: Duration = Duration::from_millis(20);
/// Output lines of a step kept for the timeline.
const OUTPUT_LINES: usize = 6;

/// Why the outside door could not be opened, or a program could not be found, run or waited for.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutsideError {
    /// The directory of the run's kubeconfig could not be made.
    #[error("failed to create a directory for the run's kubeconfig")]
    KubeconfigDir(#[source] std::io::Error),
    /// The cluster could not serve or describe itself to outside programs.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A `PATH` entry cannot be joined into one variable.
    #[error("the PATH for outside programs is not valid")]
    Path(#[source] std::env::JoinPathsError),
    /// A command line without a program.
    #[error("a command is empty: give the program and its arguments")]
    EmptyCommand,
    /// The program of a command line is not where the run looks for it.
    #[error(
        "the scenario runs `{command}`, but `{program}` is not found {place}; install it or correct the command"
    )]
    NotFound {
        command: String,
        program: String,
        /// `on PATH`, or `in DIR` for a program named with a `/`.
        place: String,
    },
    /// The file collecting a step's output could not be made (`action`: create, open).
    #[error("failed to {action} the output file of `{command}`")]
    OutputFile {
        action: &'static str,
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The command could not be started.
    #[error("failed to start `{command}` (is it installed and on PATH?)")]
    Start {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The command's process was reaped by someone else before it finished.
    #[error("`{command}` was killed before it finished")]
    KilledEarly { command: String },
    /// The command's end could not be waited for.
    #[error("failed to wait for `{command}`")]
    Wait {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The blocking task watching the command failed.
    #[error("the task running the command failed")]
    Task(#[source] tokio::task::JoinError),
    /// The command ran past its timeout and was killed.
    #[error("`{command}` did not finish within {timeout} and was killed; last output:\n{output}")]
    TimedOut {
        command: String,
        timeout: String,
        output: String,
    },
}

/// The HTTPS endpoint, kubeconfig and environment programs of a run get.
#[derive(Debug)]
pub struct Outside {
    /// The embedded server's listener the kubeconfig names (a local control plane has its own).
    _https: Option<HttpsServer>,
    dir: tempfile::TempDir,
    env: Vec<(String, OsString)>,
    /// The programs' `PATH`, split.
    path: Vec<PathBuf>,
    cwd: PathBuf,
}

/// How a `run` step's command ended.
#[derive(Debug)]
pub(crate) struct StepOutcome {
    /// The exit code; `None` if a signal ended it.
    pub code: Option<i32>,
    /// The last lines of its stdout and stderr, interleaved as written to one file.
    pub output: String,
}

impl Outside {
    /// Serves `server` over HTTPS and writes the admin kubeconfig. `scenario_file`'s directory is
    /// where programs start; `tools_dir` goes first on their `PATH`; `vars` are the
    /// `RACKPROOF_*` variables (name without the prefix, value).
    pub(crate) async fn open(
        cluster: &ApiCluster,
        scenario_file: &Path,
        tools_dir: Option<&Path>,
        vars: &[(&str, &str)],
    ) -> Result<Self, OutsideError> {
        let dir = rackproof_reap::owned_tempdir("rackproof-outside-")
            .map_err(OutsideError::KubeconfigDir)?;
        let (kubeconfig, https) = cluster
            .outside_kubeconfig(dir.path())
            .await
            .map_err(OutsideError::Cluster)?;
        let mut env = vec![("KUBECONFIG".to_owned(), kubeconfig.into_os_string())];
        env.extend(
            vars.iter()
                .map(|(name, value)| (format!("RACKPROOF_{name}"), OsString::from(value))),
        );
        let mut path = tools_dir.map(|d| vec![d.to_owned()]).unwrap_or_default();
        path.extend(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        let joined = std::env::join_paths(&path).map_err(OutsideError::Path)?;
        env.push(("PATH".to_owned(), joined));
        let cwd = std::path::absolute(scenario_file)
            .ok()
            .and_then(|file| file.parent().map(Path::to_owned))
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(Self {
            _https: https,
            dir,
            env,
            path,
            cwd,
        })
    }

    /// Checks that `argv` names a program that can be found: on the programs' `PATH`, or, with a
    /// `/` in it, relative to the scenario's directory.
    pub(crate) fn check(&self, argv: &[String]) -> Result<(), OutsideError> {
        let program = argv.first().ok_or(OutsideError::EmptyCommand)?;
        let found = if program.contains('/') {
            self.cwd.join(program).is_file()
        } else {
            self.path.iter().any(|dir| dir.join(program).is_file())
        };
        if found {
            return Ok(());
        }
        let place = if program.contains('/') {
            format!("in {}", self.cwd.display())
        } else {
            "on PATH".to_owned()
        };
        Err(OutsideError::NotFound {
            command: argv.join(" "),
            program: program.clone(),
            place,
        })
    }

    /// The command line `argv` with the run's environment, working directory and a process group
    /// of its own, killed by the kernel when the thread that starts it ends (`setpriv
    /// --pdeathsig`, see `rackproof_reap`); stdin is closed.
    pub(crate) fn command(&self, argv: &[String]) -> Result<Command, OutsideError> {
        let (program, args) = argv.split_first().ok_or(OutsideError::EmptyCommand)?;
        // Under a parent-death signal: a run killed outright takes its programs with it.
        let mut command = rackproof_reap::dying_with_parent(program);
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .process_group(0);
        Ok(command)
    }

    /// Runs a `run` step's command to its end, killing its process group after `timeout` of wall
    /// time. Virtual time stands still meanwhile (see the module docs).
    pub(crate) async fn run_step(&self, step: &RunCommand) -> Result<StepOutcome, OutsideError> {
        let shown = step.command.join(" ");
        let mut command = self.command(&step.command)?;
        let output_file = |action: &'static str| {
            let command = shown.clone();
            move |source| OutsideError::OutputFile {
                action,
                command,
                source,
            }
        };
        let log =
            tempfile::NamedTempFile::new_in(self.dir.path()).map_err(output_file("create"))?;
        let (out, err) = match (log.reopen(), log.reopen()) {
            (Ok(out), Ok(err)) => (out, err),
            (Err(e), _) | (_, Err(e)) => return Err(output_file("open")(e)),
        };
        command.stdout(out).stderr(err);
        let timeout = step.timeout.get();
        let leader = GroupLeader::spawn(command).map_err(|source| OutsideError::Start {
            command: shown.clone(),
            source,
        })?;
        let leader = Arc::new(leader);
        // Cancelling the step (Ctrl-C, SIGTERM, a failed run) drops this guard: the group dies.
        let _guard = KillGroupOnDrop(leader.clone());
        let waited =
            tokio::task::spawn_blocking(move || -> Result<Option<ExitStatus>, OutsideError> {
                let wall = Clock::wall();
                let deadline = wall.now() + timeout;
                loop {
                    match leader.try_finish() {
                        Ok(Some(status)) => return Ok(Some(status)),
                        Ok(None) if leader.id().is_none() => {
                            return Err(OutsideError::KilledEarly { command: shown });
                        }
                        Ok(None) if wall.now() >= deadline => {
                            leader.kill();
                            return Ok(None);
                        }
                        Ok(None) => std::thread::sleep(POLL),
                        Err(source) => {
                            leader.kill();
                            return Err(OutsideError::Wait {
                                command: shown,
                                source,
                            });
                        }
                    }
                }
            })
            .await
            .map_err(OutsideError::Task)??;
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let output = lines[lines.len().saturating_sub(OUTPUT_LINES)..].join("\n");
        match waited {
            Some(status) => Ok(StepOutcome {
                code: status.code(),
                output,
            }),
            None => Err(OutsideError::TimedOut {
                command: step.command.join(" "),
                timeout: step.timeout.to_string(),
                output,
            }),
        }
    }
}

/// Kills a `run` step's group when the step's future is dropped before the command ended.
#[derive(Debug)]
struct KillGroupOnDrop(Arc<GroupLeader>);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        self.0.kill_group();
    }
}
