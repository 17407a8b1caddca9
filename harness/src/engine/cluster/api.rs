//! The run's Kubernetes API, as the scenario's `cluster` picks it:
//! - `embedded`: Rackproof's own API server, in the process and on the run's clock;
//! - `local`: a real control plane (etcd, kube-apiserver and kube-controller-manager v1.20.2, see
//!   [`rackproof_cluster::local`]) on this machine, on the wall clock. Node credentials are
//!   confined as in a real cluster: Node authorizer and NodeRestriction, and the authorization
//!   webhook of [`node_authorizer`](super::node_authorizer) for the pool's OSC Secret;
//! - `kubeconfig`: an existing cluster, shared: the run owns what it labels
//!   ([`existing`](super::existing)).
//!
//! The rest of the engine asks this for clients, node credentials, the endpoint nodes reach and
//! the controller manager's switch, and never which kind it has.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::Client;
use rackproof_apiserver::{ApiServer, HttpsServer, User};
use rackproof_clock::Clock;
use rackproof_cluster::local::{self, ControllerManagerOptions, LocalControlPlane, LocalOptions};

use crate::engine::cluster::existing::{ExistingCluster, ExistingError, Ownership};
use crate::engine::cluster::node_authorizer;
use crate::engine::lab::provider::OscLocation;
use crate::scenario::Scenario;

/// What went wrong with the run's cluster. Read with its sources
/// ([`rackproof_std::error_chain`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClusterError {
    #[error("starting the local control plane failed")]
    Start(#[source] local::Error),
    #[error("kube-apiserver's URL {0} has no port")]
    NoPort(String),
    #[error("reading the control plane's CA {path} failed")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the local control plane's credentials failed")]
    Credentials(#[source] local::Error),
    #[error("the local control plane was shut down")]
    ShutDown,
    #[error("node {node}'s client")]
    NodeClient {
        node: String,
        #[source]
        source: local::Error,
    },
    #[error("the local control plane has no identity for node {0}")]
    NoIdentity(String),
    #[error("the existing cluster")]
    Existing(#[source] ExistingError),
    #[error("serving the API over HTTPS {purpose} failed")]
    Serve {
        purpose: &'static str,
        #[source]
        source: rackproof_apiserver::ServeError,
    },
}

/// The local control plane's processes whose logs become `components/<name>.log`.
const LOGS: [&str; 3] = ["kube-apiserver", "kube-controller-manager", "etcd"];

/// The run's API: the embedded server or a local control plane.
#[derive(Clone)]
pub(crate) enum ApiCluster {
    Embedded(ApiServer),
    Local(Arc<LocalCluster>),
    Existing(Arc<ExistingCluster>),
}

impl std::fmt::Debug for ApiCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Embedded(_) => f.write_str("ApiCluster::Embedded"),
            Self::Local(local) => write!(f, "ApiCluster::Local({})", local.dir.display()),
            Self::Existing(existing) => write!(f, "ApiCluster::Existing({existing:?})"),
        }
    }
}

/// How a node proves who it is to the API.
pub(crate) enum NodeCredential {
    /// A bearer token (the embedded server, a local control plane).
    Token(String),
    /// A client certificate and its key, both PEM (an existing cluster signs them).
    Certificate {
        certificate_pem: String,
        key_pem: String,
    },
}

/// A running local control plane and what the run reads from it once.
pub(crate) struct LocalCluster {
    /// Locked to stop and start kube-controller-manager, and to shut down.
    plane: Arc<tokio::sync::Mutex<Option<LocalControlPlane>>>,
    client: Client,
    port: u16,
    ca_pem: String,
    /// Node → bearer token.
    node_tokens: BTreeMap<String, String>,
    /// The administrator's bearer token (in `admin_kubeconfig`).
    admin_token: String,
    admin_kubeconfig: PathBuf,
    /// The control plane's directory, with its processes' logs.
    dir: PathBuf,
}

/// Where nodes reach the API: its URL as they see it, the CA to trust and the name to verify
/// the server's certificate as (empty: the URL's host).
#[derive(Debug)]
pub(crate) struct NodeEndpoint {
    pub(crate) url: String,
    pub(crate) ca_pem: String,
    pub(crate) tls_server_name: String,
    /// The embedded server's HTTPS listener, served while this lives.
    _https: Option<HttpsServer>,
}

/// Switches the real kube-controller-manager off and on, in the order asked (the control plane's
/// lock is fair, so switches take effect in the order they were made).
#[derive(Clone)]
pub(crate) struct ControllerManagerSwitch(Arc<tokio::sync::Mutex<Option<LocalControlPlane>>>);

impl std::fmt::Debug for ControllerManagerSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControllerManagerSwitch")
    }
}

impl ControllerManagerSwitch {
    /// Starts it (no-op when it runs); reports a failure into `failed`.
    pub(crate) fn start(&self, failed: impl FnOnce(String) + Send + 'static) {
        let plane = self.0.clone();
        tokio::spawn(async move {
            if let Some(plane) = plane.lock().await.as_mut()
                && let Err(e) = plane.start_controller_manager().await
            {
                failed(rackproof_std::error_chain(&e));
            }
        });
    }

    /// Stops it (no-op when it is stopped).
    pub(crate) fn stop(&self) {
        let plane = self.0.clone();
        tokio::spawn(async move {
            if let Some(plane) = plane.lock().await.as_mut()
                && let Err(e) = plane.stop_controller_manager().await
            {
                tracing::warn!(error = %rackproof_std::error_chain(&e), "stopping kube-controller-manager failed");
            }
        });
    }
}

impl ApiCluster {
    /// The embedded server on `clock`.
    pub(crate) fn embedded(clock: &Clock, seed: u64) -> Self {
        Self::Embedded(ApiServer::with_watch_window(
            clock.clone(),
            rackproof_apiserver::DEFAULT_WATCH_WINDOW,
            seed,
        ))
    }

    /// A local control plane with identities for the scenario's nodes, kube-apiserver listening
    /// on `listen` with a certificate also valid for `names` (how nodes address this machine),
    /// and kube-controller-manager with the scenario's node-monitor grace period.
    pub(crate) async fn local(
        scenario: &Scenario,
        listen: std::net::IpAddr,
        names: &[&str],
    ) -> Result<Self, ClusterError> {
        let grace = scenario.watchdog.kcm_node_monitor_grace_duration.get();
        let controller_manager = ControllerManagerOptions {
            node_monitor_grace_period: grace,
            node_monitor_period: (grace / 8).max(std::time::Duration::from_millis(500)),
            ..ControllerManagerOptions::default()
        };
        let admin = Arc::new(std::sync::OnceLock::new());
        let options = LocalOptions {
            listen,
            serving_names: names.iter().map(|n| (*n).to_owned()).collect(),
            node_authorizer: Some(node_authorizer::authorizer(admin.clone())),
            ..LocalOptions::default()
                .with_nodes(scenario.lab.node_names())
                .with_controller_manager(controller_manager)
        };
        let plane = LocalControlPlane::start(options)
            .await
            .map_err(ClusterError::Start)?;
        let client = plane.client();
        let _ = admin.set(client.clone());
        let port = plane
            .url()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| ClusterError::NoPort(plane.url().to_owned()))?;
        let ca_pem =
            std::fs::read_to_string(plane.ca_cert()).map_err(|source| ClusterError::ReadCa {
                path: plane.ca_cert().to_owned(),
                source,
            })?;
        let mut node_tokens = BTreeMap::new();
        for node in scenario.lab.node_names() {
            let user = local::User::node(&node);
            let token = plane
                .token(&user)
                .map_err(ClusterError::Credentials)?
                .to_owned();
            node_tokens.insert(node, token);
        }
        let admin_kubeconfig = plane
            .kubeconfig(&local::User::Admin)
            .map_err(ClusterError::Credentials)?;
        let admin_token = plane
            .token(&local::User::Admin)
            .map_err(ClusterError::Credentials)?
            .to_owned();
        let dir = plane.dir().to_owned();
        Ok(Self::Local(Arc::new(LocalCluster {
            plane: Arc::new(tokio::sync::Mutex::new(Some(plane))),
            client,
            port,
            ca_pem,
            node_tokens,
            admin_token,
            admin_kubeconfig,
            dir,
        })))
    }

    /// An existing cluster through `kubeconfig`, taken for run `owner` whose nodes are `nodes`
    /// (see [`ExistingCluster::take`]).
    pub(crate) async fn existing(
        kubeconfig: &Path,
        owner: Ownership,
        nodes: &[String],
    ) -> Result<Self, ClusterError> {
        ExistingCluster::take(kubeconfig, owner, nodes)
            .await
            .map(|existing| Self::Existing(Arc::new(existing)))
            .map_err(ClusterError::Existing)
    }

    /// An administrator's client.
    pub(crate) fn client(&self) -> Client {
        match self {
            Self::Embedded(server) => server.admin_client(),
            Self::Local(local) => local.client.clone(),
            Self::Existing(existing) => existing.client(),
        }
    }

    /// The labels of the objects the run makes: its own on an existing cluster, none where the
    /// whole cluster is the run's.
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        match self {
            Self::Existing(existing) => existing.owner().labels(),
            Self::Embedded(_) | Self::Local(_) => BTreeMap::new(),
        }
    }

    /// The labels the run's nodes register their Nodes with: the run's label alone, since
    /// NodeRestriction keeps nodes from setting `kubernetes.io` labels such as
    /// `app.kubernetes.io/managed-by`.
    pub(crate) fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.retain(|key, _| key == crate::engine::cluster::existing::RUN_LABEL);
        labels
    }

    /// What taking the cluster swept and used, one sentence each (for the timeline).
    pub(crate) fn notes(&self) -> Vec<String> {
        match self {
            Self::Existing(existing) => existing.notes().to_vec(),
            Self::Embedded(_) | Self::Local(_) => Vec::new(),
        }
    }

    /// A client with node `name`'s credential (in-process nodes of backend `sim`).
    pub(crate) async fn node_client(&self, name: &str) -> Result<Client, ClusterError> {
        match self {
            Self::Embedded(server) => Ok(server.node_client(name)),
            Self::Local(local) => {
                let plane = local.plane.lock().await;
                let plane = plane.as_ref().ok_or(ClusterError::ShutDown)?;
                plane
                    .client_as(&local::User::node(name))
                    .await
                    .map_err(|source| ClusterError::NodeClient {
                        node: name.to_owned(),
                        source,
                    })
            }
            Self::Existing(existing) => existing
                .node_client(name)
                .await
                .map_err(ClusterError::Existing),
        }
    }

    /// Node `name`'s credential, for a node that reaches the API over HTTPS.
    pub(crate) async fn node_credential(&self, name: &str) -> Result<NodeCredential, ClusterError> {
        match self {
            Self::Embedded(server) => {
                Ok(NodeCredential::Token(server.issue_token(User::node(name))))
            }
            Self::Local(local) => local
                .node_tokens
                .get(name)
                .cloned()
                .map(NodeCredential::Token)
                .ok_or_else(|| ClusterError::NoIdentity(name.to_owned())),
            Self::Existing(existing) => {
                let (certificate_pem, key_pem) = existing
                    .node_certificate(name)
                    .await
                    .map_err(ClusterError::Existing)?;
                Ok(NodeCredential::Certificate {
                    certificate_pem,
                    key_pem,
                })
            }
        }
    }

    /// The HTTPS endpoint nodes reach, who reach this machine as `address`: the embedded
    /// server's, served on `listen`; a local control plane's, which listens where it was started;
    /// an existing cluster's, from its kubeconfig (a server on this machine's loopback is reached
    /// as `address` when `listen` is loopback too, as QEMU's user network maps it).
    pub(crate) async fn node_endpoint(
        &self,
        listen: SocketAddr,
        address: &str,
    ) -> Result<NodeEndpoint, ClusterError> {
        match self {
            Self::Embedded(server) => {
                let https = server
                    .serve_https_also_as(listen, &[address])
                    .await
                    .map_err(|source| ClusterError::Serve {
                        purpose: "for the nodes",
                        source,
                    })?;
                Ok(NodeEndpoint {
                    url: format!("https://{address}:{}", https.addr().port()),
                    ca_pem: https.ca_pem().to_owned(),
                    tls_server_name: String::new(),
                    _https: Some(https),
                })
            }
            Self::Local(local) => Ok(NodeEndpoint {
                url: format!("https://{address}:{}", local.port),
                ca_pem: local.ca_pem.clone(),
                tls_server_name: String::new(),
                _https: None,
            }),
            Self::Existing(existing) => {
                let endpoint = existing
                    .node_endpoint(address, listen.ip().is_loopback())
                    .map_err(ClusterError::Existing)?;
                Ok(NodeEndpoint {
                    url: endpoint.url,
                    ca_pem: endpoint.ca_pem,
                    tls_server_name: endpoint.tls_server_name,
                    _https: None,
                })
            }
        }
    }

    /// The provider bound node `name` to a Machine of `pool` whose OSC is `osc`. The embedded
    /// server is told; a local control plane's webhook reads it from the Machine; an existing
    /// cluster gets a Role and RoleBinding for the pool.
    pub(crate) fn confine_node(&self, name: &str, pool: &str, osc: &OscLocation) {
        match self {
            Self::Embedded(server) => {
                server.bind_node_to_pool(name, pool);
                server.allow_node_secret(pool, &osc.namespace, &osc.name);
            }
            Self::Local(_) => {}
            Self::Existing(existing) => existing.confine_node(name, pool, osc),
        }
    }

    /// An admin kubeconfig in `dir` for programs outside the run, and the listener it names (the
    /// embedded server's, served while it lives).
    pub(crate) async fn outside_kubeconfig(
        &self,
        dir: &Path,
    ) -> Result<(PathBuf, Option<HttpsServer>), ClusterError> {
        match self {
            Self::Embedded(server) => {
                let loopback = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
                let serve = |source| ClusterError::Serve {
                    purpose: "for outside programs",
                    source,
                };
                let https = server.serve_https(loopback).await.map_err(serve)?;
                let kubeconfig = dir.join("admin.kubeconfig");
                https
                    .write_kubeconfig(&kubeconfig, &User::admin())
                    .map_err(serve)?;
                Ok((kubeconfig, Some(https)))
            }
            Self::Local(local) => Ok((local.admin_kubeconfig.clone(), None)),
            Self::Existing(existing) => Ok((existing.kubeconfig().to_owned(), None)),
        }
    }

    /// The bearer tokens this cluster accepts for the run's users (nodes, the administrator).
    pub(crate) fn credentials(&self) -> Vec<String> {
        match self {
            Self::Embedded(server) => server.bearer_tokens(),
            Self::Local(local) => local
                .node_tokens
                .values()
                .chain([&local.admin_token])
                .cloned()
                .collect(),
            // The keys handed to guests; the kubeconfig is the user's.
            Self::Existing(existing) => existing.issued_keys(),
        }
    }

    /// The real kube-controller-manager's switch; `None` on the embedded server, whose node
    /// lifecycle is Rackproof's stand-in. An existing cluster's controller manager is its own:
    /// the switch is there (so no stand-in runs) but turns nothing.
    pub(crate) fn controller_manager(&self) -> Option<ControllerManagerSwitch> {
        match self {
            Self::Embedded(_) => None,
            Self::Local(local) => Some(ControllerManagerSwitch(local.plane.clone())),
            Self::Existing(_) => Some(ControllerManagerSwitch(Arc::new(tokio::sync::Mutex::new(
                None,
            )))),
        }
    }

    /// Whether Rackproof runs the stand-ins for the controllers a cluster would have and this
    /// one does not (the ReplicaSet controller and scheduler): on the embedded server and a local
    /// control plane, not on an existing cluster, which runs its own.
    pub(crate) fn runs_stand_ins(&self) -> bool {
        !matches!(self, Self::Existing(_))
    }

    /// Stops a local control plane (every process reaped, its directory removed), or removes what
    /// the run made on an existing cluster, and returns a local control plane's processes' logs, a list of lines per process (nothing for the embedded server).
    pub(crate) async fn shut_down(&self) -> Vec<(String, Vec<String>)> {
        if let Self::Existing(existing) = self {
            existing.release().await;
        }
        let Self::Local(local) = self else {
            return Vec::new();
        };
        let Some(plane) = local.plane.lock().await.take() else {
            return Vec::new();
        };
        let logs = LOGS
            .iter()
            .filter_map(|name| {
                let text = std::fs::read_to_string(local.dir.join(format!("{name}.log"))).ok()?;
                Some((
                    (*name).to_owned(),
                    text.lines().map(str::to_owned).collect(),
                ))
            })
            .collect();
        if let Err(e) = plane.shutdown().await {
            tracing::warn!(error = %rackproof_std::error_chain(&e), "shutting the local control plane down failed");
        }
        logs
    }
}
