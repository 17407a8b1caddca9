//! Building the lab of the node-image backends: the image server and the API server's HTTPS
//! endpoint, then each node, a guest behind its own BMC emulator (`qemu`, `libvirt`) or a rack
//! server of the inventory (`physical`), powered off with the base version installed.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rackproof_clock::Clock;
use rackproof_driver::SharedMachine;
use rackproof_lab::bmc::{self, BmcCredentials, BmcOptions};
use rackproof_lab::image_server::ImageServer;
use rackproof_lab::physical::InventoryFile;
use rackproof_lab::resource::{BmcDescription, BmcKind as LabBmcKind, CredentialsRef};
use rackproof_qemu::{HOST_ALIAS, Images, NodeIdentity, QemuConfig, QemuMachine};
use rackproof_redfish::{Emulator, EmulatorConfig};

use super::{ImageLab, ImageNode, ImageNodeError, Served, Serving};
use crate::engine::cluster::api::{ApiCluster, ClusterError, NodeCredential, NodeEndpoint};
use crate::engine::lab::guest::{Guest, GuestKind};
use crate::engine::lab::rack::RackError;
use crate::scenario::{BmcKind, BootBehaviour, Scenario};
use rackproof_lab::image_server::ImageServerError;
use rackproof_qemu::QemuError;

/// Node `name`'s identity: who it is, where it reports and with what credential.
async fn node_identity(
    scenario: &Scenario,
    cluster: &ApiCluster,
    endpoint: &NodeEndpoint,
    name: &str,
) -> Result<NodeIdentity, BuildError> {
    let (token, client_certificate_pem, client_key_pem) =
        match cluster.node_credential(name).await? {
            NodeCredential::Token(token) => (token, String::new(), String::new()),
            NodeCredential::Certificate {
                certificate_pem,
                key_pem,
            } => (String::new(), certificate_pem, key_pem),
        };
    Ok(NodeIdentity {
        node: name.to_owned(),
        pool: scenario.first_pool().name.clone(),
        api_server: endpoint.url.clone(),
        token,
        client_certificate_pem,
        client_key_pem,
        ca_pem: endpoint.ca_pem.clone(),
        tls_server_name: endpoint.tls_server_name.clone(),
        node_labels: cluster.node_labels(),
        kubelet_version: scenario.first_pool().kubernetes.value.clone(),
        ..NodeIdentity::default()
    })
}

/// The BMC user of the emulators.
const BMC_USER: &str = "rackproof";

/// Why the lab of the node-image backends could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The image server did not start.
    #[error("failed to start the image server")]
    ImageServer(#[source] ImageServerError),
    /// The cluster did not give the nodes an endpoint or a token.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The lab's temporary directory could not be made.
    #[error("creating a temporary directory failed")]
    TempDir(#[source] std::io::Error),
    /// The lab's directory could not be opened to libvirt's QEMU user.
    #[error("opening the lab directory {} failed", path.display())]
    OpenDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The disk of the base version is missing.
    #[error(transparent)]
    Disk(rackproof_qemu::images::ImagesError),
    /// A node's QEMU machine could not be prepared.
    #[error("node {node}: prepare its QEMU machine")]
    Qemu {
        node: String,
        #[source]
        source: QemuError,
    },
    /// A node's libvirt domain could not be defined.
    #[cfg(feature = "libvirt")]
    #[error(transparent)]
    Libvirt(#[from] crate::engine::lab::guest::libvirt::LibvirtGuestError),
    /// Backend `libvirt` in a build without the `libvirt` feature.
    #[cfg(not(feature = "libvirt"))]
    #[error(
        "this build has no libvirt support ({prefix}…): build with `--features rackproof-harness/libvirt`"
    )]
    NoLibvirt { prefix: String },
    /// A node's BMC emulator could not be started or reached.
    #[error("node {node}: {action}")]
    Bmc {
        node: String,
        action: &'static str,
        #[source]
        source: Box<BmcSetupError>,
    },
    /// The inventory does not say where the nodes reach this machine.
    #[error("inventory {} has no `harness` section", inventory.display())]
    NoHarness { inventory: PathBuf },
    /// A rack server could not be reserved, reached or brought up (boxed: it is large).
    #[error(transparent)]
    Rack(#[from] Box<RackError>),
    /// The run's SSH client key or the images' host key could not be set up.
    #[error(transparent)]
    Ssh(#[from] super::services::SshSetupError),
    /// No port could be picked on 127.0.0.1 to forward a libvirt domain's SSH port to.
    #[cfg(feature = "libvirt")]
    #[error("node {node}: pick a free port on 127.0.0.1 for its SSH")]
    SshPort {
        node: String,
        #[source]
        source: std::io::Error,
    },
    /// The inventory entry of a rack server has no usable SSH endpoint.
    #[error(transparent)]
    RackSsh(#[from] rackproof_lab::physical::DeliveryError),
    /// The scenario's broken images could not be handed to a node.
    #[error(transparent)]
    Node(#[from] ImageNodeError),
}

/// What failed while a node's BMC emulator was set up (the step is [`BuildError::Bmc`]'s action).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BmcSetupError {
    #[error(transparent)]
    RedfishConfig(#[from] rackproof_redfish::ConfigError),
    #[error(transparent)]
    RedfishServe(#[from] rackproof_redfish::ServeError),
    #[error(transparent)]
    WriteCa(#[from] std::io::Error),
    #[error(transparent)]
    IpmiCredentials(#[from] rackproof_ipmi::CredentialsError),
    #[error(transparent)]
    IpmiServe(#[from] rackproof_ipmi::EmulatorError),
    #[error(transparent)]
    Connect(#[from] rackproof_lab::bmc::BmcError),
}

impl ImageLab {
    /// Starts the HTTPS endpoint and the image server over `images` (from [`Self::images`]), and
    /// prepares every node, a guest of `kind`, powered off with the base version installed.
    pub(crate) async fn build(
        scenario: &Scenario,
        kind: GuestKind,
        images: Images,
        cluster: &ApiCluster,
        clock: &Clock,
    ) -> Result<Self, BuildError> {
        let base = scenario.first_pool().os.value.clone();
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let image_server = ImageServer::serve(images.dir().join("slots"), loopback)
            .await
            .map_err(BuildError::ImageServer)?;
        let https = cluster
            .node_endpoint(loopback, HOST_ALIAS)
            .await
            .map_err(BuildError::Cluster)?;
        let dir =
            rackproof_reap::owned_tempdir("rackproof-qemu-lab-").map_err(BuildError::TempDir)?;
        // libvirt's QEMU (user libvirt-qemu) reaches its node directories through this one.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .map_err(|source| BuildError::OpenDir {
            path: dir.path().to_owned(),
            source,
        })?;
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
        let disk = images.disk(&base).map_err(BuildError::Disk)?;
        let ssh = super::services::GuestSsh::new(dir.path(), &images)?;

        let mut nodes = BTreeMap::new();
        for name in scenario.lab.node_names() {
            let identity = NodeIdentity {
                ssh_authorized_key: ssh.authorized_key.clone(),
                ..node_identity(scenario, cluster, &https, &name).await?
            };
            let (machine, ssh_port) = match kind {
                GuestKind::Qemu => {
                    let config = QemuConfig {
                        identity: identity.clone(),
                        ..QemuConfig::new(&name, &disk)
                    };
                    let machine = QemuMachine::create(config, clock.clone()).map_err(|source| {
                        BuildError::Qemu {
                            node: name.clone(),
                            source,
                        }
                    })?;
                    let port = machine.ssh_port();
                    (Guest::Qemu(Arc::new(machine)), port)
                }
                #[cfg(feature = "libvirt")]
                GuestKind::Libvirt => {
                    let port =
                        rackproof_std::free_tcp_port().map_err(|source| BuildError::SshPort {
                            node: name.clone(),
                            source,
                        })?;
                    let guest = crate::engine::lab::guest::libvirt::LibvirtGuest::define(
                        &name,
                        &domain_prefix,
                        dir.path(),
                        &disk,
                        &identity,
                        port,
                        clock,
                    )
                    .await?;
                    (Guest::Libvirt(guest), port)
                }
                #[cfg(not(feature = "libvirt"))]
                GuestKind::Libvirt => {
                    return Err(BuildError::NoLibvirt {
                        prefix: domain_prefix,
                    });
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
                    ssh: ssh.target(ssh_port),
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
    ) -> Result<Self, BuildError> {
        let harness =
            inventory
                .inventory
                .harness
                .as_ref()
                .ok_or_else(|| BuildError::NoHarness {
                    inventory: inventory.path.clone(),
                })?;
        let base = scenario.first_pool().os.value.clone();
        let listen = SocketAddr::new(harness.listen, 0);
        let image_server = ImageServer::serve(images.dir().join("slots"), listen)
            .await
            .map_err(BuildError::ImageServer)?;
        let https = cluster
            .node_endpoint(listen, &harness.address)
            .await
            .map_err(BuildError::Cluster)?;
        let mut nodes = BTreeMap::new();
        for name in scenario.lab.node_names() {
            let rack = crate::engine::lab::rack::open(inventory, &name, clock)
                .await
                .map_err(Box::new)?;
            let kind = rack
                .description
                .bmc
                .as_ref()
                .map_or(LabBmcKind::Redfish, |b| b.kind);
            let identity = node_identity(scenario, cluster, &https, &name).await?;
            let bmc = rack.bmc.clone();
            let ssh = rackproof_lab::physical::ssh_target(&rack.description)?;
            nodes.insert(
                name,
                ImageNode {
                    machine: Guest::Rack(Box::new(rack)),
                    bmc,
                    served: Served::Rack(kind),
                    identity,
                    installed: Mutex::new(base.clone()),
                    ssh,
                },
            );
        }
        futures::future::try_join_all(
            nodes.iter().map(|(name, node)| {
                crate::engine::lab::rack::ensure_up(name, &node.machine, clock)
            }),
        )
        .await
        .map_err(Box::new)?;
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
    ) -> Result<Self, BuildError> {
        let lab = Self {
            nodes,
            images,
            image_server: serving.image_server,
            cluster: cluster.clone(),
            _https: serving.https,
            clock: clock.clone(),
            pool: scenario.first_pool().name.clone(),
            new_version: Self::update_target(scenario),
            base_version: scenario.first_pool().os.value.clone(),
            node_address: serving.node_address,
            _dir: serving.dir,
        };
        for image in scenario
            .images
            .iter()
            .filter(|i| i.boot != BootBehaviour::Ok)
        {
            for name in lab.nodes.keys() {
                lab.node_build(name, &image.version, &image.boot)?;
            }
        }
        Ok(lab)
    }
}

/// Starts the node's BMC emulator on 127.0.0.1 and connects the lab's BMC client to it.
async fn serve_bmc(
    name: &str,
    kind: BmcKind,
    machine: SharedMachine,
    dir: &Path,
    clock: &Clock,
) -> Result<(SharedMachine, Served), BuildError> {
    use rand::Rng as _;
    let password: String = rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect();
    let credentials = BmcCredentials::new(BMC_USER, password.clone());
    let shared = machine;
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let fail = |action: &'static str, source: BmcSetupError| BuildError::Bmc {
        node: name.to_owned(),
        action,
        source: Box::new(source),
    };
    let (description, served) = match kind {
        BmcKind::Redfish => {
            let emulator = Emulator::new(EmulatorConfig {
                name: name.to_owned(),
                ..EmulatorConfig::single(shared, BMC_USER, &password, clock.clone())
            })
            .map_err(|e| fail("set up the Redfish emulator", e.into()))?;
            let running = emulator
                .serve_https(loopback)
                .await
                .map_err(|e| fail("start the Redfish emulator", e.into()))?;
            let ca_path = dir.join(format!("{name}-redfish-ca.pem"));
            std::fs::write(&ca_path, running.ca_pem().unwrap_or_default())
                .map_err(|e| fail("write the Redfish CA", e.into()))?;
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
                .map_err(|e| fail("IPMI credentials", e.into()))?;
            let emulator = rackproof_ipmi::IpmiEmulator::start_with(
                shared,
                rackproof_ipmi::BmcConfig {
                    name: name.to_owned(),
                    ..rackproof_ipmi::BmcConfig::new(ipmi_credentials)
                },
                loopback,
                clock.clone(),
            )
            .await
            .map_err(|e| fail("start the IPMI emulator", e.into()))?;
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
    .map_err(|e| fail("connect to its BMC", e.into()))?;
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
