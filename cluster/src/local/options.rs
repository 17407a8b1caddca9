//! How a local control plane is started ([`LocalOptions`]) and the users it makes credentials
//! for ([`User`]).

use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use super::{ControllerManagerOptions, NodeAuthorizer};

/// How the control plane is started. `LocalOptions::default()` suits most tests.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Nodes that get an identity: user `system:node:NAME` in group `system:nodes`.
    pub nodes: Vec<String>,
    /// kube-apiserver's `--authorization-mode` (default `Node,RBAC`).
    pub authorization_mode: String,
    /// kube-apiserver's `--enable-admission-plugins` (default `NodeRestriction`).
    pub enable_admission_plugins: Vec<String>,
    /// kube-apiserver's `--disable-admission-plugins` (default `ServiceAccount`: without a
    /// controller manager nothing creates the `default` service accounts pods would need;
    /// [`LocalOptions::with_controller_manager`] enables it again).
    pub disable_admission_plugins: Vec<String>,
    /// kube-apiserver's `--service-cluster-ip-range` (default `10.0.0.0/24`).
    pub service_cluster_ip_range: String,
    /// Where kube-apiserver listens (default 127.0.0.1; `0.0.0.0` for every interface, as a
    /// physical rack's nodes need). Its URL names this address, or 127.0.0.1 when unspecified.
    pub listen: std::net::IpAddr,
    /// More names kube-apiserver's serving certificate is valid for, beside 127.0.0.1,
    /// `localhost` and the `kubernetes.default…` names (e.g. the name guests reach the host by).
    pub serving_names: Vec<String>,
    /// The authorization webhook kube-apiserver consults after its Node authorizer (the mode
    /// becomes `Node,Webhook,RBAC`); see [`NodeAuthorizer`]. Default: none.
    pub node_authorizer: Option<NodeAuthorizer>,
    /// More kube-apiserver flags, appended last (`--flag=value`).
    pub extra_apiserver_args: Vec<String>,
    /// How long startup may take until `/readyz` says `ok` (default 90 s).
    pub startup_timeout: Duration,
    /// The kube-apiserver binary (default: `RACKPROOF_KUBE_APISERVER`, else the build cache).
    pub kube_apiserver: Option<PathBuf>,
    /// The etcd binary (default: `RACKPROOF_ETCD`, else `etcd` on `PATH`).
    pub etcd: Option<PathBuf>,
    /// Run kube-controller-manager as well (default: no, so the API server answers alone, as the
    /// differential tests need). Set it with [`LocalOptions::with_controller_manager`].
    pub controller_manager: Option<ControllerManagerOptions>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            authorization_mode: "Node,RBAC".to_owned(),
            enable_admission_plugins: vec!["NodeRestriction".to_owned()],
            disable_admission_plugins: vec!["ServiceAccount".to_owned()],
            service_cluster_ip_range: "10.0.0.0/24".to_owned(),
            listen: Ipv4Addr::LOCALHOST.into(),
            serving_names: Vec::new(),
            node_authorizer: None,
            extra_apiserver_args: Vec::new(),
            startup_timeout: Duration::from_secs(90),
            kube_apiserver: None,
            etcd: None,
            controller_manager: None,
        }
    }
}

impl LocalOptions {
    /// These options with identities for `nodes`.
    pub fn with_nodes<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes.extend(nodes.into_iter().map(Into::into));
        self
    }

    /// These options with kube-controller-manager running `options`, and with kube-apiserver's
    /// `ServiceAccount` admission plugin enabled again: the controller manager's service-account
    /// controllers make the `default` ServiceAccount and its token in every namespace, as in a
    /// real cluster. A pod created in a namespace before they did is refused (Forbidden while the
    /// account is missing, ServerTimeout "No API token found … retry after the token is
    /// automatically created" while its token is), as a real cluster refuses it.
    pub fn with_controller_manager(mut self, options: ControllerManagerOptions) -> Self {
        self.disable_admission_plugins
            .retain(|plugin| plugin != "ServiceAccount");
        self.controller_manager = Some(options);
        self
    }
}

/// An identity of the control plane's token file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum User {
    /// `admin`, in group `system:masters`.
    Admin,
    /// `system:node:NAME`, in group `system:nodes`, for a node of [`LocalOptions::nodes`].
    Node(String),
    /// `system:kube-controller-manager`, the identity kube-apiserver's bootstrap RBAC binds the
    /// `system:kube-controller-manager` ClusterRole to; only when a controller manager runs.
    ControllerManager,
}

impl User {
    /// The user a node agent on `name` authenticates as.
    pub fn node(name: impl Into<String>) -> Self {
        Self::Node(name.into())
    }

    pub(super) fn file_stem(&self) -> String {
        match self {
            Self::Admin => "admin".to_owned(),
            Self::Node(name) => format!("node-{name}"),
            Self::ControllerManager => "kube-controller-manager".to_owned(),
        }
    }
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admin => f.write_str("admin"),
            Self::Node(name) => write!(f, "system:node:{name}"),
            Self::ControllerManager => f.write_str("system:kube-controller-manager"),
        }
    }
}
