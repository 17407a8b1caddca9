//! What a run leaves running when it is stopped: the built `rackproof` binary, stopped by a
//! signal while a `run` step's command (and what that command started) still runs, and the next
//! run's sweep of what a run killed outright left behind.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal};

const SCENARIO: &str = r#"lab: { nodes: 1 }
images:
  - version: "1.0.0"
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.34.2"
steps:
  - run:
      command: [sh, -c, 'sleep 300 & echo $! > started.fifo; wait']
      timeout: 10m
"#;

/// A scenario whose watchdog is an outside program, `sleep 300` (its pid written first), while
/// a step waits.
const EXTERNAL_SCENARIO: &str = r#"lab: { nodes: 1 }
images:
  - version: "1.0.0"
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.34.2"
components:
  watchdog: { command: [sh, -c, 'echo $$ > started.fifo; exec sleep 300'] }
steps:
  - sleep: 10m
"#;

/// A scenario with nothing to run.
const QUIET_SCENARIO: &str = r#"lab: { nodes: 1 }
images:
  - version: "1.0.0"
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.34.2"
"#;

/// Whether `pid` ends (or has ended) within `limit`: waits for its pidfd to become readable, the
/// kernel's event for a process's end.
fn ends_within(pid: i32, limit: Duration) -> bool {
    rackproof_reap::ends_within(pid.unsigned_abs(), limit)
}

/// The pid the step's command writes into the FIFO (blocks until it does; `None` after 120 s).
fn started_pid(fifo: &Path) -> Option<i32> {
    let fifo = fifo.to_owned();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let text = std::fs::read_to_string(fifo).unwrap_or_default();
        let _ = sender.send(text.trim().parse::<i32>().ok());
    });
    receiver
        .recv_timeout(Duration::from_secs(120))
        .ok()
        .flatten()
}

/// `rackproof run FILE` with its temporary directory (and so its record of children) in `tmp`.
fn rackproof_run(file: &Path, tmp: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rackproof"));
    command
        .arg("run")
        .arg(file)
        .arg("--artifacts")
        .arg(tmp.join("runs"))
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Makes the FIFO `started.fifo` in `dir` (coreutils' mkfifo).
fn make_fifo(dir: &Path) -> std::path::PathBuf {
    let fifo = dir.join("started.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo (coreutils) failed");
    fifo
}

#[test]
fn an_outside_component_dies_with_a_sigkilled_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("external.yaml");
    std::fs::write(&scenario, EXTERNAL_SCENARIO).unwrap();
    let fifo = make_fifo(dir.path());
    let mut killed = rackproof_run(&scenario, dir.path()).spawn().unwrap();
    let Some(component) = started_pid(&fifo) else {
        let _ = killed.kill();
        let mut stderr = String::new();
        let _ = killed.stderr.take().unwrap().read_to_string(&mut stderr);
        let _ = killed.wait();
        panic!("the outside watchdog never started; stderr:\n{stderr}");
    };
    killed.kill().unwrap();
    killed.wait().unwrap();
    let died = ends_within(component, Duration::from_secs(10));
    if !died {
        let _ = rustix::process::kill_process(Pid::from_raw(component).unwrap(), Signal::KILL);
    }
    assert!(
        died,
        "the outside watchdog {component} outlived the run killed outright"
    );
}

#[test]
fn what_a_sigkilled_run_left_running_is_swept_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    // The step's shell dies with the run (parent-death signal); the `sleep` it started in its
    // group outlives it, for the next run's sweep.
    let scenario = dir.path().join("leader.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let quiet = dir.path().join("quiet.yaml");
    std::fs::write(&quiet, QUIET_SCENARIO).unwrap();
    let fifo = make_fifo(dir.path());
    let mut killed = rackproof_run(&scenario, dir.path()).spawn().unwrap();
    let Some(sleep) = started_pid(&fifo) else {
        let _ = killed.kill();
        let _ = killed.wait();
        panic!("the run step never started its command");
    };
    killed.kill().unwrap();
    killed.wait().unwrap();
    let outlived = !ends_within(sleep, Duration::from_millis(200));
    // The killed run's directory for outside programs holds the admin kubeconfig (a token).
    let outside_dirs_left = outside_dirs(dir.path());
    let next = rackproof_run(&quiet, dir.path()).output().unwrap();
    let swept = ends_within(sleep, Duration::from_secs(10));
    let outside_dirs_swept = outside_dirs(dir.path());
    if !swept {
        let _ = rustix::process::kill_process(Pid::from_raw(sleep).unwrap(), Signal::KILL);
    }
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert!(
        outlived,
        "the step's command died with the harness; nothing was left to sweep"
    );
    assert!(
        swept,
        "the next run did not sweep the left-over `sleep` {sleep}; stderr:\n{stderr}"
    );
    assert_eq!(
        outside_dirs_left.len(),
        1,
        "the killed run made no directory for its programs"
    );
    assert!(
        outside_dirs_swept.is_empty(),
        "the next run left the killed run's directories: {outside_dirs_swept:?}"
    );
}

/// The directories for outside programs (`rackproof-outside-*`) in `tmp`.
fn outside_dirs(tmp: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("rackproof-outside-")
        })
        .map(|e| e.path())
        .collect()
}

#[test]
fn sigterm_stops_the_run_and_kills_its_run_steps_groups_and_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("term.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let fifo = make_fifo(dir.path());
    let mut harness = Command::new(env!("CARGO_BIN_EXE_rackproof"))
        .arg("run")
        .arg(&scenario)
        .arg("--artifacts")
        .arg(dir.path().join("runs"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let harness_pid = Pid::from_raw(i32::try_from(harness.id()).unwrap()).unwrap();
    let Some(sleep) = started_pid(&fifo) else {
        let _ = harness.kill();
        let mut stderr = String::new();
        let _ = harness.stderr.take().unwrap().read_to_string(&mut stderr);
        let _ = harness.wait();
        panic!("the run step never started its command; harness stderr:\n{stderr}");
    };
    rustix::process::kill_process(harness_pid, Signal::TERM).unwrap();
    let status = harness.wait().unwrap();
    let sleep_ended = ends_within(sleep, Duration::from_secs(10));
    if !sleep_ended {
        let _ = rustix::process::kill_process(Pid::from_raw(sleep).unwrap(), Signal::KILL);
    }
    let mut stderr = String::new();
    let _ = harness.stderr.take().unwrap().read_to_string(&mut stderr);
    assert!(
        sleep_ended,
        "the run step's `sleep` (pid {sleep}) outlived the harness; stderr:\n{stderr}"
    );
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
}
