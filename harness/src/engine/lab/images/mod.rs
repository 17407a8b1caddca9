//! The lab of the backends whose nodes boot the node OS images of `ci/build-images` (OVMF or a
//! server's UEFI, systemd-boot, Debian's kernel, the real agent binary): `qemu` and `libvirt`, one
//! guest per lab node (a QEMU process of our own, or a libvirt domain: [`crate::engine::lab::guest`]) behind a
//! Redfish or IPMI emulator that the engine drives through the same BMC clients it uses for rack
//! nodes; and `physical`, rack servers behind their own BMCs ([`crate::engine::lab::rack`]), whose nodes reach
//! the servers below at the address their inventory gives.
//!
//! What the guests reach on the host side of the user network (`10.0.2.2`):
//! - the embedded API server over HTTPS (its certificate also names `10.0.2.2`), as their own
//!   node identity (a bearer token per node, handed over through fw_cfg with the CA);
//! - the lab's image server (`rackproof_lab::image_server`), which serves a scenario's broken
//!   images to the nodes meant to get them, and answers with the scenario's image-server faults.
//!
//! Power cuts are hard power-offs of the guest (QMP `quit`, libvirt `destroy`) at the moment the
//! fault names: when the image server
//! stalls the node's download halfway, when the agent logs that `os-update` starts writing the
//! slot, or when the first boot of the new version starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rackproof_clock::Clock;
use rackproof_driver::{DriverError, SharedMachine};
use rackproof_lab::image_server::ImageServer;
use rackproof_lab::resource::BmcKind as LabBmcKind;
use rackproof_qemu::{Images, NodeIdentity};
use rackproof_redfish::{Emulator, RunningEmulator};

use crate::engine::cluster::api::{ApiCluster, NodeEndpoint};
use crate::engine::lab::guest::{Guest, GuestError};
use crate::engine::lab::rack::RackError;
use crate::scenario::{BmcKind, BootBehaviour, Scenario};

pub(crate) mod build;
mod faults;
mod power;
mod services;

/// Why the node images are not ready.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageBuildError {
    /// The blocking task building them panicked.
    #[error("building the images panicked")]
    Panicked(#[source] tokio::task::JoinError),
    /// `ci/build-images` failed, or its disks are missing.
    #[error("building the node images failed")]
    Build(#[source] rackproof_qemu::images::ImagesError),
}

/// Why an operation on one node of the lab failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageNodeError {
    /// The scenario names no lab node `node`.
    #[error("no lab node {node}")]
    UnknownNode { node: String },
    /// The node's machine could not do it.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// A rack server could not be provisioned (boxed: it is large).
    #[error(transparent)]
    Rack(Box<RackError>),
    /// The disks hold only the base version.
    #[error("the qemu images have disks with {installed} installed, not {wanted}")]
    NotOnDisk { installed: String, wanted: String },
    /// The disk of a version is missing.
    #[error(transparent)]
    Disk(rackproof_qemu::images::ImagesError),
    /// The node's BMC did not report its power state.
    #[error("node {node}: read its power state")]
    PowerState {
        node: String,
        #[source]
        source: DriverError,
    },
    /// The power-on procedure failed (the error names the node).
    #[error(transparent)]
    PowerOn(#[from] rackproof_lab::strategy::StrategyError),
    /// The images have no variant that boots like the fault asks.
    #[error(transparent)]
    Variant(#[from] RollbackVersion),
    /// The images have broken variants of the update target only.
    #[error(
        "the node images have broken builds of the update target {target} only, not of {version}"
    )]
    NoVariants { version: String, target: String },
    /// The node's BMC is not a Redfish emulator of the lab.
    #[error("BMC quirks are set through the Redfish emulator of a qemu node")]
    NoRedfishEmulator,
    /// The Redfish emulator refused the quirk's fault rule.
    #[error(transparent)]
    Quirk(#[from] rackproof_redfish::InvalidFault),
    /// A service of the node could not be stopped or started over SSH.
    #[error(transparent)]
    Service(#[from] services::ServiceError),
}

/// A rollback variant the images don't have: theirs boots the installed version.
#[derive(Debug, thiserror::Error)]
#[error("the qemu images' rollback variant boots the installed version {base}, not {wanted}")]
pub(crate) struct RollbackVersion {
    base: String,
    wanted: String,
}

/// What keeps a node's BMC emulator serving; a rack server's BMC is its own.
#[derive(Debug)]
enum Served {
    Redfish {
        emulator: Emulator,
        _running: RunningEmulator,
        /// The emulator's password (a credential of the run).
        password: String,
    },
    Ipmi {
        _emulator: rackproof_ipmi::IpmiEmulator,
        /// The emulator's password (a credential of the run).
        password: String,
    },
    Rack(LabBmcKind),
}

/// One lab node.
#[derive(Debug)]
pub(crate) struct ImageNode {
    pub machine: Guest,
    /// The BMC client (Redfish or IPMI) in front of the machine's emulator.
    bmc: SharedMachine,
    served: Served,
    /// The identity without the pool's OSC (set when a Machine binds the node).
    identity: NodeIdentity,
    /// The OS version on the node's disk right now.
    installed: Mutex<String>,
    /// Where the lab logs in to the node OS (to stop and start its services).
    ssh: rackproof_ssh::SshTarget,
}

/// The lab of one run on `qemu`, `libvirt` or `physical`.
#[derive(Debug)]
pub struct ImageLab {
    nodes: BTreeMap<String, ImageNode>,
    images: Images,
    image_server: ImageServer,
    cluster: ApiCluster,
    _https: NodeEndpoint,
    clock: Clock,
    pool: String,
    /// The version the images' slots and broken variants are built for.
    new_version: String,
    /// The base version (installed on the disks).
    base_version: String,
    /// This machine's address as the nodes reach it (QEMU's user network: [`HOST_ALIAS`]).
    node_address: String,
    /// CA files of the Redfish emulators (none in front of rack servers).
    _dir: Option<tempfile::TempDir>,
}

/// What a lab serves its nodes, and where they reach it.
struct Serving {
    image_server: ImageServer,
    https: NodeEndpoint,
    /// This machine's address as the nodes see it.
    node_address: String,
    /// CA files of the Redfish emulators (none in front of rack servers).
    dir: Option<tempfile::TempDir>,
}

/// What the backends booting the node images (`qemu`, `libvirt`, `physical`) cannot do for this
/// scenario, one sentence each (empty: it can run).
pub(crate) fn unsupported(scenario: &Scenario) -> Vec<String> {
    let mut problems = Vec::new();
    let base = &scenario.first_pool().os.value;
    let others: Vec<&str> = scenario
        .images
        .iter()
        .map(|i| i.version.value.as_str())
        .filter(|v| *v != base.as_str())
        .collect();
    if others.len() > 1 {
        problems.push(format!(
            "the node images are built for two versions (the pool's {base} and one update target), not {}",
            others.join(", ")
        ));
    }
    for image in &scenario.images {
        if image.version.value == *base && image.boot != BootBehaviour::Ok {
            problems.push(format!("the installed version {base} must boot (the nodes start from it); only the update target can be broken"));
        }
        if let Err(e) = variant_suffix(&image.boot, base) {
            problems.push(e.to_string());
        }
    }
    if scenario.lab.bmc == BmcKind::Ipmi {
        let quirks = scenario
            .faults
            .iter()
            .any(|f| matches!(f.action, crate::scenario::FaultAction::Bmc(_)));
        if quirks {
            problems.push("BMC quirks on qemu are set through the Redfish emulator's fault rules: use `bmc: redfish`".to_owned());
        }
    }
    let target = ImageLab::update_target(scenario);
    let actions = || {
        scenario
            .faults
            .iter()
            .map(|f| &f.action)
            .chain(scenario.steps.iter().filter_map(|s| match s {
                crate::scenario::Step::Fault(a) => Some(a),
                _ => None,
            }))
    };
    for action in actions() {
        if let crate::scenario::FaultAction::BootFailure(f) = action {
            if f.version.value != target {
                problems.push(format!("`bootFailure` of node {} names version {}: the node images have broken builds of the update target {target} only", f.node.value, f.version.value));
            }
            if let Err(e) = variant_suffix(&f.boot, base) {
                problems.push(e.to_string());
            }
        }
    }
    if scenario
        .steps
        .iter()
        .any(|s| matches!(s, crate::scenario::Step::Publish(_)))
    {
        problems.push("a `publish` step needs a build made during the run; the node images are built before it: run the scenario on `sim`".to_owned());
    }
    problems
}

/// The slot-directory suffix of a broken variant (`""` for a good slot).
fn variant_suffix(boot: &BootBehaviour, base: &str) -> Result<&'static str, RollbackVersion> {
    match boot {
        BootBehaviour::Ok => Ok(""),
        BootBehaviour::Panics => Ok("-panic"),
        BootBehaviour::Hangs => Ok("-hang"),
        BootBehaviour::NeverReports => Ok("-silent"),
        BootBehaviour::BootsVersion(v) if v == base => Ok("-rollback"),
        BootBehaviour::BootsVersion(v) => Err(RollbackVersion {
            base: base.to_owned(),
            wanted: v.clone(),
        }),
    }
}

/// The directory of the workspace (`ci/build-images` lives there): the first ancestor of `start`
/// (a scenario file, the current directory) that has it, else the one this binary was built from.
pub(crate) fn workspace_root(start: &Path) -> PathBuf {
    let absolute = std::path::absolute(start).unwrap_or_else(|_| start.to_owned());
    absolute
        .ancestors()
        .find(|dir| dir.join("ci/build-images").is_file())
        .map(Path::to_owned)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

impl ImageLab {
    /// The node images of `scenario` (the pool's version and its update target), built with
    /// `ci/build-images` of `repo` (cached). Done before the run's clock starts, so a rebuild
    /// doesn't show as minutes of nothing at the start of the timeline.
    pub(crate) async fn images(
        scenario: &Scenario,
        repo: &Path,
    ) -> Result<Images, ImageBuildError> {
        let base = scenario.first_pool().os.value.clone();
        let new = Self::update_target(scenario);
        let repo = repo.to_owned();
        tokio::task::spawn_blocking(move || Images::build_versions(&repo, &base, &new))
            .await
            .map_err(ImageBuildError::Panicked)?
            .map_err(ImageBuildError::Build)
    }

    /// The version the scenario updates to (the images' second version).
    fn update_target(scenario: &Scenario) -> String {
        let base = &scenario.first_pool().os.value;
        scenario
            .images
            .iter()
            .map(|i| i.version.value.clone())
            .find(|v| v != base)
            .unwrap_or_else(|| rackproof_qemu::images::NEW_VERSION.to_owned())
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// The credentials this lab made or holds: each node's bearer token and its BMC emulator's
    /// password (a rack's BMC passwords are the inventory's, not the run's).
    pub fn credentials(&self) -> Vec<String> {
        let mut credentials = Vec::new();
        for node in self.nodes.values() {
            credentials.push(node.identity.token.clone());
            match &node.served {
                Served::Redfish { password, .. } | Served::Ipmi { password, .. } => {
                    credentials.push(password.clone());
                }
                Served::Rack(_) => {}
            }
        }
        credentials
    }

    fn node(&self, name: &str) -> Result<&ImageNode, ImageNodeError> {
        self.nodes
            .get(name)
            .ok_or_else(|| ImageNodeError::UnknownNode {
                node: name.to_owned(),
            })
    }

    /// The orchestrator's OS-update command points here (as the guests see it).
    pub fn image_server_url(&self) -> String {
        self.image_server.url_as_seen_from(&self.node_address)
    }

    /// Stops every guest (QEMU: QMP `quit`, then SIGKILL; libvirt: the domain destroyed and
    /// undefined); the emulators and servers stop with the lab.
    pub async fn tear_down(&self) {
        for node in self.nodes.values() {
            node.machine.shutdown().await;
        }
    }
}
