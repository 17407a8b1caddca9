//! The agent: the reconcile pass that walks a node to its pool's OSC, and the loop around it.
//!
//! One pass ([`Agent::reconcile`]), each step idempotent and recorded in the state store:
//!
//! 1. Read the pool's OSC Secret (`inplace_api::osc::secret::decode_secret`) and the Node: in the
//!    loop ([`Agent::run`]) the latest versions its watches delivered, as gardener-node-agent reads
//!    them from its controller-runtime cache; in a single pass ([`Agent::reconcile`]) from the API.
//! 2. Up to date (no plan, last-applied checksum equal): make sure the Node carries the applied
//!    checksum annotation; done.
//! 3. A new checksum: compute a [`crate::plan`] against the last-applied OSC and persist it. An
//!    OS attempt already under way for the same version keeps its progress.
//! 4. No drain needed, at once: write changed files; apply a kubelet patch version (restart,
//!    health check with a timeout).
//! 5. Drain-needing changes wait for the Node condition `InPlaceUpdate` with reason
//!    `ReadyForUpdate`. Then, in this order: CA rotation (kubelet rebootstrap + health),
//!    ServiceAccount key rotation (token Secrets copied to their files), kubelet minor
//!    version/configuration (restart + health), OS update (below).
//! 6. Success of an in-place update: delete the pods still bound to the node, label
//!    `update-result=successful`, remove `update-failed-reason` and `updating-os-version`, set the
//!    applied checksum; the plan becomes the last-applied OSC.
//!
//! OS update, for target version `T`:
//! - running `T` already → bless the booted entry, step done (this is the "after boot" path);
//! - the reboot into `T` was requested before and the machine runs something else → if the boot
//!   id is still the one recorded with the request, the reboot never happened (the agent was
//!   killed first): reboot again; otherwise it rolled back: mark `T`'s entry bad if still on
//!   trial, fail with a reason naming both versions;
//! - the command succeeded before → record `rebooting`, reboot;
//! - otherwise annotate `updating-os-version=T`, record the run as started, run the command with
//!   its args and timeout and classify the exit code: 0 → reboot; 3 (or a timeout) → retry after a
//!   doubling backoff until `os_update_max_attempts` runs, then fail; 1, 2 or anything else → fail
//!   at once. A run found started but unfinished after a restart is never repeated: it counts as
//!   an interrupted, retriable attempt and the next attempt number runs.
//!
//! Failure: the reason is persisted first, then the Node is labelled `update-result=failed` with
//! `update-failed-reason`. The agent then waits; when a person removes the failed label and the
//! node is `ReadyForUpdate` again, it starts over with a fresh retry budget (GEP-31: "the
//! update-failed label should be removed from the node"). A plan that needs no drain starts over
//! as soon as the label is gone: no `ReadyForUpdate` ever comes for it.
//!
//! Each pass runs in an `agent_pass{node, pass}` span (`pass` counts the agent's passes from 1),
//! so every log line names the node (the kubelet's heartbeat, apart from the agent, logs in a
//! `heartbeat{node}` span).

mod journal;
mod os_update;
mod steps;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::keys;
use inplace_api::node_fingerprint::node_fingerprint;
use inplace_api::osc::secret::{DecodedOsc, decode_secret};
use inplace_api::unmanaged::Unmanaged;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use rackproof_clock::Clock;
use rackproof_std::{LockExt, error_chain};
use tokio::sync::{Notify, watch};
use tracing::Instrument;

use crate::assess::BootAssessor;
use crate::config::AgentConfig;
use crate::follow::follow;
use crate::node::{self, NodeHandle};
use crate::osupdate::runner::OsUpdateRunner;
use crate::plan::{Machine, plan};
use crate::platform::files::FileSink;
use crate::platform::kubelet::Kubelet;
use crate::platform::os_version::OsVersionSource;
use crate::platform::reboot::Reboot;
use crate::state::{self, AgentState};
use crate::store::StateStore;
use crate::together::run_together;
use journal::Journal;

/// The platform the agent runs on (see the crate docs for the implementations).
#[derive(Debug, Clone)]
pub struct Platform {
    /// Persistent state.
    pub store: Arc<dyn StateStore>,
    /// Node files.
    pub files: Arc<dyn FileSink>,
    /// The kubelet.
    pub kubelet: Arc<dyn Kubelet>,
    /// Rebooting.
    pub reboot: Arc<dyn Reboot>,
    /// The running OS version.
    pub os_version: Arc<dyn OsVersionSource>,
    /// Boot assessment.
    pub boot: Arc<dyn BootAssessor>,
    /// The OS-update command runner.
    pub os_update: Arc<dyn OsUpdateRunner>,
}

/// What a reconcile pass ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The node runs the current OSC.
    UpToDate,
    /// The pass applied the OSC completely.
    Applied,
    /// Waiting for something outside the agent.
    Waiting(String),
    /// A retriable OS-update failure; the next run is due at this time.
    Retrying(Timestamp),
    /// The update failed with this reason.
    Failed(String),
}

/// A pass that could not complete (retried at the next tick).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Reading the OSC Secret failed.
    #[error("failed to read the OSC secret {namespace}/{name}")]
    Secret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The OSC Secret is unusable.
    #[error("failed to decode the OSC secret")]
    Decode(#[source] inplace_api::osc::secret::OscSecretError),
    /// The Node could not be read or marked.
    #[error(transparent)]
    Node(#[from] node::NodeError),
    /// The state could not be read or written.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The running OS version is unknown.
    #[error("failed to read the running OS version")]
    OsVersion(#[source] crate::platform::os_version::OsVersionError),
    /// Boot assessment failed.
    #[error("failed to assess the boot")]
    Assess(#[source] crate::assess::AssessError),
}

/// The node agent.
#[derive(Clone)]
pub struct Agent {
    config: AgentConfig,
    platform: Platform,
    client: kube::Client,
    clock: Clock,
    node: NodeHandle,
    /// The OSC last decoded, by the Secret version it came from: a pass reads the Secret afresh
    /// every time, but decodes its document only when the Secret changed.
    decoded_osc: Arc<Mutex<Option<(SecretVersion, DecodedOsc)>>>,
    /// The passes begun so far (the `pass` field of their spans).
    passes: Arc<AtomicU64>,
}

/// Which version of a Secret a document was decoded from: its uid and resourceVersion.
type SecretVersion = (String, String);

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("config", &self.config)
            .field("platform", &self.platform)
            .finish_non_exhaustive()
    }
}

enum Step {
    Continue,
    Stop(Outcome),
}

/// Where a reconcile pass reads the Node and the OSC Secret.
#[derive(Clone, Copy)]
enum Reads<'a> {
    /// From the API (a single pass).
    Live,
    /// The latest versions the watches of [`Agent::run`] delivered: a pass costs no requests to
    /// read them, and it runs again whenever they change in what it reads.
    Followed {
        node: &'a watch::Receiver<Option<Node>>,
        osc: &'a watch::Receiver<Option<Secret>>,
    },
}

/// Wakes the reconcile loop when the Node changed in what a pass reads, or the Secret changed
/// at all; runs until dropped.
async fn wake_on_changes(
    mut node: watch::Receiver<Option<Node>>,
    mut osc: watch::Receiver<Option<Secret>>,
    wake: &Notify,
) {
    let mut node_seen = node.borrow_and_update().as_ref().map(node_fingerprint);
    let mut osc_seen = osc
        .borrow_and_update()
        .as_ref()
        .map(|s| s.metadata.resource_version.clone());
    loop {
        // Biased: the same order every time, so simulated runs are reproducible.
        let changed = tokio::select! {
            biased;
            result = node.changed() => {
                if result.is_err() {
                    return;
                }
                let now = node.borrow_and_update().as_ref().map(node_fingerprint);
                std::mem::replace(&mut node_seen, now) != now
            },
            result = osc.changed() => {
                if result.is_err() {
                    return;
                }
                let now = osc.borrow_and_update().as_ref().map(|s| s.metadata.resource_version.clone());
                std::mem::replace(&mut osc_seen, now.clone()) != now
            },
        };
        if changed {
            wake.notify_one();
        }
    }
}

impl Agent {
    /// An agent for `config` on `platform`, talking to the API through `client`.
    pub fn new(
        config: AgentConfig,
        platform: Platform,
        client: kube::Client,
        clock: Clock,
    ) -> Self {
        let node = NodeHandle::new(client.clone(), &config.node_name);
        Self {
            config,
            platform,
            client,
            clock,
            node,
            decoded_osc: Arc::default(),
            passes: Arc::default(),
        }
    }

    /// Runs until the future is dropped: watches of the Node and of the OSC Secret, and a
    /// reconcile pass whenever one of them changed in a way a pass reads ([`node_fingerprint`]; the Secret's resourceVersion),
    /// when a retriable failure's retry is due, after a failed pass (after the poll interval),
    /// and otherwise every resync interval.
    pub async fn run(&self) {
        let (node_latest, node) = watch::channel(None);
        let (osc_latest, osc) = watch::channel(None);
        let wake = Notify::new();
        let follow_node = follow(
            Api::<Unmanaged<Node>>::all(self.client.clone()),
            &self.config.node_name,
            &self.clock,
            self.config.poll_interval,
            &node_latest,
        );
        let secrets: Api<Unmanaged<Secret>> =
            Api::namespaced(self.client.clone(), &self.config.osc_secret_namespace);
        let follow_osc = follow(
            secrets,
            &self.config.osc_secret_name,
            &self.clock,
            self.config.poll_interval,
            &osc_latest,
        );
        let reads = (node.clone(), osc.clone());
        let changes = wake_on_changes(node, osc, &wake);
        let reconcile = async {
            loop {
                let pass = self.reconcile_with(Reads::Followed {
                    node: &reads.0,
                    osc: &reads.1,
                });
                let wait = async {
                    match pass.await {
                        Ok(Outcome::Retrying(at)) => self
                            .clock
                            .until(at)
                            .max(Duration::from_millis(1))
                            .min(self.config.resync_interval),
                        Ok(outcome) => {
                            tracing::debug!(?outcome, "reconciled");
                            self.config.resync_interval
                        }
                        Err(e) => {
                            tracing::warn!(error = %error_chain(&e), "reconcile failed; retrying");
                            self.config.poll_interval
                        }
                    }
                }
                .instrument(self.pass_span())
                .await;
                // Biased: the same order every time, so simulated runs are reproducible.
                tokio::select! {
                    biased;
                    () = wake.notified() => {}
                    () = self.clock.sleep(wait) => {}
                }
            }
        };
        run_together(vec![
            Box::pin(follow_node),
            Box::pin(follow_osc),
            Box::pin(changes),
            Box::pin(reconcile),
        ])
        .await;
    }

    /// One reconcile pass (`--once`), reading the Node and the OSC Secret from the API.
    pub async fn run_once(&self) -> Result<Outcome, AgentError> {
        self.reconcile().await
    }

    async fn read_osc(&self, reads: Reads<'_>) -> Result<Option<DecodedOsc>, AgentError> {
        match reads {
            Reads::Live => {
                let secrets: Api<Secret> =
                    Api::namespaced(self.client.clone(), &self.config.osc_secret_namespace);
                let secret = secrets
                    .get_opt(&self.config.osc_secret_name)
                    .await
                    .map_err(|source| AgentError::Secret {
                        namespace: self.config.osc_secret_namespace.clone(),
                        name: self.config.osc_secret_name.clone(),
                        source,
                    })?;
                secret
                    .as_ref()
                    .map(|secret| self.decode_osc(secret))
                    .transpose()
            }
            Reads::Followed { osc, .. } => osc
                .borrow()
                .as_ref()
                .map(|secret| self.decode_osc(secret))
                .transpose(),
        }
    }

    /// The decoded OSC of `secret`, decoded again only when the Secret changed.
    fn decode_osc(&self, secret: &Secret) -> Result<DecodedOsc, AgentError> {
        let version = secret
            .metadata
            .uid
            .as_ref()
            .zip(secret.metadata.resource_version.as_ref());
        let mut memo = self.decoded_osc.locked();
        if let (Some((uid, rv)), Some(((seen_uid, seen_rv), decoded))) = (version, memo.as_ref())
            && uid == seen_uid
            && rv == seen_rv
        {
            return Ok(decoded.clone());
        }
        let decoded = decode_secret(secret).map_err(AgentError::Decode)?;
        *memo = version.map(|(uid, rv)| ((uid.clone(), rv.clone()), decoded.clone()));
        Ok(decoded)
    }

    /// One reconcile pass (see the module docs), reading the Node and the OSC Secret from the API.
    pub async fn reconcile(&self) -> Result<Outcome, AgentError> {
        self.reconcile_with(Reads::Live)
            .instrument(self.pass_span())
            .await
    }

    /// The span of the next pass, `agent_pass{node, pass}`: every line the pass logs, down to
    /// its awaited steps, names the node and the pass.
    fn pass_span(&self) -> tracing::Span {
        let pass = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info_span!("agent_pass", node = %self.config.node_name, pass)
    }

    async fn reconcile_with(&self, reads: Reads<'_>) -> Result<Outcome, AgentError> {
        let Some(decoded) = self.read_osc(reads).await? else {
            return Ok(Outcome::Waiting(format!(
                "no OSC secret {}/{}",
                self.config.osc_secret_namespace, self.config.osc_secret_name
            )));
        };
        let node = match reads {
            Reads::Live => self.node.get().await?,
            Reads::Followed { node, .. } => {
                let followed = node.borrow().clone();
                self.node.get_followed(followed).await?
            }
        };
        let Some(node) = node else {
            return Ok(Outcome::Waiting(format!(
                "node {} is not registered",
                self.config.node_name
            )));
        };
        let store = self.platform.store.as_ref();
        let mut journal = match Journal::load(store).await {
            Ok(journal) => journal,
            Err(state::StateError::Corrupt(e)) => self.recover(&decoded, &node, &e).await?,
            Err(e) => return Err(e.into()),
        };
        let state = journal.state();
        let applied_checksum = state.applied.as_ref().map(|a| a.checksum.clone());
        if state.plan.is_none() && applied_checksum.as_deref() == Some(decoded.checksum.as_str()) {
            if node::annotation(&node, keys::ANNOTATION_CHECKSUM_APPLIED_OSC)
                != Some(decoded.checksum.as_str())
            {
                self.node
                    .mark(
                        &BTreeMap::new(),
                        &BTreeMap::from([(
                            keys::ANNOTATION_CHECKSUM_APPLIED_OSC,
                            Some(decoded.checksum.as_str()),
                        )]),
                    )
                    .await?;
            }
            return Ok(Outcome::UpToDate);
        }
        if state.plan.as_ref().map(|p| p.checksum.as_str()) != Some(decoded.checksum.as_str()) {
            let running = self
                .platform
                .os_version
                .running_version()
                .map_err(AgentError::OsVersion)?;
            let machine = Machine {
                os_version: running,
                kubelet_version: self.platform.kubelet.version(),
            };
            let applied = state.applied.as_ref().map(|a| &a.osc);
            let mut new_plan = match plan(applied, &machine, &decoded.osc, &decoded.checksum) {
                Ok(p) => p,
                Err(e) => return Ok(Outcome::Waiting(e.to_string())),
            };
            if let Some(old) = state.plan.as_ref()
                && old.os_version.is_some()
                && old.os_version == new_plan.os_version
            {
                new_plan.os = old.os.clone();
            }
            tracing::info!(checksum = %new_plan.checksum, changes = ?new_plan.changes, "new operating system config");
            journal.start_plan(new_plan).await?;
        }
        let outcome = self.carry_out(&mut journal, &node).await?;
        if let Outcome::Applied = outcome {
            journal.finish_plan().await?;
            tracing::info!("operating system config applied");
        }
        Ok(outcome)
    }

    /// Starts over after the stored state turned out corrupt: sets it aside and plans afresh
    /// against the running version. The one record that matters and only the state held, that
    /// the reboot into the OSC's version happened, is rebuilt from the Node and the machine: the
    /// Node still says `updating-os-version` is that version and the machine runs it, so the plan
    /// keeps its OS step, which blesses the booted entry and reports the update. Anything else
    /// redoes safely (idempotent steps; a rollback the lost state would have reported is found
    /// again by one more attempt).
    async fn recover(
        &self,
        decoded: &DecodedOsc,
        node: &Node,
        error: &serde_json::Error,
    ) -> Result<Journal<'_>, AgentError> {
        tracing::error!(
            error = %error,
            "the agent state ({}) is corrupt; set aside as {} and rebuilt from the running version, the Node and the ESP",
            state::STATE_KEY,
            state::CORRUPT_KEY
        );
        state::set_aside(self.platform.store.as_ref()).await?;
        let running = self
            .platform
            .os_version
            .running_version()
            .map_err(AgentError::OsVersion)?;
        let machine = Machine {
            os_version: running.clone(),
            kubelet_version: self.platform.kubelet.version(),
        };
        let store = self.platform.store.as_ref();
        let Ok(mut rebuilt) = plan(None, &machine, &decoded.osc, &decoded.checksum) else {
            return Ok(Journal::empty(store));
        };
        let target = decoded
            .osc
            .spec
            .in_place_updates
            .as_ref()
            .map(|u| u.operating_system_version.as_str());
        let attempted = node::annotation(node, keys::ANNOTATION_UPDATING_OS_VERSION);
        if rebuilt.os_version.is_none() && target == Some(running.as_str()) && attempted == target {
            tracing::info!(version = %running, "the node was updating to the version it runs now; finishing that update");
            rebuilt.os_version = Some(running);
            rebuilt
                .changes
                .push("OS version (the update under way when the state was lost)".to_owned());
        }
        let state = AgentState {
            applied: None,
            plan: Some(rebuilt),
        };
        Ok(Journal::replace(store, state).await?)
    }
}
