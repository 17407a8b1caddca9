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
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use rackproof_clock::Clock;
use rackproof_driver::{DriverError, Power, PowerState, ResetAction, SharedMachine};
use rackproof_lab::bmc::{self, BmcCredentials, BmcOptions};
use rackproof_lab::image_server::{ImageFault, ImageServer};
use rackproof_lab::physical::InventoryFile;
use rackproof_lab::resource::{BmcDescription, BmcKind as LabBmcKind, CredentialsRef};
use rackproof_lab::strategy::{self, WaitOptions};
use rackproof_qemu::{HOST_ALIAS, Images, NodeIdentity, QemuConfig, QemuMachine};
use rackproof_redfish::{Emulator, EmulatorConfig, FaultRule, RunningEmulator};
use regex::Regex;

use crate::engine::cluster::api::{ApiCluster, NodeEndpoint};
use crate::engine::judge::timeline::EntryKind;
use crate::engine::lab::Lines;
use crate::engine::lab::guest::{Guest, GuestKind};
use crate::engine::lab::provider::OscLocation;
use crate::engine::shared::Shared;
use crate::scenario::{
    BmcKind, BmcQuirk, BootBehaviour, ImageServerAnswer, PowerAction, PowerCutPoint, Scenario,
};

/// How long a node may take from power-on to its OS reporting up (TCG on a loaded machine).
const BOOT_DEADLINE: Duration = Duration::from_secs(600);
/// The BMC user of the emulators.
const BMC_USER: &str = "rackproof";
/// The Redfish path of the one system's reset action.
const RESET_PATH: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";
/// The line `os-update` logs just before its first write to the ESP.
const SLOT_WRITE_LINE: &str = "installing the slot on the ESP";

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
    let base = &scenario.pool.os.value;
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
            problems.push(e);
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
    let kills_agent = scenario
        .faults
        .iter()
        .map(|f| &f.action)
        .chain(scenario.steps.iter().filter_map(|s| match s {
            crate::scenario::Step::Fault(a) => Some(a),
            _ => None,
        }))
        .any(|a| matches!(a, crate::scenario::FaultAction::Kill(k) if k.component == crate::scenario::Component::Agent));
    if kills_agent {
        problems.push("killing the agent of a node booting the node images is not available (init does not restart it)".to_owned());
    }
    problems
}

/// The slot-directory suffix of a broken variant (`""` for a good slot).
fn variant_suffix(boot: &BootBehaviour, base: &str) -> Result<&'static str, String> {
    match boot {
        BootBehaviour::Ok => Ok(""),
        BootBehaviour::Panics => Ok("-panic"),
        BootBehaviour::Hangs => Ok("-hang"),
        BootBehaviour::NeverReports => Ok("-silent"),
        BootBehaviour::BootsVersion(v) if v == base => Ok("-rollback"),
        BootBehaviour::BootsVersion(v) => Err(format!(
            "the qemu images' rollback variant boots the installed version {base}, not {v}"
        )),
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
    pub async fn images(scenario: &Scenario, repo: &Path) -> Result<Images, String> {
        let base = scenario.pool.os.value.clone();
        let new = Self::update_target(scenario);
        let repo = repo.to_owned();
        tokio::task::spawn_blocking(move || Images::build_versions(&repo, &base, &new))
            .await
            .map_err(|e| format!("building the images panicked: {e}"))?
            .map_err(|e| {
                format!(
                    "building the node images failed: {}",
                    crate::engine::error_chain(&e)
                )
            })
    }

    /// The version the scenario updates to (the images' second version).
    fn update_target(scenario: &Scenario) -> String {
        let base = &scenario.pool.os.value;
        scenario
            .images
            .iter()
            .map(|i| i.version.value.clone())
            .find(|v| v != base)
            .unwrap_or_else(|| rackproof_qemu::images::NEW_VERSION.to_owned())
    }

    /// Starts the HTTPS endpoint and the image server over `images` (from [`Self::images`]), and
    /// prepares every node, a guest of `kind`, powered off with the base version installed.
    pub(crate) async fn build(
        scenario: &Scenario,
        kind: GuestKind,
        images: Images,
        cluster: &ApiCluster,
        clock: &Clock,
    ) -> Result<Self, String> {
        let base = scenario.pool.os.value.clone();
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let image_server = ImageServer::serve(images.dir().join("slots"), loopback)
            .await
            .map_err(|e| crate::engine::error_chain(&e))?;
        let https = cluster.node_endpoint(loopback, &[HOST_ALIAS]).await?;
        let api_server = format!("https://{HOST_ALIAS}:{}", https.port);
        let dir = rackproof_reap::owned_tempdir("rackproof-qemu-lab-")
            .map_err(|e| format!("creating a temporary directory failed: {e}"))?;
        // libvirt's QEMU (user libvirt-qemu) reaches its node directories through this one.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .map_err(|e| format!("opening the lab directory failed: {e}"))?;
        let domain_prefix = format!(
            "rackproof-run{}-{}-",
            std::process::id(),
            dir.path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("lab")
                .trim_start_matches("rackproof-qemu-lab-")
                .to_lowercase()
        );
        let disk = images
            .disk(&base)
            .map_err(|e| crate::engine::error_chain(&e))?;

        let mut nodes = BTreeMap::new();
        for name in scenario.lab.node_names() {
            let identity = NodeIdentity {
                node: name.clone(),
                pool: scenario.pool.name.clone(),
                api_server: api_server.clone(),
                token: cluster.node_token(&name)?,
                ca_pem: https.ca_pem.clone(),
                kubelet_version: scenario.pool.kubernetes.value.clone(),
                ..NodeIdentity::default()
            };
            let machine = match kind {
                GuestKind::Qemu => {
                    let config = QemuConfig {
                        identity: identity.clone(),
                        ..QemuConfig::new(&name, &disk)
                    };
                    Guest::Qemu(Arc::new(
                        QemuMachine::create(config, clock.clone())
                            .map_err(|e| crate::engine::error_chain(&e))?,
                    ))
                }
                #[cfg(feature = "libvirt")]
                GuestKind::Libvirt => Guest::Libvirt(
                    crate::engine::lab::guest::libvirt::LibvirtGuest::define(
                        &name,
                        &domain_prefix,
                        dir.path(),
                        &disk,
                        &identity,
                        clock,
                    )
                    .await?,
                ),
                #[cfg(not(feature = "libvirt"))]
                GuestKind::Libvirt => {
                    return Err(format!(
                        "this build has no libvirt support ({domain_prefix}…): build with `--features rackproof-harness/libvirt`"
                    ));
                }
            };
            let (bmc, served) =
                serve_bmc(&name, scenario.lab.bmc, machine.power(), dir.path(), clock).await?;
            nodes.insert(
                name,
                ImageNode {
                    machine,
                    bmc,
                    served,
                    identity,
                    installed: Mutex::new(base.clone()),
                },
            );
        }
        let serving = Serving {
            image_server,
            https,
            node_address: HOST_ALIAS.to_owned(),
            dir: Some(dir),
        };
        Self::assemble(scenario, nodes, images, serving, cluster, clock)
    }

    /// The lab of backend `physical`: the scenario's nodes from `inventory`, each reserved and
    /// brought up (all at once) so provisioning can reach it over SSH. The API server and the
    /// image server listen where the inventory's `harness` says, and the nodes address them there.
    pub(crate) async fn build_rack(
        scenario: &Scenario,
        inventory: &InventoryFile,
        images: Images,
        cluster: &ApiCluster,
        clock: &Clock,
    ) -> Result<Self, String> {
        let harness = inventory.inventory.harness.as_ref().ok_or_else(|| {
            format!(
                "inventory {} has no `harness` section",
                inventory.path.display()
            )
        })?;
        let base = scenario.pool.os.value.clone();
        let listen = SocketAddr::new(harness.listen, 0);
        let image_server = ImageServer::serve(images.dir().join("slots"), listen)
            .await
            .map_err(|e| crate::engine::error_chain(&e))?;
        let https = cluster
            .node_endpoint(listen, &[harness.address.as_str()])
            .await?;
        let api_server = format!("https://{}:{}", harness.address, https.port);
        let mut nodes = BTreeMap::new();
        for name in scenario.lab.node_names() {
            let rack = crate::engine::lab::rack::open(inventory, &name, clock).await?;
            let kind = rack
                .description
                .bmc
                .as_ref()
                .map_or(LabBmcKind::Redfish, |b| b.kind);
            let identity = NodeIdentity {
                node: name.clone(),
                pool: scenario.pool.name.clone(),
                api_server: api_server.clone(),
                token: cluster.node_token(&name)?,
                ca_pem: https.ca_pem.clone(),
                kubelet_version: scenario.pool.kubernetes.value.clone(),
                ..NodeIdentity::default()
            };
            let bmc = rack.bmc.clone();
            nodes.insert(
                name,
                ImageNode {
                    machine: Guest::Rack(Box::new(rack)),
                    bmc,
                    served: Served::Rack(kind),
                    identity,
                    installed: Mutex::new(base.clone()),
                },
            );
        }
        futures::future::try_join_all(
            nodes.iter().map(|(name, node)| {
                crate::engine::lab::rack::ensure_up(name, &node.machine, clock)
            }),
        )
        .await?;
        let serving = Serving {
            image_server,
            https,
            node_address: harness.address.clone(),
            dir: None,
        };
        Self::assemble(scenario, nodes, images, serving, cluster, clock)
    }

    /// The lab from its nodes and servers, the scenario's broken builds handed to every node.
    fn assemble(
        scenario: &Scenario,
        nodes: BTreeMap<String, ImageNode>,
        images: Images,
        serving: Serving,
        cluster: &ApiCluster,
        clock: &Clock,
    ) -> Result<Self, String> {
        let lab = Self {
            nodes,
            images,
            image_server: serving.image_server,
            cluster: cluster.clone(),
            _https: serving.https,
            clock: clock.clone(),
            pool: scenario.pool.name.clone(),
            new_version: Self::update_target(scenario),
            base_version: scenario.pool.os.value.clone(),
            node_address: serving.node_address,
            _dir: serving.dir,
        };
        for image in scenario
            .images
            .iter()
            .filter(|i| i.boot != BootBehaviour::Ok)
        {
            for name in lab.nodes.keys() {
                lab.break_next_version(name, &image.boot)?;
            }
        }
        Ok(lab)
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

    fn node(&self, name: &str) -> Result<&ImageNode, String> {
        self.nodes
            .get(name)
            .ok_or_else(|| format!("no lab node {name}"))
    }

    /// Hands the node the pool's OSC and a fresh disk with `version` (a rack server: checks it
    /// runs `version`, and leaves it off with the identity on its state partition).
    pub async fn provision(
        &self,
        name: &str,
        osc: &OscLocation,
        version: &str,
    ) -> Result<(), String> {
        let node = self.node(name)?;
        self.cluster.confine_node(name, &self.pool, osc);
        let identity = NodeIdentity {
            osc_secret: format!("{}/{}", osc.namespace, osc.name),
            ..node.identity.clone()
        };
        if let Guest::Rack(server) = &node.machine {
            return crate::engine::lab::rack::provision(
                server,
                &node.machine,
                &identity,
                version,
                &self.clock,
            )
            .await;
        }
        node.machine.set_identity(&identity).await?;
        let fresh = node
            .installed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            == version
            && node.machine.boots().await == 0;
        if !fresh {
            if version != self.base_version {
                return Err(format!(
                    "the qemu images have disks with {} installed, not {version}",
                    self.base_version
                ));
            }
            let disk = self
                .images
                .disk(version)
                .map_err(|e| crate::engine::error_chain(&e))?;
            node.machine.reimage(&disk).await?;
            *node.installed.lock().unwrap_or_else(|p| p.into_inner()) = version.to_owned();
        }
        Ok(())
    }

    /// Powers the node off (its Machine went away).
    pub async fn decommission(&self, name: &str, shared: &Shared) {
        self.power(name, PowerAction::Off, shared).await;
    }

    /// Powers the node on through its BMC (asking again when the BMC ignores it) and waits until
    /// the OS reports up on the console.
    pub async fn power_on_and_wait(&self, name: &str, shared: &Shared) {
        let Ok(node) = self.node(name) else { return };
        match self
            .clock
            .timeout(BOOT_DEADLINE, self.bring_up(name, node, shared))
            .await
        {
            Ok(Ok(version)) => {
                shared.record(Some(name), EntryKind::Lab, format!("OS {version} is up"))
            }
            Ok(Err(e)) => {
                shared.record(Some(name), EntryKind::Lab, format!("power-on failed: {e}"))
            }
            Err(_) => shared.record(
                Some(name),
                EntryKind::Lab,
                format!(
                    "power-on failed: the OS did not come up within {}",
                    rackproof_clock::format_duration(BOOT_DEADLINE)
                ),
            ),
        }
    }

    async fn bring_up(
        &self,
        name: &str,
        node: &ImageNode,
        shared: &Shared,
    ) -> Result<String, String> {
        let up = Regex::new(r"^rackproof-os (\S+): up$").expect("a valid pattern");
        let started = Regex::new(r"^rackproof-os \S+: init started").expect("a valid pattern");
        let mark = node.machine.mark();
        if node
            .bmc
            .power_state()
            .await
            .map_err(|e| crate::engine::error_chain(&e))?
            == PowerState::On
        {
            // Up already if the latest boot reached `up`.
            let lines = node.machine.lines();
            let latest = lines
                .iter()
                .rev()
                .find(|l| up.is_match(l) || started.is_match(l));
            if let Some(caps) = latest.and_then(|l| up.captures(l)) {
                return Ok(caps[1].to_owned());
            }
        } else {
            self.power_on(name, node, shared).await?;
        }
        let line = node
            .machine
            .wait_line_since(&self.clock, mark, &up, BOOT_DEADLINE)
            .await?;
        Ok(up
            .captures(&line)
            .map(|c| c[1].to_owned())
            .unwrap_or_default())
    }

    /// Powers the node on through its BMC with the lab's one power-on procedure
    /// ([`rackproof_lab::strategy::power_on`]); each request and each repetition is a timeline
    /// entry.
    async fn power_on(&self, name: &str, node: &ImageNode, shared: &Shared) -> Result<(), String> {
        let recorded = RecordedBmc { name, node, shared };
        let options = WaitOptions::default();
        let retries = options.power_on_attempts.saturating_sub(1);
        strategy::power_on(name, &recorded, &self.clock, &options, |retry| {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!(
                    "the BMC accepted power-on but the machine stayed off; asking again ({retry}/{retries})"
                ),
            );
        })
        .await
        .map_err(|e| crate::engine::error_chain(&e))
    }

    /// A power action through the node's BMC, recorded in the timeline.
    pub async fn power(&self, name: &str, action: PowerAction, shared: &Shared) {
        let Ok(node) = self.node(name) else { return };
        let reset = crate::engine::lab::reset_action(action);
        let recorded = RecordedBmc { name, node, shared };
        if let Err(e) = recorded.reset(reset).await {
            shared.record(
                Some(name),
                EntryKind::Bmc,
                format!("{reset} failed: {}", crate::engine::error_chain(&e)),
            );
        }
    }

    /// The node's console lines from now on.
    pub fn console(&self, name: &str) -> Option<Lines> {
        Some(self.nodes.get(name)?.machine.subscribe())
    }

    pub async fn boots(&self, name: &str) -> u64 {
        match self.nodes.get(name) {
            Some(node) => node.machine.boots().await,
            None => 0,
        }
    }

    /// The image server hands `name` the broken variant of the update target from now on.
    pub fn break_next_version(&self, name: &str, boot: &BootBehaviour) -> Result<(), String> {
        self.node(name)?;
        let suffix = variant_suffix(boot, &self.base_version)?;
        self.image_server.serve_variant(
            name,
            &self.new_version,
            &format!("{}{suffix}", self.new_version),
        );
        Ok(())
    }

    /// Cuts the node's power (QMP `quit`) at `point` of its next update.
    pub async fn cut_power(&self, name: &str, point: PowerCutPoint, shared: &Shared) -> bool {
        let Ok(node) = self.node(name) else {
            return false;
        };
        let reached = match point {
            PowerCutPoint::Download => {
                let mut events = self.image_server.subscribe();
                self.image_server.stall_next_payload(name);
                loop {
                    match events.recv().await {
                        Ok(request)
                            if request.node.as_deref() == Some(name)
                                && request.answer.starts_with("stalled") =>
                        {
                            break true;
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break false,
                    }
                }
            }
            PowerCutPoint::SlotWrite => self.wait_line(name, |l| l.contains(SLOT_WRITE_LINE)).await,
            PowerCutPoint::FirstBoot => {
                let new = format!("rackproof-os {}: init started", self.new_version);
                self.wait_line(name, |l| l.ends_with(": rebooting")).await
                    && self.wait_line(name, |l| l.starts_with(&new)).await
            }
        };
        if !reached {
            return false;
        }
        if let Err(e) = node.machine.power().reset(ResetAction::ForceOff).await {
            shared.record(
                Some(name),
                EntryKind::Fault,
                format!(
                    "cutting the power failed: {}",
                    crate::engine::error_chain(&e)
                ),
            );
            return false;
        }
        true
    }

    async fn wait_line(&self, name: &str, wanted: impl Fn(&str) -> bool) -> bool {
        let Some(mut lines) = self.console(name) else {
            return false;
        };
        while let Some(line) = lines.next().await {
            if wanted(&line) {
                return true;
            }
        }
        false
    }

    /// Sets a quirk as fault rules of the node's Redfish emulator.
    pub fn add_bmc_quirk(
        &self,
        name: &str,
        quirk: &BmcQuirk,
        count: Option<u32>,
    ) -> Result<(), String> {
        let node = self.node(name)?;
        let Served::Redfish { emulator, .. } = &node.served else {
            return Err(
                "BMC quirks are set through the Redfish emulator of a qemu node".to_owned(),
            );
        };
        let rule = match quirk {
            BmcQuirk::IgnorePowerOn => {
                FaultRule::ignore_action("POST", RESET_PATH).for_reset_type(ResetAction::On)
            }
            BmcQuirk::Status(code) => FaultRule::status("POST", RESET_PATH, *code),
            BmcQuirk::Latency(span) => FaultRule::latency(None, "/redfish/v1/*", span.get()),
            BmcQuirk::ExpireSessions => FaultRule::expire_session("/redfish/v1/*"),
        };
        let rule = match count {
            Some(n) => rule.times(n),
            None => rule,
        };
        emulator
            .add_fault(rule)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    pub fn image_server_fault(&self, name: &str, answer: ImageServerAnswer, count: Option<u32>) {
        let fault = match answer {
            ImageServerAnswer::Unreachable => ImageFault::Unreachable,
            ImageServerAnswer::Status(code) => ImageFault::Status(code),
            ImageServerAnswer::Corrupt => ImageFault::Corrupt,
        };
        self.image_server.add_fault(name, fault, count);
    }

    pub async fn set_link(&self, name: &str, up: bool) -> Result<(), String> {
        self.node(name)?.machine.set_link(up).await
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

/// The timeline's words for a BMC request.
fn describe(served: &Served, action: ResetAction) -> String {
    match served {
        Served::Redfish { .. } | Served::Rack(LabBmcKind::Redfish) => {
            format!("redfish: POST ComputerSystem.Reset {{ResetType: {action}}}")
        }
        Served::Ipmi { .. } | Served::Rack(LabBmcKind::Ipmi) => format!(
            "ipmi: chassis control {}",
            crate::engine::lab::sim::ipmi_name(action)
        ),
    }
}

/// A node's BMC client that writes each reset request it sends into the timeline, as the BMC's
/// log would show it.
#[derive(Debug)]
struct RecordedBmc<'a> {
    name: &'a str,
    node: &'a ImageNode,
    shared: &'a Shared,
}

#[async_trait::async_trait]
impl Power for RecordedBmc<'_> {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        self.node.bmc.power_state().await
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        self.shared.record(
            Some(self.name),
            EntryKind::Bmc,
            describe(&self.node.served, action),
        );
        self.node.bmc.reset(action).await
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.node.bmc.allowed_resets()
    }
}

/// Starts the node's BMC emulator on 127.0.0.1 and connects the lab's BMC client to it.
async fn serve_bmc(
    name: &str,
    kind: BmcKind,
    machine: SharedMachine,
    dir: &Path,
    clock: &Clock,
) -> Result<(SharedMachine, Served), String> {
    use rand::Rng as _;
    let password: String = rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect();
    let credentials = BmcCredentials::new(BMC_USER, password.clone());
    let shared = machine;
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let fail = |what: &str, e: &(dyn std::error::Error + 'static)| {
        format!("node {name}: {what}: {}", crate::engine::error_chain(e))
    };
    let (description, served) = match kind {
        BmcKind::Redfish => {
            let emulator = Emulator::new(EmulatorConfig::single(
                shared,
                BMC_USER,
                &password,
                clock.clone(),
            ))
            .map_err(|e| fail("set up the Redfish emulator", &e))?;
            let running = emulator
                .serve_https(loopback)
                .await
                .map_err(|e| fail("start the Redfish emulator", &e))?;
            let ca_path = dir.join(format!("{name}-redfish-ca.pem"));
            std::fs::write(&ca_path, running.ca_pem().unwrap_or_default())
                .map_err(|e| fail("write the Redfish CA", &e))?;
            let description = bmc_description(LabBmcKind::Redfish, running.url(), Some(ca_path));
            (
                description,
                Served::Redfish {
                    emulator,
                    _running: running,
                    password: password.clone(),
                },
            )
        }
        BmcKind::Ipmi => {
            let ipmi_credentials = rackproof_ipmi::Credentials::new(BMC_USER, &password)
                .map_err(|e| fail("IPMI credentials", &e))?;
            let emulator = rackproof_ipmi::IpmiEmulator::start_with(
                shared,
                rackproof_ipmi::BmcConfig::new(ipmi_credentials),
                loopback,
                clock.clone(),
            )
            .await
            .map_err(|e| fail("start the IPMI emulator", &e))?;
            let description =
                bmc_description(LabBmcKind::Ipmi, emulator.local_addr().to_string(), None);
            let served = Served::Ipmi {
                _emulator: emulator,
                password: password.clone(),
            };
            (description, served)
        }
    };
    let client = bmc::connect(
        name,
        &description,
        credentials,
        &BmcOptions::default(),
        clock.clone(),
    )
    .await
    .map_err(|e| fail("connect to its BMC", &e))?;
    Ok((client, served))
}

fn bmc_description(kind: LabBmcKind, endpoint: String, ca_path: Option<PathBuf>) -> BmcDescription {
    BmcDescription {
        kind,
        endpoint,
        // The credentials are handed over directly; this reference is never read.
        credentials: CredentialsRef::Env {
            username_var: String::new(),
            password_var: String::new(),
        },
        ca_path,
        insecure_skip_tls_verify: false,
    }
}
