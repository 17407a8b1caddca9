//! An existing cluster reached through a kubeconfig (`cluster: {kubeconfig: PATH}`), which the
//! run shares with whatever else lives there. The run owns what it labels and nothing else:
//!
//! 1. It reads the kubeconfig (the identity it names must be allowed to create namespaces,
//!    Nodes, CRDs and CertificateSigningRequests, and to approve the latter: a cluster admin).
//! 2. It sweeps what runs killed outright left (their Lease `rackproof/rackproof-run` expired:
//!    see [`sweep`]), then checks that no name it will create (its two namespaces, its Nodes,
//!    the image catalog, CRDs with another definition) is taken by an object it does not own;
//!    a clash refuses the run before anything is created.
//! 3. It creates its namespaces and holds its Lease (renewed every 5 s, 15 s long), and labels
//!    every object it makes `app.kubernetes.io/managed-by=rackproof` and `rackproof.dev/run=ID`;
//!    its nodes register their Nodes with those labels.
//! 4. Node identities are client certificates: a CertificateSigningRequest per node for
//!    `system:node:NAME` in `system:nodes`, signer `kubernetes.io/kube-apiserver-client-kubelet`,
//!    approved by the run and signed by the cluster (its kube-controller-manager), so the Node
//!    authorizer and NodeRestriction confine the nodes as a kubelet is confined. The pool's OSC
//!    Secret is readable by the pool's nodes through a Role and RoleBinding per pool. Guests
//!    get the key and certificate in their identity, and reach a server on this machine's
//!    loopback as QEMU's user network maps it ([`ExistingCluster::node_endpoint`]).
//! 5. At the end (pass, fail, timeout, Ctrl-C, SIGTERM) it removes everything labelled with its
//!    run ([`sweep::remove`]) and waits until it is gone.
//!
//! The cluster's own kube-controller-manager does the controller work; Rackproof's stand-ins do
//! not run, and the watchdog scaling the `kube-controller-manager` Deployment scales the run's
//! placeholder, never the cluster's controller manager.

pub(crate) mod sweep;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use rackproof_clock::Clock;
use rackproof_std::LockExt;

use crate::engine::lab::provider::OscLocation;

/// The label naming the tool that made an object.
pub(crate) const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// [`MANAGED_BY`]'s value.
pub(crate) const RACKPROOF: &str = "rackproof";
/// The label naming the run that made an object.
pub(crate) const RUN_LABEL: &str = "rackproof.dev/run";
/// The signer of kubelet client certificates.
const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// How long the cluster may take to sign a node's certificate.
const SIGNING: Duration = Duration::from_secs(60);
/// How long granting a pool's nodes their OSC Secret is retried.
const GRANTING: Duration = Duration::from_secs(60);

/// What went wrong with an existing cluster.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExistingError {
    #[error("failed to read kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("failed to make a client from kubeconfig {}", path.display())]
    Client {
        path: PathBuf,
        #[source]
        source: kube::Error,
    },
    #[error("failed to {what}")]
    Request {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the cluster has objects the run would create, not made by Rackproof; the run touched nothing:\n  - {}",
        clashes.join("\n  - ")
    )]
    Clash { clashes: Vec<String> },
    #[error(
        "run {run} holds the cluster (its Lease rackproof/rackproof-run is renewed); wait until it ends, or run against another cluster"
    )]
    Held { run: String },
    #[error("failed to make node {node}'s key or certificate request")]
    Key {
        node: String,
        #[source]
        source: rcgen::Error,
    },
    #[error(
        "the cluster signed no certificate for node {node} within {within} (CertificateSigningRequest {csr}, signer {KUBELET_CLIENT_SIGNER}, approved by the run): its kube-controller-manager must run the csrsigning controller (`--cluster-signing-cert-file`, `--cluster-signing-key-file`)"
    )]
    NotSigned {
        node: String,
        csr: String,
        within: String,
    },
    #[error(
        "kubeconfig {} names no CA for its server {url} (certificate-authority or certificate-authority-data): the run's nodes verify the server they report to; add the cluster's CA to the kubeconfig",
        kubeconfig.display()
    )]
    NoCa { kubeconfig: PathBuf, url: String },
    #[error(
        "the cluster's API server {url} listens on this machine's loopback address, which the rack's nodes cannot reach (they reach this machine as {address}); use a kubeconfig whose server address the nodes can reach"
    )]
    Unreachable { url: String, address: String },
    #[error("node {node}'s client from its signed certificate")]
    NodeClient {
        node: String,
        #[source]
        source: kube::Error,
    },
}

/// The run's name on the cluster, and the labels of what it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ownership {
    pub(crate) run: String,
}

impl Ownership {
    pub(crate) fn new(run: impl Into<String>) -> Self {
        Self { run: run.into() }
    }

    /// The labels every object of the run carries.
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY.to_owned(), RACKPROOF.to_owned()),
            (RUN_LABEL.to_owned(), self.run.clone()),
        ])
    }

    /// The label selector of the run's objects.
    pub(crate) fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.run)
    }
}

/// A client from kubeconfig `path` (its current context), and the configuration it came from.
pub(crate) async fn connect(path: &Path) -> Result<(Client, Config), ExistingError> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|source| ExistingError::Kubeconfig {
        path: path.to_owned(),
        source,
    })?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| ExistingError::Kubeconfig {
            path: path.to_owned(),
            source,
        })?;
    // kube picks rustls' process-wide provider; make it ring whatever else is linked in.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
    let client = Client::try_from(config.clone()).map_err(|source| ExistingError::Client {
        path: path.to_owned(),
        source,
    })?;
    Ok((client, config))
}

/// Where a run's guests reach an existing cluster's API server.
pub(crate) struct ExistingEndpoint {
    /// The server's URL as the guests see it.
    pub(crate) url: String,
    /// The CA the kubeconfig trusts (PEM).
    pub(crate) ca_pem: String,
    /// The name to verify the server's certificate as (empty: the URL's host).
    pub(crate) tls_server_name: String,
}

/// Who may read which OSC Secrets of one pool: the Secrets (namespace, name) and the nodes.
type OscAccess = (BTreeSet<(String, String)>, BTreeSet<String>);

/// A run's hold on an existing cluster.
pub(crate) struct ExistingCluster {
    client: Client,
    config: Config,
    kubeconfig: PathBuf,
    owner: Ownership,
    clock: Clock,
    /// What the start swept and used, for the timeline.
    notes: Vec<String>,
    /// Renews the run's Lease while it lives.
    renewal: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Pool → (OSC Secrets, nodes) its Role and RoleBinding name.
    confined: Arc<Mutex<BTreeMap<String, OscAccess>>>,
    /// Held while a pool's access is applied, so applies happen one at a time, each with the
    /// access as it is when its turn comes (the last one has every node).
    applying: Arc<tokio::sync::Mutex<()>>,
    /// The private keys of the node certificates handed to guests (checked for in artifacts).
    issued_keys: Mutex<Vec<String>>,
}

impl std::fmt::Debug for ExistingCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExistingCluster")
            .field("kubeconfig", &self.kubeconfig)
            .field("run", &self.owner.run)
            .finish_non_exhaustive()
    }
}

impl ExistingCluster {
    /// Connects, sweeps what killed runs left, refuses clashes with `nodes` and the run's other
    /// names, and takes the cluster for run `owner` (see the module docs, steps 1–3).
    pub(crate) async fn take(
        kubeconfig: &Path,
        owner: Ownership,
        nodes: &[String],
    ) -> Result<Self, ExistingError> {
        let (client, config) = connect(kubeconfig).await?;
        let clock = Clock::wall();
        let mut notes = sweep::sweep(&client, &clock, &owner).await?;
        notes.extend(sweep::check_clashes(&client, nodes).await?);
        sweep::hold(&client, &clock, &owner).await?;
        let renewal = tokio::spawn(sweep::renew(client.clone(), clock.clone(), owner.clone()));
        Ok(Self {
            client,
            config,
            kubeconfig: kubeconfig.to_owned(),
            owner,
            clock,
            notes,
            renewal: Mutex::new(Some(renewal)),
            confined: Arc::default(),
            applying: Arc::default(),
            issued_keys: Mutex::default(),
        })
    }

    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub(crate) fn owner(&self) -> &Ownership {
        &self.owner
    }

    /// What the start swept and used, one sentence each.
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Stops renewing the Lease and removes everything the run made.
    pub(crate) async fn release(&self) {
        if let Some(renewal) = self.renewal.locked().take() {
            renewal.abort();
        }
        if let Err(e) = sweep::remove(&self.client, &self.clock, &self.owner).await {
            tracing::warn!(error = %rackproof_std::error_chain(&e), run = %self.owner.run, "removing the run's objects failed");
        }
    }

    /// A client as node `name` (an in-process node), with [`Self::sign_node`]'s certificate.
    pub(crate) async fn node_client(&self, name: &str) -> Result<Client, ExistingError> {
        let (certificate, key) = self.sign_node(name).await?;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
        let mut config = self.config.clone();
        config.auth_info = serde_json::from_value(serde_json::json!({
            "client-certificate-data": encode(&certificate),
            "client-key-data": encode(&key),
        }))
        .map_err(|e| ExistingError::NodeClient {
            node: name.to_owned(),
            source: kube::Error::SerdeError(e),
        })?;
        Client::try_from(config).map_err(|source| ExistingError::NodeClient {
            node: name.to_owned(),
            source,
        })
    }

    /// Node `name`'s certificate and key (PEM), for a guest that reports from its own OS; the
    /// key is kept to be checked for in the run's artifacts ([`Self::issued_keys`]).
    pub(crate) async fn node_certificate(
        &self,
        name: &str,
    ) -> Result<(String, String), ExistingError> {
        let (certificate, key) = self.sign_node(name).await?;
        self.issued_keys.locked().push(key.clone());
        Ok((certificate, key))
    }

    /// The private keys handed to guests.
    pub(crate) fn issued_keys(&self) -> Vec<String> {
        self.issued_keys.locked().clone()
    }

    /// Where guests reach the API server, who reach this machine as `address`, its loopback too
    /// when `loopback_reachable` (QEMU's user network): a server on this machine's loopback is
    /// reached there, its certificate verified as the kubeconfig's host.
    pub(crate) fn node_endpoint(
        &self,
        address: &str,
        loopback_reachable: bool,
    ) -> Result<ExistingEndpoint, ExistingError> {
        guest_endpoint(&self.config, &self.kubeconfig, address, loopback_reachable)
    }

    /// A key made here for node `name`, and its certificate signed by the cluster (both PEM).
    async fn sign_node(&self, name: &str) -> Result<(String, String), ExistingError> {
        let key_error = |source| ExistingError::Key {
            node: name.to_owned(),
            source,
        };
        let key = rcgen::KeyPair::generate().map_err(key_error)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(key_error)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("system:node:{name}"));
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let request = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .map_err(key_error)?;
        let csr_name = format!("rackproof-{}-{name}", self.owner.run);
        let csr = CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(csr_name.clone()),
                labels: Some(self.owner.labels()),
                ..ObjectMeta::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(request.into_bytes()),
                signer_name: KUBELET_CLIENT_SIGNER.to_owned(),
                usages: Some(
                    ["digital signature", "key encipherment", "client auth"]
                        .map(str::to_owned)
                        .to_vec(),
                ),
                ..CertificateSigningRequestSpec::default()
            },
            status: None,
        };
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let request = |what: &str| {
            let what = format!("{what} CertificateSigningRequest {csr_name}");
            move |source| ExistingError::Request { what, source }
        };
        api.create(&PostParams::default(), &csr)
            .await
            .map_err(request("create"))?;
        let approval = CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                conditions: Some(vec![CertificateSigningRequestCondition {
                    type_: "Approved".to_owned(),
                    status: "True".to_owned(),
                    reason: Some("RackproofRun".to_owned()),
                    message: Some(format!("node {name} of Rackproof run {}", self.owner.run)),
                    ..CertificateSigningRequestCondition::default()
                }]),
                certificate: None,
            }),
            ..csr
        };
        api.patch_approval(
            &csr_name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "status": approval.status })),
        )
        .await
        .map_err(request("approve"))?;
        let started = self.clock.instant();
        let certificate = loop {
            let got = api.get(&csr_name).await.map_err(request("read"))?;
            if let Some(cert) = got.status.and_then(|s| s.certificate) {
                break cert.0;
            }
            if self.clock.since(started) > SIGNING {
                return Err(ExistingError::NotSigned {
                    node: name.to_owned(),
                    csr: csr_name.clone(),
                    within: rackproof_clock::format_duration(SIGNING),
                });
            }
            self.clock.sleep(Duration::from_millis(250)).await;
        };
        // The certificate is read: the request has served its purpose.
        let _ = api.delete(&csr_name, &DeleteParams::default()).await;
        Ok((
            String::from_utf8_lossy(&certificate).into_owned(),
            key.serialize_pem(),
        ))
    }

    /// Lets node `name` read `osc`, the OSC Secret of `pool`: the pool's Role names every OSC
    /// Secret it was given, its RoleBinding every node bound to it (applied in the background,
    /// one apply at a time, retried for a minute; the agent retries a read refused meanwhile).
    pub(crate) fn confine_node(&self, name: &str, pool: &str, osc: &OscLocation) {
        {
            let mut confined = self.confined.locked();
            let entry = confined.entry(pool.to_owned()).or_default();
            entry.0.insert((osc.namespace.clone(), osc.name.clone()));
            entry.1.insert(name.to_owned());
        }
        let (client, labels, pool) = (self.client.clone(), self.owner.labels(), pool.to_owned());
        let (confined, applying, clock) = (
            self.confined.clone(),
            self.applying.clone(),
            self.clock.clone(),
        );
        tokio::spawn(async move {
            let _turn = applying.lock().await;
            let (secrets, nodes) = confined.locked().get(&pool).cloned().unwrap_or_default();
            let started = clock.instant();
            while let Err(e) = apply_osc_access(&client, &labels, &pool, &secrets, &nodes).await {
                tracing::warn!(error = %rackproof_std::error_chain(&e), %pool, "granting the pool's nodes their OSC Secret failed");
                if clock.since(started) > GRANTING {
                    break;
                }
                clock.sleep(Duration::from_secs(1)).await;
            }
        });
    }
}

/// The Role and RoleBinding `rackproof-osc-POOL` in each namespace of `secrets`.
async fn apply_osc_access(
    client: &Client,
    labels: &BTreeMap<String, String>,
    pool: &str,
    secrets: &BTreeSet<(String, String)>,
    nodes: &BTreeSet<String>,
) -> Result<(), ExistingError> {
    let name = format!("rackproof-osc-{pool}");
    let namespaces: BTreeSet<&String> = secrets.iter().map(|(ns, _)| ns).collect();
    let apply = PatchParams::apply(RACKPROOF).force();
    for namespace in namespaces {
        let meta = ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        };
        let role = Role {
            metadata: meta.clone(),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["secrets".to_owned()]),
                resource_names: Some(
                    secrets
                        .iter()
                        .filter(|(ns, _)| ns == namespace)
                        .map(|(_, n)| n.clone())
                        .collect(),
                ),
                verbs: ["get", "list", "watch"].map(str::to_owned).to_vec(),
                ..PolicyRule::default()
            }]),
        };
        let binding = RoleBinding {
            metadata: meta,
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: name.clone(),
            },
            subjects: Some(
                nodes
                    .iter()
                    .map(|node| Subject {
                        api_group: Some("rbac.authorization.k8s.io".to_owned()),
                        kind: "User".to_owned(),
                        name: format!("system:node:{node}"),
                        namespace: None,
                    })
                    .collect(),
            ),
        };
        let what = |kind: &str| format!("apply {kind} {namespace}/{name}");
        let mut role_value = serde_json::to_value(&role).unwrap_or_default();
        role_value["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
        role_value["kind"] = "Role".into();
        Api::<Role>::namespaced(client.clone(), namespace)
            .patch(&name, &apply, &Patch::Apply(&role_value))
            .await
            .map_err(|source| ExistingError::Request {
                what: what("Role"),
                source,
            })?;
        let mut binding_value = serde_json::to_value(&binding).unwrap_or_default();
        binding_value["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
        binding_value["kind"] = "RoleBinding".into();
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .patch(&name, &apply, &Patch::Apply(&binding_value))
            .await
            .map_err(|source| ExistingError::Request {
                what: what("RoleBinding"),
                source,
            })?;
    }
    Ok(())
}

/// [`ExistingCluster::node_endpoint`] for the cluster `config` read from `kubeconfig`.
fn guest_endpoint(
    config: &Config,
    kubeconfig: &Path,
    address: &str,
    loopback_reachable: bool,
) -> Result<ExistingEndpoint, ExistingError> {
    let url = config.cluster_url.to_string();
    let url = url.trim_end_matches('/').to_owned();
    let roots = config.root_cert.as_deref().unwrap_or_default();
    if roots.is_empty() {
        return Err(ExistingError::NoCa {
            kubeconfig: kubeconfig.to_owned(),
            url,
        });
    }
    let ca_pem = roots.iter().map(|der| pem_certificate(der)).collect();
    let host = config.cluster_url.host().unwrap_or_default();
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let on_loopback = bare_host == "localhost"
        || bare_host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let given_name = config.tls_server_name.clone().unwrap_or_default();
    if !on_loopback {
        return Ok(ExistingEndpoint {
            url,
            ca_pem,
            tls_server_name: given_name,
        });
    }
    if !loopback_reachable {
        return Err(ExistingError::Unreachable {
            url,
            address: address.to_owned(),
        });
    }
    let port = config.cluster_url.port_u16().unwrap_or(443);
    Ok(ExistingEndpoint {
        url: format!("https://{address}:{port}"),
        ca_pem,
        tls_server_name: if given_name.is_empty() {
            bare_host.to_owned()
        } else {
            given_name
        },
    })
}

/// A DER certificate as PEM.
fn pem_certificate(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_labels_name_rackproof_and_the_run() {
        let owner = Ownership::new("abc");
        assert_eq!(
            owner.labels(),
            BTreeMap::from([
                (MANAGED_BY.to_owned(), "rackproof".to_owned()),
                (RUN_LABEL.to_owned(), "abc".to_owned()),
            ])
        );
        assert_eq!(owner.selector(), "rackproof.dev/run=abc");
    }

    fn config(url: &str, with_ca: bool) -> Config {
        let mut config = Config::new(url.parse().unwrap());
        config.root_cert = with_ca.then(|| vec![vec![1, 2, 3]]);
        config
    }

    #[test]
    fn guests_reach_a_server_on_the_loopback_by_their_alias_and_verify_its_name() {
        let kubeconfig = Path::new("/k");
        let endpoint = guest_endpoint(
            &config("https://127.0.0.1:6443", true),
            kubeconfig,
            "10.0.2.2",
            true,
        )
        .unwrap();
        assert_eq!(endpoint.url, "https://10.0.2.2:6443");
        assert_eq!(endpoint.tls_server_name, "127.0.0.1");
        assert_eq!(
            endpoint.ca_pem,
            "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n"
        );
        let remote = guest_endpoint(
            &config("https://api.example.test:443", true),
            kubeconfig,
            "10.0.2.2",
            true,
        )
        .unwrap();
        assert_eq!(
            (remote.url.as_str(), remote.tls_server_name.as_str()),
            ("https://api.example.test:443", "")
        );
    }

    #[test]
    fn a_loopback_server_rack_nodes_cannot_reach_and_a_kubeconfig_without_a_ca_are_refused() {
        let kubeconfig = Path::new("/k");
        let error = guest_endpoint(
            &config("https://localhost:6443", true),
            kubeconfig,
            "192.0.2.1",
            false,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            error.contains("loopback") && error.contains("192.0.2.1"),
            "{error}"
        );
        let error = guest_endpoint(
            &config("https://api.example.test", false),
            kubeconfig,
            "10.0.2.2",
            true,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(error.contains("names no CA"), "{error}");
    }
}
