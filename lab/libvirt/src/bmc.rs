//! sushy-tools (Redfish) and VirtualBMC (IPMI) as BMCs in front of a libvirt domain, for users of
//! the metal3/Ironic emulation stack. Both run as subprocesses bound to 127.0.0.1 with their
//! config, state and logs in a directory of the caller's; each is killed (its whole process
//! group) on `stop` or drop.
//!
//! Both are Python tools from PyPI (sushy-tools 2.2.0, virtualbmc 3.3.0) that need Debian's
//! `python3-libvirt`, so they live in a venv made with `--system-site-packages`
//! (`ci/start-libvirtd` creates it). Caveats: sushy-tools is limited to the one domain by its
//! `SUSHY_EMULATOR_ALLOWED_INSTANCES`; it advertises no `PowerCycle`, stores a `Once` boot override
//! as `Continuous` (libvirt has no one-time boot device), and answers 500 to a `Pxe` override
//! because the lab's NIC is QEMU's user network on the command line, not a libvirt `<interface>`
//! (rackproof-redfish's client drives it otherwise unchanged: tests/libvirt.rs); VirtualBMC
//! answers `power cycle` with an error (it has no such action); both get a free port by binding port 0 and releasing it, so another process could
//! take it in between (start fails then, and says so).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rackproof_clock::Clock;
use tokio::process::{Child, Command};

const READY_TIMEOUT: Duration = Duration::from_secs(30);
const READY_POLL: Duration = Duration::from_millis(100);
/// VirtualBMC's lab credentials (its defaults): never logged.
const VBMC_USER: &str = "admin";
const VBMC_PASSWORD: &str = "password";

/// Starting or driving a BMC tool failed.
#[derive(Debug, thiserror::Error)]
pub enum BmcError {
    #[error(
        "find {tool} at {path} (create the venv with `ci/start-libvirtd`, or set RACKPROOF_LIBVIRT_BMC_VENV)"
    )]
    Missing { tool: &'static str, path: PathBuf },
    #[error("start {tool}")]
    Spawn {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{tool} did not get ready on 127.0.0.1:{port} within {after:?}; its log ends:\n{log}")]
    NotReady {
        tool: &'static str,
        port: u16,
        after: Duration,
        log: String,
    },
    #[error("run `{command}`: {status}: {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("prepare {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the Python BMC tools are installed (a venv's `bin/`).
#[derive(Debug, Clone)]
pub struct BmcTools {
    bin: PathBuf,
}

impl BmcTools {
    /// The venv from `RACKPROOF_LIBVIRT_BMC_VENV`, else `$RACKPROOF_CACHE/libvirt-bmc-venv`, else
    /// `~/.cache/rackproof/libvirt-bmc-venv`; fails if a tool is missing there.
    pub fn find() -> Result<Self, BmcError> {
        let venv = std::env::var_os("RACKPROOF_LIBVIRT_BMC_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let cache = std::env::var_os("RACKPROOF_CACHE")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                            .join(".cache/rackproof")
                    });
                cache.join("libvirt-bmc-venv")
            });
        Self::in_venv(&venv)
    }

    /// The tools of the venv at `venv`; fails if one is missing.
    pub fn in_venv(venv: &Path) -> Result<Self, BmcError> {
        let tools = Self {
            bin: venv.join("bin"),
        };
        for tool in ["sushy-emulator", "vbmcd", "vbmc"] {
            let path = tools.bin.join(tool);
            if !path.is_file() {
                return Err(BmcError::Missing {
                    tool: "sushy-tools/virtualbmc",
                    path,
                });
            }
        }
        Ok(tools)
    }
}

/// How long [`Daemon::kill`] waits for the killed group's members to be gone.
const GROUP_EXIT_WAIT: Duration = Duration::from_secs(5);

/// Whether a process of group `pgid` is still alive (a zombie has exited: only its reaper has
/// yet to collect it).
fn group_has_live_members(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|s| s.parse::<u32>().is_ok());
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces, so split after its ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        is_pid
            && fields.first() != Some(&"Z")
            && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
    })
}

/// A child process in its own process group, killed with the group.
#[derive(Debug)]
struct Daemon {
    tool: &'static str,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn spawn(tool: &'static str, mut command: Command, log: PathBuf) -> Result<Self, BmcError> {
        let file = std::fs::File::create(&log).map_err(|source| BmcError::Io {
            path: log.clone(),
            source,
        })?;
        let err = file.try_clone().map_err(|source| BmcError::Io {
            path: log.clone(),
            source,
        })?;
        command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|source| BmcError::Spawn { tool, source })?;
        if let (Some(record), Some(pid)) = (rackproof_reap::record(), child.id()) {
            record.add_group(pid);
        }
        Ok(Self { tool, child, log })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL to the whole group (the tool and anything it forked), reap the leader, and wait
    /// until no member of the group is left running (a forked child dies on its own schedule after
    /// the signal; its reaper is not us), at most [`GROUP_EXIT_WAIT`].
    async fn kill(&mut self) {
        let group = self.child.id();
        self.kill_group();
        let _ = self.child.wait().await;
        forget(group);
        if let Some(group) = group {
            let clock = Clock::wall();
            let started = clock.instant();
            while group_has_live_members(group) && clock.since(started) < GROUP_EXIT_WAIT {
                clock.sleep(Duration::from_millis(20)).await;
            }
        }
    }

    fn kill_group(&mut self) {
        if let Some(pid) = self.child.id() {
            // `kill` from procps: signalling a group needs no unsafe code this way.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let group = self.child.id();
        if !self.exited() {
            tracing::debug!(tool = self.tool, "killing BMC tool");
            self.kill_group();
        }
        forget(group);
    }
}

/// Takes a stopped tool's group off the process's record of children (`rackproof_reap`).
fn forget(group: Option<u32>) {
    if let (Some(record), Some(pid)) = (rackproof_reap::record(), group) {
        record.remove(pid);
    }
}

/// A free TCP port on 127.0.0.1 (released at once; see the module's caveat).
fn free_tcp_port() -> Result<u16, BmcError> {
    rackproof_std::free_tcp_port().map_err(|source| BmcError::Io {
        path: "127.0.0.1:0".into(),
        source,
    })
}

/// A free UDP port on 127.0.0.1 (released at once).
fn free_udp_port() -> Result<u16, BmcError> {
    rackproof_std::free_udp_port().map_err(|source| BmcError::Io {
        path: "127.0.0.1:0/udp".into(),
        source,
    })
}

fn create_dir(dir: &Path) -> Result<(), BmcError> {
    std::fs::create_dir_all(dir).map_err(|source| BmcError::Io {
        path: dir.to_owned(),
        source,
    })
}

fn python_str(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// sushy-tools' `sushy-emulator` serving Redfish (plain HTTP, no auth) for one libvirt domain.
#[derive(Debug)]
pub struct SushyEmulator {
    daemon: Daemon,
    port: u16,
    uuid: String,
}

impl SushyEmulator {
    /// Starts sushy-emulator on 127.0.0.1 for the domain with `uuid` at `uri`, keeping its config
    /// and log in `dir`, and waits until it accepts connections.
    pub async fn start(
        tools: &BmcTools,
        uri: &str,
        uuid: &str,
        dir: &Path,
        clock: &Clock,
    ) -> Result<Self, BmcError> {
        create_dir(dir)?;
        let port = free_tcp_port()?;
        let config = dir.join("sushy-emulator.conf");
        let text = format!(
            "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {port}\nSUSHY_EMULATOR_LIBVIRT_URI = {}\nSUSHY_EMULATOR_ALLOWED_INSTANCES = [{}]\n",
            python_str(uri),
            python_str(uuid)
        );
        std::fs::write(&config, text).map_err(|source| BmcError::Io {
            path: config.clone(),
            source,
        })?;
        let mut command = Command::from(rackproof_reap::dying_with_parent(
            tools.bin.join("sushy-emulator"),
        ));
        command.arg("--config").arg(&config).args([
            "--interface",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--libvirt-uri",
            uri,
        ]);
        let mut daemon = Daemon::spawn("sushy-emulator", command, dir.join("sushy-emulator.log"))?;
        let ready = async {
            loop {
                if daemon.exited() {
                    return false;
                }
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return true;
                }
                clock.sleep(READY_POLL).await;
            }
        };
        if !matches!(clock.timeout(READY_TIMEOUT, ready).await, Ok(true)) {
            let log = daemon.log_tail();
            daemon.kill().await;
            return Err(BmcError::NotReady {
                tool: "sushy-emulator",
                port,
                after: READY_TIMEOUT,
                log,
            });
        }
        tracing::info!(port, %uuid, "sushy-emulator ready");
        Ok(Self {
            daemon,
            port,
            uuid: uuid.to_owned(),
        })
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process group of the emulator (its PID), until stopped.
    pub fn process_group(&self) -> Option<u32> {
        self.daemon.child.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The Redfish ComputerSystem of the domain: `…/redfish/v1/Systems/UUID`.
    pub fn system_url(&self) -> String {
        format!("{}/redfish/v1/Systems/{}", self.base_url(), self.uuid)
    }

    /// Kills the emulator and waits for it.
    pub async fn stop(mut self) {
        self.daemon.kill().await;
    }
}

/// VirtualBMC: `vbmcd` with one IPMI-over-LAN BMC for a libvirt domain, on 127.0.0.1.
pub struct VirtualBmc {
    daemon: Daemon,
    port: u16,
}

impl std::fmt::Debug for VirtualBmc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualBmc")
            .field("port", &self.port)
            .field("daemon", &self.daemon)
            .finish_non_exhaustive()
    }
}

impl VirtualBmc {
    /// Starts a private `vbmcd` (its own config, control port and state in `dir`), adds a BMC for
    /// `domain` at `uri` on a free UDP port of 127.0.0.1 and starts it.
    pub async fn start(
        tools: &BmcTools,
        uri: &str,
        domain: &str,
        dir: &Path,
        clock: &Clock,
    ) -> Result<Self, BmcError> {
        create_dir(dir)?;
        let state = dir.join("vbmc");
        create_dir(&state)?;
        let control = free_tcp_port()?;
        let port = free_udp_port()?;
        let config = dir.join("virtualbmc.conf");
        let text = format!(
            "[default]\nconfig_dir = {}\npid_file = {}\nserver_port = {control}\n\n[log]\nlogfile = {}\n",
            state.display(),
            dir.join("vbmcd.pid").display(),
            dir.join("vbmcd-internal.log").display()
        );
        std::fs::write(&config, text).map_err(|source| BmcError::Io {
            path: config.clone(),
            source,
        })?;
        let mut command = Command::from(rackproof_reap::dying_with_parent(tools.bin.join("vbmcd")));
        command
            .arg("--foreground")
            .env("VIRTUALBMC_CONFIG", &config);
        let mut daemon = Daemon::spawn("vbmcd", command, dir.join("vbmcd.log"))?;
        let vbmc = |args: Vec<String>| {
            let mut c = Command::new(tools.bin.join("vbmc"));
            c.args(args)
                .env("VIRTUALBMC_CONFIG", &config)
                .kill_on_drop(true);
            c
        };
        // vbmcd answers once its control socket is up; `vbmc list` fails until then.
        let up = async {
            loop {
                if daemon.exited() {
                    return false;
                }
                if vbmc(vec!["list".into()])
                    .output()
                    .await
                    .is_ok_and(|o| o.status.success())
                {
                    return true;
                }
                clock.sleep(READY_POLL).await;
            }
        };
        if !matches!(clock.timeout(READY_TIMEOUT, up).await, Ok(true)) {
            let log = daemon.log_tail();
            daemon.kill().await;
            return Err(BmcError::NotReady {
                tool: "vbmcd",
                port: control,
                after: READY_TIMEOUT,
                log,
            });
        }
        let add = [
            "add",
            domain,
            "--port",
            &port.to_string(),
            "--address",
            "127.0.0.1",
            "--username",
            VBMC_USER,
            "--password",
            VBMC_PASSWORD,
            "--libvirt-uri",
            uri,
        ];
        let steps: [(Vec<String>, String); 2] = [
            (
                add.iter().map(|s| s.to_string()).collect(),
                format!("vbmc add {domain} --port {port}"),
            ),
            (
                vec!["start".into(), domain.into()],
                format!("vbmc start {domain}"),
            ),
        ];
        for (args, shown) in steps {
            let output = vbmc(args)
                .output()
                .await
                .map_err(|source| BmcError::Spawn {
                    tool: "vbmc",
                    source,
                })?;
            if !output.status.success() {
                daemon.kill().await;
                return Err(BmcError::Command {
                    command: shown,
                    status: output.status.to_string(),
                    stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
                });
            }
        }
        let running = async {
            loop {
                let shown = vbmc(vec![
                    "show".into(),
                    domain.into(),
                    "-f".into(),
                    "value".into(),
                    "-c".into(),
                    "Value".into(),
                ])
                .output()
                .await;
                if shown.is_ok_and(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .any(|l| l.trim() == "running")
                }) {
                    return;
                }
                clock.sleep(READY_POLL).await;
            }
        };
        if clock.timeout(READY_TIMEOUT, running).await.is_err() {
            let log = daemon.log_tail();
            daemon.kill().await;
            return Err(BmcError::NotReady {
                tool: "virtualbmc",
                port,
                after: READY_TIMEOUT,
                log,
            });
        }
        tracing::info!(port, %domain, "VirtualBMC ready");
        Ok(Self { daemon, port })
    }

    /// The UDP port of the IPMI endpoint on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process group of vbmcd and its BMC processes (vbmcd's PID), until stopped.
    pub fn process_group(&self) -> Option<u32> {
        self.daemon.child.id()
    }

    /// `ipmitool` arguments addressing this BMC (`-I lanplus -H 127.0.0.1 -p PORT -U … -P …`);
    /// they carry the lab password, so don't log them.
    pub fn ipmitool_args(&self) -> Vec<String> {
        [
            "-I",
            "lanplus",
            "-H",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            VBMC_USER,
            "-P",
            VBMC_PASSWORD,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Kills vbmcd and its BMC processes and waits for them.
    pub async fn stop(mut self) {
        self.daemon.kill().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_name_the_path_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err = BmcTools::in_venv(dir.path()).unwrap_err().to_string();
        assert!(err.contains("sushy-emulator"), "{err}");
        assert!(err.contains("ci/start-libvirtd"), "{err}");
    }

    #[test]
    fn python_strings_are_quoted() {
        assert_eq!(python_str("qemu:///system"), "'qemu:///system'");
        assert_eq!(python_str("a'b\\c"), "'a\\'b\\\\c'");
    }

    #[tokio::test]
    async fn a_tool_that_dies_at_once_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for tool in ["sushy-emulator", "vbmcd", "vbmc"] {
            let path = bin.join(tool);
            std::fs::write(&path, "#!/bin/sh\necho \"$0: cannot start\" >&2\nexit 3\n").unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        let tools = BmcTools::in_venv(dir.path()).unwrap();
        let err = SushyEmulator::start(
            &tools,
            "qemu:///system",
            "b6d8b8f6-ed73-4160-b112-1c23e55782ce",
            &dir.path().join("s"),
            &Clock::wall(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("sushy-emulator did not get ready"), "{err}");
        assert!(err.contains("cannot start"), "{err}");
        let err = VirtualBmc::start(
            &tools,
            "qemu:///system",
            "rackproof-x",
            &dir.path().join("v"),
            &Clock::wall(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("vbmcd did not get ready"), "{err}");
    }
}
