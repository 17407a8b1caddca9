//! `rackproof lab bmc serve`: BMC emulators in front of simulated or QEMU machines, so the same
//! BMC clients, inventory and commands that drive a rack drive them.
//!
//! Machines are [`ServeMachine`]s: a [`SimMachine`], or a [`QemuMachine`] (for instance from
//! [`qemu_nodes`], a node set booting the base disk of `ci/build-images`). For each, in `dir`:
//! 1. a fresh random password, written with the user name to `NODE.cred` (mode 0600, the
//!    [`CredentialsRef::File`] format);
//! 2. a Redfish emulator over HTTPS (its CA in `NODE-redfish-ca.pem`) and/or an IPMI emulator,
//!    each on an ephemeral port of `bind`;
//! 3. the machine's console appended to `NODE.console.log` (a QEMU node's serial console, from
//!    the first line of its first power-on);
//!
//! and an inventory per protocol served (`inventory-redfish.yaml`, `inventory-ipmi.yaml`) with
//! every node, its BMC endpoint, credentials file and console file.
//!
//! QEMU nodes are a rack a scenario can run on (backend `physical`), when
//! [`ServeOptions::ssh_host_key`] says which host key their images present: then a client key
//! pair is generated as `ssh_ed25519` in `dir`, every QEMU node authorizes it (through fw_cfg, as
//! an operator's key would be installed on a rack), each node's inventory entry says how to reach
//! it over SSH (its forwarded port on 127.0.0.1, user root, the key, the pinned host key), and the
//! inventory says the nodes reach this machine at `10.0.2.2` (the host on QEMU's user network),
//! with the run's servers listening on 127.0.0.1. [`BmcServer::shutdown`]
//! stops the emulators and console writers and quits every QEMU process (QMP `quit`, then
//! SIGKILL); dropping the server stops the emulators and console writers, and a QEMU machine is
//! SIGKILLed when its last handle goes. The files in `dir` stay (they are the user's to remove).

use std::fmt;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use rackproof_clock::Clock;
use rackproof_driver::{DriverError, SharedMachine};
use rackproof_ipmi::{BmcConfig, IpmiEmulator};
use rackproof_qemu::{Images, QemuConfig, QemuError, QemuMachine};
use rackproof_redfish::{Emulator, EmulatorConfig, RunningEmulator};
use rand::Rng as _;
use tokio::task::AbortHandle;

use crate::bmc::BmcCredentials;
use crate::console::ConsoleSource;
use crate::resource::{
    BmcDescription, BmcKind, ConsoleDescription, CredentialsRef, HarnessAddress, Inventory,
    NodeDescription, SshDescription,
};
use crate::sim::SimMachine;

/// Which emulators to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeKind {
    Redfish,
    Ipmi,
    Both,
}

impl ServeKind {
    fn redfish(self) -> bool {
        matches!(self, Self::Redfish | Self::Both)
    }

    fn ipmi(self) -> bool {
        matches!(self, Self::Ipmi | Self::Both)
    }
}

/// A machine the emulators can front.
#[derive(Debug, Clone)]
pub enum ServeMachine {
    Sim(SimMachine),
    Qemu(Arc<QemuMachine>),
}

impl From<SimMachine> for ServeMachine {
    fn from(machine: SimMachine) -> Self {
        Self::Sim(machine)
    }
}

impl From<QemuMachine> for ServeMachine {
    fn from(machine: QemuMachine) -> Self {
        Self::Qemu(Arc::new(machine))
    }
}

impl From<Arc<QemuMachine>> for ServeMachine {
    fn from(machine: Arc<QemuMachine>) -> Self {
        Self::Qemu(machine)
    }
}

impl ServeMachine {
    pub fn name(&self) -> &str {
        match self {
            Self::Sim(m) => m.name(),
            Self::Qemu(m) => m.name(),
        }
    }

    fn shared(&self) -> SharedMachine {
        match self {
            Self::Sim(m) => Arc::new(m.clone()),
            Self::Qemu(m) => m.clone(),
        }
    }

    fn spawn_console_writer(&self, path: PathBuf) -> AbortHandle {
        match self {
            Self::Sim(m) => spawn_console_writer(m, path),
            Self::Qemu(m) => spawn_qemu_console_writer(m.console(), path),
        }
    }
}

/// A QEMU node set could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum QemuNodesError {
    #[error(transparent)]
    Images(#[from] rackproof_qemu::images::ImagesError),
    #[error(transparent)]
    Qemu(#[from] QemuError),
    #[error("read the images' SSH host key {}", path.display())]
    HostKeyRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the images' SSH host key {}", path.display())]
    HostKey {
        path: PathBuf,
        #[source]
        source: rackproof_ssh::DropbearKeyError,
    },
}

/// The SSH host key every node booting `images` presents (`TYPE BASE64`), for
/// [`ServeOptions::ssh_host_key`].
pub fn images_host_key(images: &Images) -> Result<String, QemuNodesError> {
    let path = images.ssh_host_key()?;
    let file = std::fs::read(&path).map_err(|source| QemuNodesError::HostKeyRead {
        path: path.clone(),
        source,
    })?;
    let pin = rackproof_ssh::dropbear_host_key_pin(&file)
        .map_err(|source| QemuNodesError::HostKey { path, source })?;
    Ok(pin.to_string())
}

/// `count` QEMU nodes `node-1` … `node-N`, each with its own copy of the base disk of `images`
/// (`rackproof_qemu::images::BASE_VERSION`), powered off.
pub fn qemu_nodes(
    images: &Images,
    count: usize,
    clock: &Clock,
) -> Result<Vec<QemuMachine>, QemuNodesError> {
    let disk = images.disk(rackproof_qemu::images::BASE_VERSION)?;
    let mut nodes = Vec::with_capacity(count);
    for i in 1..=count {
        nodes.push(QemuMachine::create(
            QemuConfig::new(&format!("node-{i}"), &disk),
            clock.clone(),
        )?);
    }
    Ok(nodes)
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub kind: ServeKind,
    /// The address every emulator listens on (ports are chosen by the system).
    pub bind: IpAddr,
    /// Where credentials, CA, console and inventory files go (created if missing).
    pub dir: PathBuf,
    /// The BMC user name (IPMI allows at most 16 bytes).
    pub username: String,
    /// The host key QEMU nodes present (`TYPE BASE64`, from their images'
    /// `keys/ssh_host_ed25519_key`); `Some` makes them reachable over SSH (see the module docs).
    pub ssh_host_key: Option<String>,
}

/// The client key file `bmc serve` generates for SSH into its QEMU nodes.
pub const SSH_KEY_FILE: &str = "ssh_ed25519";

/// `bmc serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no machines to serve")]
    NoMachines,
    #[error("machine {node}: {problem}")]
    BadNode { node: String, problem: String },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("machine {node}: set up the redfish emulator")]
    RedfishConfig {
        node: String,
        #[source]
        source: rackproof_redfish::ConfigError,
    },
    #[error("machine {node}: start the redfish emulator on {bind}")]
    Redfish {
        node: String,
        bind: IpAddr,
        #[source]
        source: rackproof_redfish::ServeError,
    },
    #[error("machine {node}: ipmi credentials")]
    IpmiCredentials {
        node: String,
        #[source]
        source: rackproof_ipmi::CredentialsError,
    },
    #[error("machine {node}: start the ipmi emulator")]
    Ipmi {
        node: String,
        #[source]
        source: rackproof_ipmi::EmulatorError,
    },
    #[error("serialize the inventory")]
    Serialize(#[source] serde_saphyr::ser::Error),
    #[error("make the SSH client key")]
    SshKey(#[source] rackproof_ssh::KeygenError),
    #[error("machine {node}: hand it the SSH key")]
    SshIdentity {
        node: String,
        #[source]
        source: DriverError,
    },
}

/// One machine behind its emulators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedNode {
    pub name: String,
    /// The Redfish base URL.
    pub redfish: Option<String>,
    /// The CA that signed the Redfish emulator's certificate.
    pub redfish_ca_file: Option<PathBuf>,
    pub ipmi: Option<SocketAddr>,
    pub credentials_file: PathBuf,
    pub console_file: PathBuf,
    /// How to reach the node over SSH (QEMU nodes when [`ServeOptions::ssh_host_key`] is set).
    pub ssh: Option<SshDescription>,
}

/// Running emulators; dropping this stops them.
#[derive(Debug)]
pub struct BmcServer {
    pub nodes: Vec<ServedNode>,
    /// The inventories written, by protocol.
    pub redfish_inventory: Option<PathBuf>,
    pub ipmi_inventory: Option<PathBuf>,
    redfish: Vec<(String, Emulator, RunningEmulator)>,
    ipmi: Vec<IpmiEmulator>,
    console_writers: Vec<AbortHandle>,
    qemu: Vec<Arc<QemuMachine>>,
}

impl BmcServer {
    /// The Redfish emulator of `node`, to add fault rules or read its journal.
    pub fn redfish_emulator(&self, node: &str) -> Option<&Emulator> {
        self.redfish
            .iter()
            .find(|(name, _, _)| name == node)
            .map(|(_, e, _)| e)
    }

    /// The QEMU machine served as `node`.
    pub fn qemu_machine(&self, node: &str) -> Option<&Arc<QemuMachine>> {
        self.qemu.iter().find(|m| m.name() == node)
    }

    /// Stops the emulators and console writers, then quits every QEMU process (QMP `quit`,
    /// SIGKILL if it lingers), so nothing this server started keeps running.
    pub async fn shutdown(mut self) -> Result<(), DriverError> {
        for (_, _, running) in self.redfish.drain(..) {
            running.shutdown();
        }
        self.ipmi.clear();
        for writer in self.console_writers.drain(..) {
            writer.abort();
        }
        let mut first_error = None;
        for machine in self.qemu.drain(..) {
            if let Err(error) = machine.shutdown().await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for BmcServer {
    fn drop(&mut self) {
        for writer in &self.console_writers {
            writer.abort();
        }
    }
}

impl fmt::Display for BmcServer {
    /// What `bmc serve` prints: one block per node, then the inventories.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for node in &self.nodes {
            writeln!(f, "{}:", node.name)?;
            if let Some(url) = &node.redfish {
                writeln!(f, "  redfish:     {url}")?;
            }
            if let Some(ca) = &node.redfish_ca_file {
                writeln!(f, "  redfish CA:  {}", ca.display())?;
            }
            if let Some(addr) = &node.ipmi {
                writeln!(
                    f,
                    "  ipmi:        {addr} (ipmitool -I lanplus -H {} -p {})",
                    addr.ip(),
                    addr.port()
                )?;
            }
            writeln!(f, "  credentials: {}", node.credentials_file.display())?;
            writeln!(f, "  console:     {}", node.console_file.display())?;
            if let Some(ssh) = &node.ssh {
                writeln!(
                    f,
                    "  ssh:         ssh -i {} -p {} {}@{}",
                    ssh.key_path.display(),
                    ssh.port,
                    ssh.user,
                    ssh.host
                )?;
            }
        }
        for path in [&self.redfish_inventory, &self.ipmi_inventory]
            .into_iter()
            .flatten()
        {
            writeln!(f, "inventory: {}", path.display())?;
        }
        Ok(())
    }
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), ServeError> {
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)?;
        file.write_all(text.as_bytes())?;
        file.flush()
    };
    write().map_err(|source| ServeError::Write {
        path: path.to_owned(),
        source,
    })
}

fn random_password() -> String {
    rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect()
}

/// Starts the emulators (see the module docs).
pub async fn bmc_serve<M: Into<ServeMachine>>(
    machines: Vec<M>,
    options: &ServeOptions,
    clock: Clock,
) -> Result<BmcServer, ServeError> {
    let machines: Vec<ServeMachine> = machines.into_iter().map(Into::into).collect();
    if machines.is_empty() {
        return Err(ServeError::NoMachines);
    }
    std::fs::create_dir_all(&options.dir).map_err(|source| ServeError::Write {
        path: options.dir.clone(),
        source,
    })?;
    let dir = std::path::absolute(&options.dir).map_err(|source| ServeError::Write {
        path: options.dir.clone(),
        source,
    })?;
    let mut server = BmcServer {
        nodes: Vec::new(),
        redfish_inventory: None,
        ipmi_inventory: None,
        redfish: Vec::new(),
        ipmi: Vec::new(),
        console_writers: Vec::new(),
        qemu: machines
            .iter()
            .filter_map(|m| match m {
                ServeMachine::Qemu(q) => Some(q.clone()),
                ServeMachine::Sim(_) => None,
            })
            .collect(),
    };
    let ssh = match (&options.ssh_host_key, server.qemu.is_empty()) {
        (Some(host_key), false) => {
            let key_path = dir.join(SSH_KEY_FILE);
            let public_line = rackproof_ssh::generate_client_key(&key_path, "rackproof-lab")
                .map_err(ServeError::SshKey)?;
            Some((key_path, public_line, host_key.clone()))
        }
        _ => None,
    };
    let mut redfish_nodes = Vec::new();
    let mut ipmi_nodes = Vec::new();
    for machine in machines {
        let name = machine.name().to_owned();
        let credentials = BmcCredentials::new(options.username.clone(), random_password());
        let credentials_file = dir.join(format!("{name}.cred"));
        let console_file = dir.join(format!("{name}.console.log"));
        let node_ssh = match (&machine, &ssh) {
            (ServeMachine::Qemu(qemu), Some((key_path, public_line, host_key))) => {
                let identity = rackproof_qemu::NodeIdentity {
                    ssh_authorized_key: public_line.clone(),
                    ..rackproof_qemu::NodeIdentity::default()
                };
                qemu.set_identity(&identity)
                    .await
                    .map_err(|source| ServeError::SshIdentity {
                        node: name.clone(),
                        source,
                    })?;
                Some(SshDescription {
                    host: std::net::Ipv4Addr::LOCALHOST.to_string(),
                    port: qemu.ssh_port(),
                    user: "root".to_owned(),
                    key_path: key_path.clone(),
                    host_key: host_key.clone(),
                })
            }
            _ => None,
        };
        let base = NodeDescription {
            name: name.clone(),
            bmc: None,
            console: Some(ConsoleDescription::File {
                path: console_file.clone(),
            }),
            ssh: node_ssh,
            disks: Vec::new(),
        };
        base.validate().map_err(|e| ServeError::BadNode {
            node: name.clone(),
            problem: e.to_string(),
        })?;
        write_file(&credentials_file, &credentials.file_text(), 0o600)?;
        write_file(&console_file, "", 0o644)?;
        server
            .console_writers
            .push(machine.spawn_console_writer(console_file.clone()));
        let shared = machine.shared();
        let bmc = |kind, endpoint: String, ca_path| BmcDescription {
            kind,
            endpoint,
            credentials: CredentialsRef::File {
                path: credentials_file.clone(),
            },
            ca_path,
            insecure_skip_tls_verify: false,
        };
        let mut served = ServedNode {
            name: name.clone(),
            redfish: None,
            redfish_ca_file: None,
            ipmi: None,
            credentials_file: credentials_file.clone(),
            console_file,
            ssh: base.ssh.clone(),
        };
        if options.kind.redfish() {
            let emulator = Emulator::new(EmulatorConfig {
                name: name.clone(),
                ..EmulatorConfig::single(
                    shared.clone(),
                    credentials.username(),
                    credentials.password(),
                    clock.clone(),
                )
            })
            .map_err(|source| ServeError::RedfishConfig {
                node: name.clone(),
                source,
            })?;
            let running = emulator
                .serve_https(SocketAddr::new(options.bind, 0))
                .await
                .map_err(|source| ServeError::Redfish {
                    node: name.clone(),
                    bind: options.bind,
                    source,
                })?;
            let ca_file = dir.join(format!("{name}-redfish-ca.pem"));
            write_file(&ca_file, running.ca_pem().unwrap_or_default(), 0o644)?;
            let url = running.url();
            redfish_nodes.push(NodeDescription {
                bmc: Some(bmc(BmcKind::Redfish, url.clone(), Some(ca_file.clone()))),
                ..base.clone()
            });
            served.redfish = Some(url);
            served.redfish_ca_file = Some(ca_file);
            server.redfish.push((name.clone(), emulator, running));
        }
        if options.kind.ipmi() {
            let ipmi_credentials =
                rackproof_ipmi::Credentials::new(credentials.username(), credentials.password())
                    .map_err(|source| ServeError::IpmiCredentials {
                        node: name.clone(),
                        source,
                    })?;
            let emulator = IpmiEmulator::start_with(
                shared,
                BmcConfig {
                    name: name.clone(),
                    ..BmcConfig::new(ipmi_credentials)
                },
                SocketAddr::new(options.bind, 0),
                clock.clone(),
            )
            .await
            .map_err(|source| ServeError::Ipmi {
                node: name.clone(),
                source,
            })?;
            let addr = emulator.local_addr();
            ipmi_nodes.push(NodeDescription {
                bmc: Some(bmc(BmcKind::Ipmi, addr.to_string(), None)),
                ..base.clone()
            });
            served.ipmi = Some(addr);
            server.ipmi.push(emulator);
        }
        server.nodes.push(served);
    }
    for (nodes, file, slot) in [
        (
            redfish_nodes,
            "inventory-redfish.yaml",
            &mut server.redfish_inventory,
        ),
        (
            ipmi_nodes,
            "inventory-ipmi.yaml",
            &mut server.ipmi_inventory,
        ),
    ] {
        if nodes.is_empty() {
            continue;
        }
        let harness = ssh.as_ref().map(|_| HarnessAddress {
            address: rackproof_qemu::HOST_ALIAS.to_owned(),
            listen: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        });
        let text = serde_saphyr::to_string(&Inventory { harness, nodes })
            .map_err(ServeError::Serialize)?;
        let path = dir.join(file);
        write_file(&path, &text, 0o644)?;
        *slot = Some(path);
    }
    Ok(server)
}

/// Appends every console line of `machine` to `path`, as a console server would.
fn spawn_console_writer(machine: &SimMachine, path: PathBuf) -> AbortHandle {
    let (backlog, receiver) = machine.subscribe();
    let backlog = backlog.into_iter().map(|l| l.text).collect();
    let lines = broadcast_lines(receiver).map(|l| l.text);
    tokio::spawn(append_console(path, backlog, lines)).abort_handle()
}

/// Appends every line of a QEMU node's serial console to `path`: the lines captured so far, then
/// each new one (the live stream starts before the history is read; lines are told apart by index).
fn spawn_qemu_console_writer(console: &rackproof_qemu::Console, path: PathBuf) -> AbortHandle {
    let receiver = console.subscribe();
    let backlog = console.lines();
    let next = backlog.len();
    let lines = broadcast_lines(receiver)
        .filter_map(move |l| std::future::ready((l.index >= next).then_some(l.text)));
    tokio::spawn(append_console(path, backlog, lines)).abort_handle()
}

/// A console's live lines; lines lost to a slow reader are logged and skipped.
fn broadcast_lines<T: Clone + Send + 'static>(
    receiver: tokio::sync::broadcast::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(line) => return Some((line, receiver)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "console lines lost")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// Appends `backlog`, then each of `lines`, to the file at `path` (which exists), flushing each
/// line so readers following the file see it at once.
async fn append_console(
    path: PathBuf,
    backlog: Vec<String>,
    lines: impl futures::Stream<Item = String>,
) {
    use tokio::io::AsyncWriteExt as _;
    let mut file = match tokio::fs::OpenOptions::new().append(true).open(&path).await {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot open the console log");
            return;
        }
    };
    let text: String = backlog.iter().map(|l| format!("{l}\n")).collect();
    if file.write_all(text.as_bytes()).await.is_err() {
        return;
    }
    let mut lines = std::pin::pin!(lines);
    while let Some(line) = lines.next().await {
        if let Err(error) = file.write_all(format!("{line}\n").as_bytes()).await {
            tracing::warn!(path = %path.display(), %error, "console log write failed");
            return;
        }
        let _ = file.flush().await;
    }
}
