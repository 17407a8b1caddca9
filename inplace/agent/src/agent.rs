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

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::keys::{self, OsUpdateExit};
use inplace_api::osc::secret::{DecodedOsc, decode_secret};
use inplace_api::unmanaged::Unmanaged;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use rackproof_clock::Clock;
use tokio::sync::{Notify, watch};

use crate::assess::BootAssessor;
use crate::config::AgentConfig;
use crate::follow::follow;
use crate::heartbeat::Heartbeat;
use crate::node::{self, NodeHandle};
use crate::osupdate::runner::{OsUpdateInvocation, OsUpdateRunner, RunError};
use crate::plan::{Machine, plan};
use crate::platform::files::FileSink;
use crate::platform::kubelet::Kubelet;
use crate::platform::os_version::OsVersionSource;
use crate::platform::reboot::Reboot;
use crate::state::{self, AgentState, Applied, OsProgress, Plan};
use crate::store::StateStore;
use crate::together::run_together;

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
    heartbeat: Option<Heartbeat>,
    /// The OSC last decoded, by the Secret version it came from: a pass reads the Secret afresh
    /// every time, but decodes its document only when the Secret changed.
    decoded_osc: Arc<Mutex<Option<(SecretVersion, DecodedOsc)>>>,
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

/// Formats an error with its sources.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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

/// What a reconcile pass reads of the Node: labels, annotations, and each condition's type,
/// status and reason (not the heartbeat times, which move with every status report).
pub fn node_fingerprint(node: &Node) -> u64 {
    let mut hasher = DefaultHasher::new();
    node.metadata.uid.hash(&mut hasher);
    node.metadata.labels.hash(&mut hasher);
    node.metadata.annotations.hash(&mut hasher);
    for condition in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        (&condition.type_, &condition.status, &condition.reason).hash(&mut hasher);
    }
    hasher.finish()
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
        let heartbeat = config
            .heartbeat
            .clone()
            .map(|hb| Heartbeat::new(client.clone(), &config, hb, clock.clone()));
        Self {
            config,
            platform,
            client,
            clock,
            node,
            heartbeat,
            decoded_osc: Arc::default(),
        }
    }

    /// Runs until the future is dropped: watches of the Node and of the OSC Secret, the
    /// heartbeat (if configured, sharing the Node watch), and a reconcile pass whenever one of
    /// them changed in a way a pass reads ([`node_fingerprint`]; the Secret's resourceVersion),
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
        let heartbeat_node = node.clone();
        let heartbeat = async {
            match &self.heartbeat {
                Some(hb) => {
                    hb.run_with(
                        self.platform.os_version.as_ref(),
                        self.platform.kubelet.as_ref(),
                        heartbeat_node,
                    )
                    .await
                }
                None => std::future::pending().await,
            }
        };
        let reads = (node.clone(), osc.clone());
        let changes = wake_on_changes(node, osc, &wake);
        let reconcile = async {
            loop {
                let wait = match self
                    .reconcile_with(Reads::Followed {
                        node: &reads.0,
                        osc: &reads.1,
                    })
                    .await
                {
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
                };
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
            Box::pin(heartbeat),
            Box::pin(changes),
            Box::pin(reconcile),
        ])
        .await;
    }

    /// One heartbeat (if configured) and one reconcile pass, with the heartbeat running during the
    /// pass (`--once`).
    pub async fn run_once(&self) -> Result<Outcome, AgentError> {
        let Some(hb) = &self.heartbeat else {
            return self.reconcile().await;
        };
        if let Err(e) = hb
            .beat(
                self.platform.os_version.as_ref(),
                self.platform.kubelet.as_ref(),
            )
            .await
        {
            tracing::warn!(error = %error_chain(&e), "heartbeat failed");
        }
        // Biased: the same order every time, so simulated runs are reproducible from their seed.
        tokio::select! {
            biased;
            outcome = self.reconcile() => outcome,
            () = hb.run(self.platform.os_version.as_ref(), self.platform.kubelet.as_ref()) => unreachable!("the heartbeat runs forever"),
        }
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
        let mut memo = self
            .decoded_osc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    async fn save(&self, state: &AgentState) -> Result<(), AgentError> {
        state::save(self.platform.store.as_ref(), state).await?;
        Ok(())
    }

    /// One reconcile pass (see the module docs), reading the Node and the OSC Secret from the API.
    pub async fn reconcile(&self) -> Result<Outcome, AgentError> {
        self.reconcile_with(Reads::Live).await
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
        let mut state = match state::load(self.platform.store.as_ref()).await {
            Ok(state) => state,
            Err(state::StateError::Corrupt(e)) => self.recover(&decoded, &node, &e).await?,
            Err(e) => return Err(e.into()),
        };
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
            if let Some(old) = state.plan.take()
                && old.os_version.is_some()
                && old.os_version == new_plan.os_version
            {
                new_plan.os = old.os;
            }
            tracing::info!(checksum = %new_plan.checksum, changes = ?new_plan.changes, "new operating system config");
            state.plan = Some(new_plan);
            self.save(&state).await?;
        }
        let outcome = self.carry_out(&mut state, &node).await?;
        if let Outcome::Applied = outcome {
            let plan = state.plan.take().expect("a completed pass has a plan");
            state.applied = Some(Applied {
                checksum: plan.checksum,
                osc: plan.osc,
            });
            self.save(&state).await?;
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
    ) -> Result<AgentState, AgentError> {
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
        let Ok(mut rebuilt) = plan(None, &machine, &decoded.osc, &decoded.checksum) else {
            return Ok(AgentState::default());
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
        self.save(&state).await?;
        Ok(state)
    }

    fn plan_mut<'a>(&self, state: &'a mut AgentState) -> &'a mut Plan {
        state
            .plan
            .as_mut()
            .expect("reconcile creates the plan first")
    }

    async fn fail(&self, state: &mut AgentState, reason: String) -> Result<Outcome, AgentError> {
        tracing::warn!(%reason, "update failed");
        let plan = self.plan_mut(state);
        plan.failure = Some(reason.clone());
        plan.failure_reported = false;
        self.save(state).await?;
        self.node.mark_failed(&reason).await?;
        self.plan_mut(state).failure_reported = true;
        self.save(state).await?;
        Ok(Outcome::Failed(reason))
    }

    async fn carry_out(
        &self,
        state: &mut AgentState,
        node: &k8s_openapi::api::core::v1::Node,
    ) -> Result<Outcome, AgentError> {
        let plan = self.plan_mut(state);
        if let Some(reason) = plan.failure.clone() {
            if !plan.failure_reported {
                self.node.mark_failed(&reason).await?;
                self.plan_mut(state).failure_reported = true;
                self.save(state).await?;
                return Ok(Outcome::Failed(reason));
            }
            let still_marked =
                node::label(node, keys::LABEL_UPDATE_RESULT) == Some(keys::UPDATE_RESULT_FAILED);
            // A plan without drain never gets `ReadyForUpdate` (no one drains for it): the
            // removed mark alone starts it over.
            let needs_drain = plan.needs_drain();
            if still_marked || (needs_drain && !node::ready_for_update(node)) {
                return Ok(Outcome::Failed(reason));
            }
            tracing::info!(
                needs_drain,
                "the failed mark was removed (and the node is ready for update, if the plan needs a drain); starting over"
            );
            let plan = self.plan_mut(state);
            plan.failure = None;
            plan.failure_reported = false;
            plan.os = OsProgress::default();
            self.save(state).await?;
        }

        if !self.plan_mut(state).done.files {
            let osc = self.plan_mut(state).osc.clone();
            let wanted = self.plan_mut(state).files.clone();
            for file in osc.spec.files.iter().filter(|f| wanted.contains(&f.path)) {
                let bytes = match file.bytes() {
                    Ok(b) => b,
                    Err(e) => {
                        return self
                            .fail(
                                state,
                                format!("file {} of the OSC is unusable: {e}", file.path),
                            )
                            .await;
                    }
                };
                if let Err(e) = self
                    .platform
                    .files
                    .write(&file.path, &bytes, file.permissions.unwrap_or(0o600))
                    .await
                {
                    return self
                        .fail(
                            state,
                            format!("failed to write file {}: {}", file.path, error_chain(&e)),
                        )
                        .await;
                }
            }
            self.plan_mut(state).done.files = true;
            self.save(state).await?;
        }
        let plan = self.plan_mut(state);
        if plan.kubelet_version.is_some()
            && !plan.kubelet_needs_drain
            && !plan.done.kubelet
            && let Step::Stop(outcome) = self.update_kubelet(state).await?
        {
            return Ok(outcome);
        }
        if !self.plan_mut(state).needs_drain() {
            self.node
                .mark(
                    &BTreeMap::new(),
                    &BTreeMap::from([(
                        keys::ANNOTATION_CHECKSUM_APPLIED_OSC,
                        Some(self.plan_mut(state).checksum.as_str()),
                    )]),
                )
                .await?;
            return Ok(Outcome::Applied);
        }
        if !node::ready_for_update(node) {
            return Ok(Outcome::Waiting(format!(
                "waiting for the node's {} condition to say {}",
                keys::CONDITION_IN_PLACE_UPDATE,
                keys::REASON_READY_FOR_UPDATE
            )));
        }

        let plan = self.plan_mut(state);
        if plan.ca_rotation && !plan.done.ca_rotation {
            tracing::info!("certificate authorities rotation: re-bootstrapping the kubelet");
            if let Err(e) = self.platform.kubelet.rebootstrap().await {
                return self
                    .fail(
                        state,
                        format!(
                            "failed to re-bootstrap the kubelet after the CA rotation: {}",
                            error_chain(&e)
                        ),
                    )
                    .await;
            }
            if !self.wait_kubelet_healthy().await {
                let reason = format!(
                    "kubelet is not healthy within {} after the CA rotation",
                    rackproof_clock::format_duration(self.config.kubelet_health_timeout)
                );
                return self.fail(state, reason).await;
            }
            self.plan_mut(state).done.ca_rotation = true;
            self.save(state).await?;
        }
        let plan = self.plan_mut(state);
        if plan.sa_rotation && !plan.done.sa_rotation {
            tracing::info!("service account key rotation: refreshing tokens");
            if let Err(reason) = self.sync_tokens().await {
                return self.fail(state, reason).await;
            }
            self.plan_mut(state).done.sa_rotation = true;
            self.save(state).await?;
        }
        let plan = self.plan_mut(state);
        if plan.kubelet_version.is_some()
            && !plan.done.kubelet
            && let Step::Stop(outcome) = self.update_kubelet(state).await?
        {
            return Ok(outcome);
        }
        let plan = self.plan_mut(state);
        if plan.os_version.is_some()
            && !plan.done.os
            && let Step::Stop(outcome) = self.update_os(state).await?
        {
            return Ok(outcome);
        }
        if !self.plan_mut(state).done.reported {
            let deleted = self.node.delete_pods().await?;
            tracing::info!(deleted, "deleted the pods left on the node");
            let checksum = self.plan_mut(state).checksum.clone();
            self.node
                .mark(
                    &BTreeMap::from([(
                        keys::LABEL_UPDATE_RESULT,
                        Some(keys::UPDATE_RESULT_SUCCESSFUL),
                    )]),
                    &BTreeMap::from([
                        (keys::ANNOTATION_UPDATE_FAILED_REASON, None),
                        (keys::ANNOTATION_UPDATING_OS_VERSION, None),
                        (
                            keys::ANNOTATION_CHECKSUM_APPLIED_OSC,
                            Some(checksum.as_str()),
                        ),
                    ]),
                )
                .await?;
            self.plan_mut(state).done.reported = true;
            self.save(state).await?;
        }
        Ok(Outcome::Applied)
    }

    async fn wait_kubelet_healthy(&self) -> bool {
        let probe = async {
            loop {
                if self.platform.kubelet.healthy().await {
                    return;
                }
                self.clock.sleep(self.config.kubelet_health_interval).await;
            }
        };
        self.clock
            .timeout(self.config.kubelet_health_timeout, probe)
            .await
            .is_ok()
    }

    async fn update_kubelet(&self, state: &mut AgentState) -> Result<Step, AgentError> {
        let plan = self.plan_mut(state);
        let version = plan
            .kubelet_version
            .clone()
            .expect("called with a kubelet version");
        let config = plan
            .osc
            .spec
            .in_place_updates
            .as_ref()
            .map(|u| serde_json::to_string(&u.kubelet).expect("kubelet config serialises"));
        tracing::info!(%version, "updating the kubelet");
        if let Err(e) = self
            .platform
            .kubelet
            .apply(&version, config.as_deref())
            .await
        {
            return Ok(Step::Stop(
                self.fail(
                    state,
                    format!(
                        "failed to update the kubelet to {version}: {}",
                        error_chain(&e)
                    ),
                )
                .await?,
            ));
        }
        if !self.wait_kubelet_healthy().await {
            let reason = format!(
                "kubelet {version} is not healthy within {} after the in-place update",
                rackproof_clock::format_duration(self.config.kubelet_health_timeout)
            );
            return Ok(Step::Stop(self.fail(state, reason).await?));
        }
        self.plan_mut(state).done.kubelet = true;
        self.save(state).await?;
        Ok(Step::Continue)
    }

    async fn sync_tokens(&self) -> Result<(), String> {
        for token in &self.config.token_secrets {
            let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &token.namespace);
            let secret = secrets.get(&token.name).await.map_err(|e| {
                format!(
                    "failed to read token secret {}/{}: {}",
                    token.namespace,
                    token.name,
                    error_chain(&e)
                )
            })?;
            let data = secret
                .data
                .as_ref()
                .and_then(|d| d.get(&token.key))
                .ok_or_else(|| {
                    format!(
                        "token secret {}/{} has no {:?} data",
                        token.namespace, token.name, token.key
                    )
                })?;
            self.platform
                .files
                .write(&token.path, &data.0, 0o600)
                .await
                .map_err(|e| {
                    format!(
                        "failed to write token file {}: {}",
                        token.path,
                        error_chain(&e)
                    )
                })?;
        }
        Ok(())
    }

    async fn update_os(&self, state: &mut AgentState) -> Result<Step, AgentError> {
        let target = self
            .plan_mut(state)
            .os_version
            .clone()
            .expect("called with an OS version");
        let running = self
            .platform
            .os_version
            .running_version()
            .map_err(AgentError::OsVersion)?;
        if running == target {
            let blessed = self
                .platform
                .boot
                .bless_booted()
                .map_err(AgentError::Assess)?;
            tracing::info!(%target, entry = %blessed, "running the attempted OS version; blessed the booted entry");
            self.plan_mut(state).done.os = true;
            self.save(state).await?;
            return Ok(Step::Continue);
        }
        if self.plan_mut(state).os.rebooting {
            let boot = self.platform.reboot.boot_id();
            if boot.is_some() && boot == self.plan_mut(state).os.reboot_from_boot {
                tracing::warn!("the requested reboot never happened (same boot); rebooting again");
                return self.reboot(state, &target).await;
            }
            if let Err(e) = self.platform.boot.reject_version(&target) {
                tracing::warn!(error = %error_chain(&e), "could not mark the failed entry bad");
            }
            let reason = format!(
                "OS update rolled back: the node rebooted into version {target} but came back on version {running}; \
                 the new boot entry failed and systemd-boot fell back to the previous one"
            );
            return Ok(Step::Stop(self.fail(state, reason).await?));
        }
        if self.plan_mut(state).os.installed {
            return self.reboot(state, &target).await;
        }
        let max = self.config.os_update_max_attempts.max(1);
        let progress = &mut self.plan_mut(state).os;
        if progress.started > progress.finished {
            let interrupted = progress.started;
            progress.finished = progress.started;
            progress.last_error = Some(format!(
                "attempt {interrupted} was interrupted (the agent stopped while the command ran)"
            ));
            progress.next_run_at = self
                .clock
                .now()
                .checked_add(self.config.backoff_before(interrupted + 1))
                .ok();
            tracing::warn!(
                attempt = interrupted,
                "an OS-update run was interrupted; it is not repeated"
            );
            self.save(state).await?;
        }
        let progress = &self.plan_mut(state).os;
        if progress.started >= max {
            let reason = format!(
                "OS update to {target} failed after {max} attempts (retriable errors turn non-retriable after {max}); last: {}",
                progress.last_error.clone().unwrap_or_default()
            );
            return Ok(Step::Stop(self.fail(state, reason).await?));
        }
        if let Some(at) = progress.next_run_at
            && at > self.clock.now()
        {
            return Ok(Step::Stop(Outcome::Retrying(at)));
        }
        let Some(command) = self.plan_mut(state).osc.os_update().cloned() else {
            return Ok(Step::Stop(
                self.fail(state, "the OSC names no OS-update command".to_owned())
                    .await?,
            ));
        };
        self.node
            .mark(
                &BTreeMap::new(),
                &BTreeMap::from([(keys::ANNOTATION_UPDATING_OS_VERSION, Some(target.as_str()))]),
            )
            .await?;
        let progress = &mut self.plan_mut(state).os;
        progress.started += 1;
        let attempt = progress.started;
        self.save(state).await?;
        let invocation = OsUpdateInvocation {
            command: command.command.clone(),
            args: command.args.clone(),
            timeout: self.config.os_update_timeout,
            attempt,
            node: self.config.node_name.clone(),
        };
        tracing::info!(%target, attempt, command = %invocation.command, args = ?invocation.args, "running the OS-update command");
        let result = self.platform.os_update.run(&invocation).await;
        let progress = &mut self.plan_mut(state).os;
        progress.finished = attempt;
        let retriable = match &result {
            Ok(outcome) if outcome.exit == OsUpdateExit::Success => {
                progress.installed = true;
                progress.last_error = None;
                self.save(state).await?;
                return self.reboot(state, &target).await;
            }
            Ok(outcome) => {
                let error = format!(
                    "attempt {attempt}: {} (output: {})",
                    outcome.exit,
                    outcome.output.trim()
                );
                (outcome.exit.is_retriable(), error)
            }
            Err(e @ RunError::TimedOut { .. }) => (true, format!("attempt {attempt}: {e}")),
            Err(e) => (false, format!("attempt {attempt}: {e}")),
        };
        let (retriable, error) = retriable;
        progress.last_error = Some(error.clone());
        if !retriable {
            return Ok(Step::Stop(
                self.fail(
                    state,
                    format!("OS update to {target} failed with a non-retriable error: {error}"),
                )
                .await?,
            ));
        }
        if attempt >= max {
            let reason = format!(
                "OS update to {target} failed after {max} attempts (retriable errors turn non-retriable after {max}); last: {error}"
            );
            return Ok(Step::Stop(self.fail(state, reason).await?));
        }
        let at = self
            .clock
            .now()
            .checked_add(self.config.backoff_before(attempt + 1))
            .unwrap_or_else(|_| self.clock.now());
        self.plan_mut(state).os.next_run_at = Some(at);
        self.save(state).await?;
        tracing::warn!(%error, retry_at = %at, "retriable OS-update failure");
        Ok(Step::Stop(Outcome::Retrying(at)))
    }

    async fn reboot(&self, state: &mut AgentState, target: &str) -> Result<Step, AgentError> {
        let boot = self.platform.reboot.boot_id();
        let os = &mut self.plan_mut(state).os;
        os.rebooting = true;
        os.reboot_from_boot = boot;
        self.save(state).await?;
        tracing::info!(%target, "rebooting into the new OS version");
        let error = self.platform.reboot.reboot().await;
        self.plan_mut(state).os.rebooting = false;
        let reason = format!(
            "failed to reboot into OS version {target}: {}",
            error_chain(&error)
        );
        Ok(Step::Stop(self.fail(state, reason).await?))
    }
}
