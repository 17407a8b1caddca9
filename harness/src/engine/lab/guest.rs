//! The machine under a lab node that boots the node images: a QEMU process of Rackproof's own
//! (backend `qemu`), a libvirt domain (backend `libvirt`, with the `libvirt` cargo feature), or a
//! rack server (backend `physical`). All boot the same images through UEFI and systemd-boot. A
//! guest reads its identity from fw_cfg and sits behind a BMC emulator; a rack server has its own
//! BMC, gets its identity over SSH (`rackproof_lab::physical::deliver_identity`), and its console
//! is read from the file or socket its inventory names. This is what the lab asks of any of them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::{ResetAction, SharedMachine};
use rackproof_lab::physical::{Reservation, StreamConsole};
use rackproof_lab::resource::NodeDescription;
use rackproof_qemu::{Console, NodeIdentity, QemuMachine};
use regex::Regex;

use crate::engine::lab::Lines;

/// Why a node's machine could not do what the lab asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GuestError {
    /// Waiting for a line on Rackproof's own console capture (QEMU, rack) failed.
    #[error(transparent)]
    Console(#[from] rackproof_qemu::ConsoleError),
    /// Waiting for a line on a libvirt domain's console failed.
    #[cfg(feature = "libvirt")]
    #[error(transparent)]
    LibvirtConsole(#[from] rackproof_libvirt::console::ConsoleError),
    /// A console mark of one machine was used on another's console.
    #[cfg(feature = "libvirt")]
    #[error("a console mark of another machine")]
    ForeignMark,
    /// QEMU refused a new identity, a new disk or a link change.
    #[error(transparent)]
    Qemu(#[from] rackproof_driver::DriverError),
    /// A rack server's identity is not handed over through the guest.
    #[error("a rack server's identity is delivered over SSH")]
    RackIdentity,
    /// A rack server's disk is its own.
    #[error("node {node} is a rack server; Rackproof does not rewrite its disk")]
    RackDisk { node: String },
    /// The backend cannot cut or restore this node's network.
    #[error("network partitions of {machines} are not available ({why})")]
    NoPartition {
        machines: &'static str,
        why: &'static str,
    },
    /// A libvirt domain could not be defined or changed.
    #[cfg(feature = "libvirt")]
    #[error(transparent)]
    Libvirt(#[from] libvirt::LibvirtGuestError),
}

/// Which machine a guest lab node runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestKind {
    Qemu,
    Libvirt,
}

/// One node's machine.
#[derive(Debug)]
pub(crate) enum Guest {
    Qemu(Arc<QemuMachine>),
    #[cfg(feature = "libvirt")]
    Libvirt(libvirt::LibvirtGuest),
    Rack(Box<RackServer>),
}

/// A rack server of the inventory, held for the run.
#[derive(Debug)]
pub(crate) struct RackServer {
    /// The client of the server's own BMC.
    pub bmc: SharedMachine,
    /// Its inventory entry.
    pub description: NodeDescription,
    /// Its console lines since the run began (the lines of the boot in progress first).
    console: Console,
    /// Follows the console source (dropping it stops the reader).
    _source: StreamConsole,
    reader: tokio::task::AbortHandle,
    /// The node is this run's until the lab goes.
    _reservation: Reservation,
}

/// The line init prints at the start of each boot of the node OS; a rack server's boots are
/// counted by it (its firmware's output is its vendor's).
const RACK_BOOT_LINE: &str = r"^rackproof-os \S+: init started";

impl RackServer {
    /// Starts copying `source`'s lines (the backlog of the boot in progress, then each new one)
    /// into a console; `log` is where the source's lines are kept (the file it follows).
    pub(crate) fn new(
        description: NodeDescription,
        bmc: SharedMachine,
        source: StreamConsole,
        reservation: Reservation,
        log: &Path,
    ) -> Self {
        use rackproof_lab::console::ConsoleSource as _;
        let console = Console::new(&description.name, log);
        let (backlog, mut live) = source.subscribe();
        let feed = console.clone();
        let reader = tokio::spawn(async move {
            for line in backlog {
                feed.push(line.text);
            }
            loop {
                match live.recv().await {
                    Ok(line) => feed.push(line.text),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "rack console lines lost")
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        })
        .abort_handle();
        Self {
            bmc,
            description,
            console,
            _source: source,
            reader,
            _reservation: reservation,
        }
    }
}

impl Drop for RackServer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A place in a guest's console: waiting "since" it ignores the lines before.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ConsoleMark {
    Own(rackproof_qemu::Mark),
    #[cfg(feature = "libvirt")]
    Libvirt(rackproof_libvirt::console::Mark),
}

/// The console of a node: Rackproof's own capture (QEMU, rack) or libvirt's.
enum Serial<'a> {
    Own(&'a Console),
    #[cfg(feature = "libvirt")]
    Libvirt(&'a rackproof_libvirt::console::SerialConsole),
}

impl Guest {
    /// The machine as the BMC drives it: the machine itself for a guest (its emulator fronts
    /// it), the BMC client for a rack server.
    pub(crate) fn power(&self) -> SharedMachine {
        match self {
            Self::Qemu(machine) => machine.clone(),
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => guest.machine.clone(),
            Self::Rack(server) => server.bmc.clone(),
        }
    }

    fn serial(&self) -> Serial<'_> {
        match self {
            Self::Qemu(machine) => Serial::Own(machine.console()),
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => Serial::Libvirt(guest.machine.console()),
            Self::Rack(server) => Serial::Own(&server.console),
        }
    }

    /// Every console line so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        match self.serial() {
            Serial::Own(console) => console.lines(),
            #[cfg(feature = "libvirt")]
            Serial::Libvirt(console) => console.lines(),
        }
    }

    /// The console's current end.
    pub(crate) fn mark(&self) -> ConsoleMark {
        match self.serial() {
            Serial::Own(console) => ConsoleMark::Own(console.mark()),
            #[cfg(feature = "libvirt")]
            Serial::Libvirt(console) => ConsoleMark::Libvirt(console.mark()),
        }
    }

    /// Waits for a console line after `mark` matching `pattern`, at most `timeout`.
    pub(crate) async fn wait_line_since(
        &self,
        clock: &Clock,
        mark: ConsoleMark,
        pattern: &Regex,
        timeout: Duration,
    ) -> Result<String, GuestError> {
        match (self.serial(), mark) {
            (Serial::Own(console), ConsoleMark::Own(mark)) => Ok(console
                .wait_for_since(clock, mark, pattern, timeout)
                .await?
                .text),
            #[cfg(feature = "libvirt")]
            (Serial::Libvirt(console), ConsoleMark::Libvirt(mark)) => {
                Ok(console.wait_for_since(mark, pattern, timeout).await?)
            }
            #[cfg(feature = "libvirt")]
            _ => Err(GuestError::ForeignMark),
        }
    }

    /// The console's lines from now on.
    pub(crate) fn subscribe(&self) -> Lines {
        use tokio::sync::broadcast::error::RecvError;
        match self.serial() {
            Serial::Own(console) => Box::pin(futures::stream::unfold(
                console.subscribe(),
                |mut lines| async move {
                    loop {
                        match lines.recv().await {
                            Ok(line) => return Some((line.text, lines)),
                            Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => return None,
                        }
                    }
                },
            )),
            #[cfg(feature = "libvirt")]
            Serial::Libvirt(console) => Box::pin(futures::stream::unfold(
                console.subscribe(),
                |mut lines| async move {
                    loop {
                        match lines.recv().await {
                            Ok(line) => return Some((line, lines)),
                            Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => return None,
                        }
                    }
                },
            )),
        }
    }

    /// Boots so far: QEMU starts and resets for `qemu`, the firmware's boot-option starts on the
    /// console for `libvirt`, the node OS's `init started` lines for a rack server.
    pub(crate) async fn boots(&self) -> u64 {
        match self {
            Self::Qemu(machine) => machine.boots().await,
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => guest.boots(),
            Self::Rack(server) => {
                let pattern = Regex::new(RACK_BOOT_LINE).expect("a valid pattern");
                server
                    .console
                    .count_since(rackproof_qemu::Mark::default(), &pattern) as u64
            }
        }
    }

    /// Replaces the identity the guest reads from its next power-on (a rack server's is
    /// delivered over SSH by the lab instead).
    pub(crate) async fn set_identity(&self, identity: &NodeIdentity) -> Result<(), GuestError> {
        match self {
            Self::Qemu(machine) => Ok(machine.set_identity(identity).await?),
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => Ok(guest.set_identity(identity)?),
            Self::Rack(_) => Err(GuestError::RackIdentity),
        }
    }

    /// Gives the node a fresh copy of `disk` (it must be off).
    pub(crate) async fn reimage(&self, disk: &Path) -> Result<(), GuestError> {
        match self {
            Self::Qemu(machine) => Ok(machine.reimage(disk).await?),
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => Ok(guest.reimage(disk).await?),
            Self::Rack(server) => Err(GuestError::RackDisk {
                node: server.description.name.clone(),
            }),
        }
    }

    /// Disconnects (`up: false`) or reconnects the node's network.
    pub(crate) async fn set_link(&self, up: bool) -> Result<(), GuestError> {
        match self {
            Self::Qemu(machine) => Ok(machine.set_link(up).await?),
            #[cfg(feature = "libvirt")]
            Self::Libvirt(_) => Err(GuestError::NoPartition {
                machines: "libvirt domains",
                why: "the NIC is QEMU's user network, outside libvirt's devices",
            }),
            Self::Rack(_) => Err(GuestError::NoPartition {
                machines: "rack servers",
                why: "their switch port is outside Rackproof's reach",
            }),
        }
    }

    /// Stops the machine and removes what it left (QEMU's files; the libvirt domain); a rack
    /// server is powered off through its BMC and stays as it is otherwise.
    pub(crate) async fn shutdown(&self) {
        match self {
            Self::Qemu(machine) => {
                let _ = machine.shutdown().await;
            }
            #[cfg(feature = "libvirt")]
            Self::Libvirt(guest) => {
                if let Err(e) = guest.machine.teardown().await {
                    tracing::warn!(error = %rackproof_std::error_chain(&e), "tearing the libvirt domain down failed");
                }
            }
            Self::Rack(server) => {
                if let Err(e) = server.bmc.reset(ResetAction::ForceOff).await {
                    tracing::warn!(node = %server.description.name, error = %rackproof_std::error_chain(&e), "powering the rack server off failed");
                }
            }
        }
    }
}

#[cfg(feature = "libvirt")]
pub(crate) mod libvirt {
    //! A lab node as a libvirt domain (`qemu:///system`): its directory (world-traversable, since
    //! libvirt's QEMU runs as `libvirt-qemu`), a qcow2 copy of the node image, the identity file
    //! handed over through fw_cfg.

    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use rackproof_clock::Clock;
    use rackproof_driver::{Power as _, PowerState};
    use rackproof_libvirt::{LibvirtMachine, MachineConfig};
    use rackproof_qemu::NodeIdentity;
    use rackproof_qemu::identity::IdentityError;
    use regex::Regex;

    /// The firmware's line for each boot it starts.
    const BOOT_LINE: &str = r"^BdsDxe: starting Boot";

    /// Why a libvirt domain could not be defined or changed.
    #[derive(Debug, thiserror::Error)]
    pub(crate) enum LibvirtGuestError {
        /// A step of defining node `node`'s domain failed on a file of its directory.
        #[error("node {node}: {action} ({path})")]
        File {
            node: String,
            action: &'static str,
            path: PathBuf,
            #[source]
            source: std::io::Error,
        },
        /// The node image could not be copied for the domain.
        #[error("node {node}: copy the node image")]
        Copy {
            node: String,
            #[source]
            source: ConvertError,
        },
        /// The node's identity could not be rendered.
        #[error("node {node}: render its identity")]
        Render {
            node: String,
            #[source]
            source: IdentityError,
        },
        /// The node's identity file could not be written.
        #[error("node {node}: write its identity")]
        WriteIdentity {
            node: String,
            #[source]
            source: inplace_agent::store::StoreError,
        },
        /// libvirt refused the domain.
        #[error(
            "node {node}: define its libvirt domain (is libvirtd running? `ci/start-libvirtd` installs and starts it)"
        )]
        Define {
            node: String,
            #[source]
            source: rackproof_libvirt::MachineError,
        },
        /// The domain's identity file could not be replaced.
        #[error("failed to write {}", path.display())]
        Identity {
            path: PathBuf,
            #[source]
            source: std::io::Error,
        },
        /// The domain must be off for `action`.
        #[error("cannot {action} of domain {domain} while it is {state}")]
        NotOff {
            action: &'static str,
            domain: String,
            state: PowerState,
        },
        /// The domain's power state could not be read.
        #[error(transparent)]
        PowerState(#[from] rackproof_driver::DriverError),
        /// The fresh disk could not be made.
        #[error(transparent)]
        Convert(#[from] ConvertError),
    }

    /// Why `qemu-img convert` did not make the qcow2 copy.
    #[derive(Debug, thiserror::Error)]
    pub(crate) enum ConvertError {
        /// `qemu-img` could not be started.
        #[error("qemu-img is missing; install it with `apt-get install -y qemu-utils`")]
        Missing(#[source] std::io::Error),
        /// `qemu-img convert` ended with an error.
        #[error("qemu-img convert {} failed: {stderr}", raw.display())]
        Failed { raw: PathBuf, stderr: String },
    }

    #[derive(Debug)]
    pub(crate) struct LibvirtGuest {
        pub machine: Arc<LibvirtMachine>,
        disk: PathBuf,
        identity: PathBuf,
    }

    impl LibvirtGuest {
        /// Defines domain `prefix + node`, powered off, with a copy of `disk` under `dir` and its
        /// SSH port forwarded to `ssh_port` on 127.0.0.1.
        pub(crate) async fn define(
            node: &str,
            prefix: &str,
            dir: &Path,
            disk: &Path,
            identity: &NodeIdentity,
            ssh_port: u16,
            clock: &Clock,
        ) -> Result<Self, LibvirtGuestError> {
            let node_dir = dir.join(node);
            let file = |action: &'static str, path: &Path| {
                let (node, path) = (node.to_owned(), path.to_owned());
                move |source| LibvirtGuestError::File {
                    node,
                    action,
                    path,
                    source,
                }
            };
            std::fs::create_dir_all(&node_dir).map_err(file("create its directory", &node_dir))?;
            std::fs::set_permissions(
                &node_dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .map_err(file("open its directory to libvirt", &node_dir))?;
            let guest_disk = node_dir.join("disk.qcow2");
            let identity_file = node_dir.join("identity");
            convert_disk(disk, &guest_disk)
                .await
                .map_err(|source| LibvirtGuestError::Copy {
                    node: node.to_owned(),
                    source,
                })?;
            let identity_text = identity
                .render()
                .map_err(|source| LibvirtGuestError::Render {
                    node: node.to_owned(),
                    source,
                })?;
            // It holds the node's token: 0600 from the first byte (libvirt hands it to its QEMU
            // user as it does disks).
            inplace_agent::store::write_atomic(
                &identity_file,
                identity_text.as_bytes(),
                Some(0o600),
            )
            .map_err(|source| LibvirtGuestError::WriteIdentity {
                node: node.to_owned(),
                source,
            })?;
            let mut config = MachineConfig::new(node, &node_dir, &guest_disk);
            config.name_prefix = prefix.to_owned();
            config.identity = Some(identity_file.clone());
            config.ssh_port = Some(ssh_port);
            let machine = LibvirtMachine::define(config, clock.clone())
                .await
                .map_err(|source| LibvirtGuestError::Define {
                    node: node.to_owned(),
                    source,
                })?;
            Ok(Self {
                machine: Arc::new(machine),
                disk: guest_disk,
                identity: identity_file,
            })
        }

        pub(crate) fn boots(&self) -> u64 {
            let pattern = Regex::new(BOOT_LINE).expect("a valid pattern");
            self.machine
                .console()
                .lines()
                .iter()
                .filter(|l| pattern.is_match(l))
                .count() as u64
        }

        async fn off(&self, action: &'static str) -> Result<(), LibvirtGuestError> {
            match self.machine.power_state().await? {
                PowerState::Off => Ok(()),
                state => Err(LibvirtGuestError::NotOff {
                    action,
                    domain: self.machine.name().to_owned(),
                    state,
                }),
            }
        }

        pub(crate) fn set_identity(
            &self,
            identity: &NodeIdentity,
        ) -> Result<(), LibvirtGuestError> {
            let text = identity
                .render()
                .map_err(|source| LibvirtGuestError::Render {
                    node: self.machine.name().to_owned(),
                    source,
                })?;
            std::fs::write(&self.identity, text).map_err(|source| LibvirtGuestError::Identity {
                path: self.identity.clone(),
                source,
            })
        }

        pub(crate) async fn reimage(&self, disk: &Path) -> Result<(), LibvirtGuestError> {
            self.off("replace the disk").await?;
            Ok(convert_disk(disk, &self.disk).await?)
        }
    }

    /// `qemu-img convert` of the raw node image into a stand-alone qcow2 (no backing file: the
    /// images live where libvirt's QEMU user cannot read).
    async fn convert_disk(raw: &Path, qcow2: &Path) -> Result<(), ConvertError> {
        let out = tokio::process::Command::new("qemu-img")
            .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
            .arg(raw)
            .arg(qcow2)
            .output()
            .await
            .map_err(ConvertError::Missing)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(ConvertError::Failed {
                raw: raw.to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
}
