//! Shared test fixtures: a small in-memory machine and the ipmitool runner.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rackproof_driver::{
    BootControl, BootOverride, DriverError, Power, PowerState, ResetAction, SharedMachine,
};

/// What the test machine went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MachineState {
    pub(crate) power: PowerState,
    pub(crate) boot: BootOverride,
    /// Every reset action performed, in order.
    pub(crate) actions: Vec<ResetAction>,
    /// How many times the machine started booting (power on, cycle, reset).
    pub(crate) boots: u32,
}

/// A machine that changes state at once.
#[derive(Debug)]
pub(crate) struct TestMachine {
    state: Mutex<MachineState>,
    allowed: Vec<ResetAction>,
}

impl TestMachine {
    pub(crate) fn new(power: PowerState) -> Arc<Self> {
        Self::with_resets(power, ResetAction::ALL.to_vec())
    }

    /// A machine that offers only `allowed` reset actions.
    pub(crate) fn with_resets(power: PowerState, allowed: Vec<ResetAction>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(MachineState {
                power,
                boot: BootOverride::default(),
                actions: vec![],
                boots: 0,
            }),
            allowed,
        })
    }

    pub(crate) fn shared(self: &Arc<Self>) -> SharedMachine {
        Arc::clone(self) as SharedMachine
    }

    pub(crate) fn state(&self) -> MachineState {
        self.state.lock().unwrap().clone()
    }
}

#[async_trait]
impl Power for TestMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        Ok(self.state.lock().unwrap().power)
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let mut state = self.state.lock().unwrap();
        match action {
            ResetAction::On => {
                if state.power == PowerState::Off {
                    state.power = PowerState::On;
                    state.boots += 1;
                }
            }
            ResetAction::ForceOff | ResetAction::GracefulShutdown => state.power = PowerState::Off,
            ResetAction::PowerCycle => {
                state.power = PowerState::On;
                state.boots += 1;
            }
            ResetAction::ForceRestart | ResetAction::GracefulRestart | ResetAction::Nmi => {
                if state.power == PowerState::Off {
                    return Err(DriverError::Refused {
                        action: action.to_string(),
                        target: "test machine".to_owned(),
                        reason: "it is powered off".to_owned(),
                    });
                }
                if action != ResetAction::Nmi {
                    state.boots += 1;
                }
            }
        }
        state.actions.push(action);
        Ok(())
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.allowed.clone()
    }
}

#[async_trait]
impl BootControl for TestMachine {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        Ok(self.state.lock().unwrap().boot)
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        self.state.lock().unwrap().boot = setting;
        Ok(())
    }
}

/// Finds `program` in the directories of `path` (a `PATH`-style list), or says how to install
/// the Debian `package` that provides it.
pub(crate) fn find_program(
    program: &str,
    package: &str,
    path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!("{program} is not installed; install it with: apt-get update && apt-get install -y {package}")
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The ipmitool binary; panics with the install command when it is missing.
pub(crate) fn ipmitool_path() -> PathBuf {
    find_program("ipmitool", "ipmitool", std::env::var_os("PATH").as_deref())
        .unwrap_or_else(|message| panic!("{message}"))
}

/// What one ipmitool run printed.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `ipmitool -I lanplus -H 127.0.0.1 -p PORT -U user -P password ARGS…` with a deadline;
/// the child is killed if the deadline passes or the test unwinds.
pub(crate) async fn ipmitool(port: u16, user: &str, password: &str, args: &[&str]) -> Run {
    let mut command = tokio::process::Command::new(ipmitool_path());
    command
        .args([
            "-I",
            "lanplus",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            user,
            "-P",
            password,
        ])
        // One-second timeout and one retry per request: failures are quick, loopback never loses packets.
        .args(["-N", "1", "-R", "1"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("ipmitool starts");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("ipmitool {args:?} did not finish within 60s (killed)"))
        .expect("ipmitool runs");
    Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
