//! Embedded Kubernetes-compatible API server.
//!
//! Rackproof's own Kubernetes API for simulation, CI and the embedded default: real clients
//! (kube-rs, kubectl) talk to it as to kube-apiserver for what Rackproof uses.
//!
//! ```no_run
//! # async fn demo() {
//! use rackproof_apiserver::{ApiServer, User};
//! let server = ApiServer::new(rackproof_clock::Clock::wall());
//! let admin: kube::Client = server.admin_client();
//! let node: kube::Client = server.client(User::node("worker-1"));
//! # }
//! ```
//!
//! # Layers
//!
//! - `store`: objects as JSON keyed by group/resource, namespace and name; one global
//!   resourceVersion; a bounded event log per resource (older watch starts get 410 Gone). Each
//!   object's JSON encoding is cached until its next write, so lists, gets and the start of a
//!   watch splice bytes instead of re-encoding objects.
//! - `request`: HTTP request → typed `Action`; `handler`: runs it; `transport`: the axum app,
//!   shared by the in-process tower transport ([`ApiServer::client`]) and HTTPS.
//! - Concurrency: all state sits behind one mutex, held once per request (parse, authorize,
//!   run). A request that finds it held yields its task instead of parking its worker thread, so
//!   the worker goes on with client-side work; with 32 clients on two cores that raised lease
//!   renewals per second by about 60% over blocking on the mutex.
//! - `openapi`, `discovery`: OpenAPI v2/v3 documents and (aggregated) discovery; `gnostic`:
//!   the v2 document as gnostic protobuf.
//! - `auth`, `tls`, `https`: users, bearer tokens, the Node authorizer rules, and the HTTPS
//!   transport with its generated CA ([`ApiServer::serve_https`], [`HttpsServer::kubeconfig`]).
//! - `state`: built-in controllers that run synchronously after each write: CRD serving,
//!   PodDisruptionBudget status, finalizers, owner-reference garbage collection, namespace
//!   cleanup.
//!
//! Timestamps (creationTimestamp, deletionTimestamp, managedFields times) come from the
//! [`rackproof_clock::Clock`] given to [`ApiServer::new`]; uids and generated names come from a
//! seeded generator, so a simulated run repeats exactly.
//!
//! # Deliberate differences from kube-apiserver
//!
//! - One version per built-in resource (the current one: `policy/v1`, `apps/v1`, ...); a CRD's
//!   versions share storage with conversion strategy `None` (only `apiVersion` changes).
//! - JSON bodies, and protobuf only for `SelfSubjectAccessReview` (`kubectl auth can-i`); other
//!   protobuf bodies get 415 (current kubectl's `create` shortcuts among them), and protobuf is
//!   never answered. Table
//!   requests (`as=Table`) get kube-apiserver's columns for the kinds kubectl users look at and
//!   for CRD printer columns, the default `Name`/`Created At` for the rest (`table`). The one
//!   protobuf exception is `/openapi/v2`, served as gnostic protobuf too (what
//!   kubectl ≤ 1.26 reads for client-side apply, `explain` and client-side validation), converted
//!   from the JSON document (`gnostic`): vendor extensions' `Any.yaml` holds non-trivial values
//!   as JSON (flow-style YAML) where gnostic writes block-style YAML; no `Last-Modified` is sent
//!   (the ETag and `If-None-Match` are), and the body is never gzipped.
//!   In the v2 document, OpenAPI v3 keywords of CRD schemas (`anyOf`, `nullable`, ...) stay in
//!   the JSON form and are dropped from the protobuf one. A CRD schema the protobuf form cannot
//!   carry (none passes CRD validation that way) is published as any object with `apiVersion`,
//!   `kind` and `metadata`, instead of the document failing.
//! - Built-in kinds' schemas mark list fields with `x-kubernetes-patch-strategy` and
//!   `x-kubernetes-patch-merge-key` from the server's own strategic-merge table (by field name),
//!   not from the Go types' tags; lists it treats as atomic carry neither.
//! - `fieldValidation=Strict` rejects unknown fields (checked by a round trip through the
//!   k8s-openapi types for built-in kinds, by schema pruning for custom resources); duplicate
//!   fields are not detected and `Warn` behaves like `Ignore` (no warning headers).
//! - Aggregated discovery is served as `apidiscovery.k8s.io/v2` only (not `v2beta1`).
//! - `/version` reports Kubernetes 1.35 ([`KUBERNETES_VERSION`]), the API level of the
//!   k8s-openapi types used for schemas.
//! - List items carry `apiVersion` and `kind`.
//! - `continue` tokens resume after the last key but read the current state, not a snapshot at
//!   the first page's resourceVersion; `resourceVersion`/`resourceVersionMatch` on list are
//!   accepted and served from the latest state.
//! - The watch event log keeps a fixed number of events per resource ([`ApiServer::with_watch_window`])
//!   instead of etcd's five-minute compaction.
//! - PodDisruptionBudget status counts matching pods as `expectedPods` (kube-controller-manager
//!   uses the owning controllers' scale for percentages and `maxUnavailable`); status is
//!   recomputed synchronously, so `disruptedPods` is never used.
//! - Pods bound to a node stay Terminating until deleted with grace period 0 (like a kubelet
//!   confirming); no pod garbage collector removes pods of vanished nodes.
//! - No controllers besides garbage collection, namespace cleanup, PDB status and CRD
//!   establishment: Deployments do not create ReplicaSets or pods; Deployment status is what
//!   clients write. New Nodes get the `node.kubernetes.io/not-ready:NoSchedule` taint as from
//!   kube-apiserver's TaintNodesByCondition admission, and since no node lifecycle controller
//!   runs, nothing removes it.
//! - Admission: of kube-apiserver's default plugins, NamespaceLifecycle, Priority,
//!   DefaultTolerationSeconds, TaintNodesByCondition and NodeRestriction are emulated. Priority
//!   knows only the built-in classes `system-node-critical` and `system-cluster-critical`
//!   (PriorityClasses are not served; other names get 403). There is no ServiceAccount
//!   admission (no `serviceAccountName` default or token volume), LimitRanger or ResourceQuota.
//! - Validation covers names, labels, pod containers, workload selectors, Node updates
//!   (`providerID`, `podCIDRs` and the rest of the spec as v1.20) and CRD schemas
//!   (type, required, enum, bounds, lengths; no `pattern`, `format` or CEL rules). Pod spec
//!   immutability is not enforced.
//! - CRD schemas are decoded and validated as kube-apiserver v1.20 does for
//!   `apiextensions.k8s.io/v1` (`crd_decode`, `crd_validation`): a keyword of the wrong JSON
//!   type is a 400 (with this server's own wording), unknown keywords and zero values are
//!   dropped, and the OpenAPI, structural-schema, list/map-type and default rules give 422s with
//!   kube-apiserver's field paths and reasons. Not checked: `x-kubernetes-embedded-resource`
//!   defaults inside `metadata`, whether a default's own value validates (checked with this
//!   server's custom-resource validation: no `pattern` or `format`), and the final "can build a
//!   validator" step. `pattern`s are compiled with Rust's `regex`, whose syntax is RE2's like
//!   Go's but not identical. Only the schema part of a CRD is decoded strictly; CRD validation
//!   other than schemas (names, versions) stops at the first problem.
//! - Strategic merge patch merge keys are those of the types served; `taints` and
//!   `tolerations` are atomic lists as in Kubernetes.
//! - PUT creates a missing object only for Leases and Events (as their strategies allow).
//! - Watches without `timeoutSeconds` end after 30 minutes; bookmarks come every 60 seconds.
//! - Watch bounds ([`WatchLimits`]): a watch queues up to [`DEFAULT_WATCH_BUFFER`] events and
//!   is closed when its queue is full (kube-apiserver queues 10 and waits a while before
//!   closing); a user outside `system:masters` may hold [`DEFAULT_MAX_WATCHES_PER_USER`]
//!   watches at once, then gets 429 (kube-apiserver has no such cap).
//! - Namespace deletion deletes the namespace's content at once (pods gracefully) and removes
//!   the namespace when it is empty, without a `finalize` subresource.
//! - Authorization knows two kinds of identity: `system:masters` (everything) and nodes
//!   (Node authorizer + NodeRestriction rules); there is no RBAC.
//!
//! Found by the differential suite against kube-apiserver v1.20.2 (`rackproof-cluster`'s
//! `tests/differential.rs`, which uses the same labels):
//!
//! - V1: namespaces carry the label `kubernetes.io/metadata.name` (Kubernetes 1.21+).
//! - V2: pods carry `metadata.generation` (Kubernetes 1.33+).
//! - V3: `managedFields` entries of subresource writes name their `subresource` (1.22+);
//!   v1.20 folds them into the main resource's entries.
//! - V4: a malformed JSON merge patch gets 400 BadRequest; v1.20 answers 500.
//! - V5: v1.20 records in `managedFields` what a write sets in the part its endpoint ignores
//!   (status through the main resource, spec through `status`) and drops what such a write
//!   removes; this server, like Kubernetes 1.22+, ignores both.
//! - R18: a Node write that sets `spec.podCIDR` gets a `managedFields` entry (`f:podCIDR`,
//!   `f:podCIDRs`, ...); v1.20 records none for it.
//! - V6: NodeRestriction also refuses a node's change of its own Node's `ownerReferences`
//!   (403), as later Kubernetes does; v1.20 allows it.

mod access_review;
mod apply;
mod auth;
mod crd;
mod crd_decode;
mod crd_validation;
mod discovery;
mod error;
mod fields;
mod gnostic;
mod handler;
mod health;
mod https;
mod kinds;
mod metrics;
mod node_restriction;
mod openapi;
mod patch;
mod pdb;
mod pointer;
mod protobuf;
mod registry;
mod request;
mod schema;
mod selector;
mod state;
mod store;
mod table;
mod tls;
mod transport;
mod types;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard};

use rackproof_clock::Clock;
use rackproof_std::LockExt;

pub use auth::{MASTERS_GROUP, NODES_GROUP, User};
pub use discovery::KUBERNETES_VERSION;
pub use error::ApiError;
pub use https::{
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_TLS_HANDSHAKE_TIMEOUT,
    HttpsLimits, HttpsServer, ServeError,
};
pub use tls::TlsError;
pub use transport::MAX_BODY_BYTES;
pub use watch::{DEFAULT_MAX_WATCHES_PER_USER, DEFAULT_WATCH_BUFFER, WatchLimits};

/// Events kept per resource for watches unless [`ApiServer::with_watch_window`] says otherwise.
pub const DEFAULT_WATCH_WINDOW: usize = 10_000;

/// The shared core behind every transport.
pub(crate) struct Core {
    state: Mutex<state::State>,
    clock: Clock,
    metrics: metrics::Metrics,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.locked()
    }

    /// The state lock for a request: while another request holds it, the task yields to the
    /// runtime instead of putting its worker thread to sleep, so the worker runs other tasks.
    pub(crate) async fn lock_for_request(&self) -> MutexGuard<'_, state::State> {
        loop {
            if let Some(guard) = self.state.try_locked() {
                return guard;
            }
            tokio::task::yield_now().await;
        }
    }

    pub(crate) fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    pub(crate) fn now_text(&self) -> String {
        state::format_time(self.clock.now())
    }
}

/// An embedded API server. Cheap to clone; clones serve the same objects.
#[derive(Debug, Clone)]
pub struct ApiServer {
    core: Arc<Core>,
}

impl ApiServer {
    /// A server with the four initial namespaces, reading time from `clock`.
    pub fn new(clock: Clock) -> Self {
        Self::build(clock, DEFAULT_WATCH_WINDOW, 0)
    }

    /// A server keeping `window` events per resource for watches (older starts get 410 Gone),
    /// with uids and generated names drawn from `seed`.
    pub fn with_watch_window(clock: Clock, window: usize, seed: u64) -> Self {
        Self::build(clock, window, seed)
    }

    fn build(clock: Clock, window: usize, seed: u64) -> Self {
        let now = state::format_time(clock.now());
        let state = state::State::new(window, seed, &now);
        Self {
            core: Arc::new(Core {
                state: Mutex::new(state),
                clock,
                metrics: metrics::Metrics::default(),
            }),
        }
    }

    /// A client acting as `user`, over an in-process transport (no socket): it works under
    /// tokio's paused clock. Must be called inside a tokio runtime.
    pub fn client(&self, user: User) -> kube::Client {
        transport::in_process_client(self.core.clone(), user)
    }

    /// A client acting as the admin identity.
    pub fn admin_client(&self) -> kube::Client {
        self.client(User::admin())
    }

    /// A client acting as node `name` (`system:node:NAME` in `system:nodes`).
    pub fn node_client(&self, name: &str) -> kube::Client {
        self.client(User::node(name))
    }

    /// Lets the nodes bound to `pool` ([`ApiServer::bind_node_to_pool`]) read Secret
    /// `namespace/name` (the pool's OperatingSystemConfig secret).
    pub fn allow_node_secret(&self, pool: &str, namespace: &str, name: &str) {
        let mut state = self.core.lock();
        let list = state.auth.node_secrets.entry(pool.to_owned()).or_default();
        let entry = (namespace.to_owned(), name.to_owned());
        if !list.contains(&entry) {
            list.push(entry);
        }
    }

    /// Binds node `node` to `pool` (replacing an earlier binding): its credential may read what
    /// [`ApiServer::allow_node_secret`] allows that pool. The binding comes from whoever issues
    /// the node's identity (the machine provider, as it binds a Machine), as Gardener's node
    /// authorizer maps node → Machine → pool from objects the node cannot write; the Node's own
    /// pool label, which the node may change, decides nothing.
    pub fn bind_node_to_pool(&self, node: &str, pool: &str) {
        self.core
            .lock()
            .auth
            .node_pools
            .insert(node.to_owned(), pool.to_owned());
    }

    /// Every bearer token this server accepts (those [`ApiServer::issue_token`] issued, and the
    /// kubeconfigs' of [`HttpsServer`]), for a caller that makes sure none of them leaks.
    pub fn bearer_tokens(&self) -> Vec<String> {
        self.core.lock().auth.tokens.keys().cloned().collect()
    }

    /// Issues a new bearer token for `user` on the HTTPS transport.
    pub fn issue_token(&self, user: User) -> String {
        use rand::Rng;
        let bytes: [u8; 24] = rand::rng().random();
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.core.lock().auth.tokens.insert(token.clone(), user);
        token
    }

    /// Serves this server over HTTPS on `addr` (`127.0.0.1:0` for any free port) with a freshly
    /// generated CA; bearer tokens from [`ApiServer::issue_token`] or
    /// [`HttpsServer::kubeconfig`] authenticate. Dropping the handle stops serving.
    pub async fn serve_https(&self, addr: std::net::SocketAddr) -> Result<HttpsServer, ServeError> {
        https::serve(self.clone(), addr, &[], HttpsLimits::default()).await
    }

    /// [`ApiServer::serve_https_also_as`] with connection bounds other than the defaults.
    pub async fn serve_https_with_limits(
        &self,
        addr: std::net::SocketAddr,
        extra_names: &[&str],
        limits: HttpsLimits,
    ) -> Result<HttpsServer, ServeError> {
        https::serve(self.clone(), addr, extra_names, limits).await
    }

    /// [`ApiServer::serve_https`] with a certificate that also names `extra_names` (DNS names or
    /// IP addresses): e.g. `10.0.2.2`, the host as QEMU guests on the user network reach it.
    pub async fn serve_https_also_as(
        &self,
        addr: std::net::SocketAddr,
        extra_names: &[&str],
    ) -> Result<HttpsServer, ServeError> {
        https::serve(self.clone(), addr, extra_names, HttpsLimits::default()).await
    }

    /// Sets the bounds on watches (see [`WatchLimits`]; the defaults are
    /// [`DEFAULT_WATCH_BUFFER`] and [`DEFAULT_MAX_WATCHES_PER_USER`]). Watches already open keep
    /// their queue size and count against the new per-user cap.
    pub fn set_watch_limits(&self, limits: WatchLimits) {
        self.core.lock().watches.limits = limits;
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.core.lock().store.resource_version()
    }

    /// The clock the server stamps objects with.
    pub fn clock(&self) -> &Clock {
        &self.core.clock
    }
}
