//! Debian's ipmitool against an IPMI server on 127.0.0.1: the referee of the IPMI emulators and of
//! `bmc serve`. A test that needs it fails with the install command when it is missing.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Finds `program` in the directories of `path` (a `PATH`-style list), or says how to install
/// the Debian `package` that provides it.
pub fn find_program(program: &str, package: &str, path: Option<&OsStr>) -> Result<PathBuf, String> {
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "{program} is not installed; install it with: apt-get update && apt-get install -y {package}"
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The ipmitool binary on `PATH`; panics with the install command when it is missing.
pub fn ipmitool_path() -> PathBuf {
    find_program("ipmitool", "ipmitool", std::env::var_os("PATH").as_deref())
        .unwrap_or_else(|message| panic!("{message}"))
}

/// `ipmitool -I lanplus -H 127.0.0.1 -p PORT -U USER -E`: the password goes in the environment
/// (`IPMI_PASSWORD`), never on the command line.
#[derive(Debug, Clone)]
pub struct Ipmitool {
    port: u16,
    user: String,
    password: String,
    request_timeout_s: u32,
}

/// What one ipmitool run printed.
#[derive(Debug)]
pub struct IpmitoolRun {
    /// Whether it exited 0.
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ipmitool {
    /// ipmitool for the server on `127.0.0.1:port`, as `user` with `password`, with a one-second
    /// timeout and one retry per request: failures are quick, loopback never loses packets.
    pub fn lanplus(port: u16, user: &str, password: &str) -> Self {
        Self {
            port,
            user: user.to_owned(),
            password: password.to_owned(),
            request_timeout_s: 1,
        }
    }

    /// Waits `seconds` for each answer (`-N`), for a server that may be slow to answer (a BMC in
    /// front of a QEMU that is starting, on a loaded machine); still one retry, since a
    /// retransmission would repeat the command.
    pub fn request_timeout(mut self, seconds: u32) -> Self {
        self.request_timeout_s = seconds;
        self
    }

    /// Runs ipmitool with `args`; the child is killed if the run outlasts ten request timeouts
    /// (at least a minute) or the test unwinds.
    pub async fn run(&self, args: &[&str]) -> IpmitoolRun {
        let mut command = tokio::process::Command::new(ipmitool_path());
        command
            .args([
                "-I",
                "lanplus",
                "-H",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
            ])
            .args(["-U", &self.user, "-E"])
            .env("IPMI_PASSWORD", &self.password)
            .args(["-N", &self.request_timeout_s.to_string(), "-R", "1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command.spawn().expect("ipmitool starts");
        let deadline = Duration::from_secs(60.max(10 * u64::from(self.request_timeout_s)));
        let output = tokio::time::timeout(deadline, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "ipmitool {args:?} did not finish within {}s (killed)",
                    deadline.as_secs()
                )
            })
            .expect("ipmitool runs");
        IpmitoolRun {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// What ipmitool with `args` printed; panics with its stderr if it failed.
    pub async fn stdout(&self, args: &[&str]) -> String {
        let run = self.run(args).await;
        assert!(run.success, "ipmitool {args:?} failed: {}", run.stderr);
        run.stdout
    }
}
