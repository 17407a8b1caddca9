//! Steps 4 to 6 of a pass (see the module docs of [`crate::agent`]): files, kubelet, the wait
//! for `ReadyForUpdate`, credentials rotation, the OS update and the success report, each
//! recorded in the [`Journal`] once it took effect; and how a failure is recorded and reported.

use std::collections::BTreeMap;

use inplace_api::keys;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use rackproof_std::error_chain;

use super::journal::Journal;

use super::{Agent, AgentError, Outcome, Step};
use crate::node;
use crate::state::{OsProgress, Plan};

impl Agent {
    /// Records the failure `reason` and marks the Node failed.
    pub(super) async fn fail(
        &self,
        journal: &mut Journal<'_>,
        reason: String,
    ) -> Result<Outcome, AgentError> {
        self.fail_after(journal, reason, |_| {}).await
    }

    /// [`Agent::fail`], with `finish` applied to the plan in the same write as the failure:
    /// what the failed step learned before it failed.
    pub(super) async fn fail_after(
        &self,
        journal: &mut Journal<'_>,
        reason: String,
        finish: impl FnOnce(&mut Plan),
    ) -> Result<Outcome, AgentError> {
        tracing::warn!(%reason, "update failed");
        journal
            .record(|plan| {
                finish(plan);
                plan.failure = Some(reason.clone());
                plan.failure_reported = false;
            })
            .await?;
        self.node.mark_failed(&reason).await?;
        journal.record(|plan| plan.failure_reported = true).await?;
        Ok(Outcome::Failed(reason))
    }

    /// Carries out the journal's plan as far as it goes now.
    pub(super) async fn carry_out(
        &self,
        journal: &mut Journal<'_>,
        node: &Node,
    ) -> Result<Outcome, AgentError> {
        let plan = journal.plan();
        if let Some(reason) = plan.failure.clone() {
            if !plan.failure_reported {
                self.node.mark_failed(&reason).await?;
                journal.record(|plan| plan.failure_reported = true).await?;
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
            journal
                .record(|plan| {
                    plan.failure = None;
                    plan.failure_reported = false;
                    plan.os = OsProgress::default();
                })
                .await?;
        }

        if !journal.plan().done.files
            && let Step::Stop(outcome) = self.write_files(journal).await?
        {
            return Ok(outcome);
        }
        let plan = journal.plan();
        if plan.kubelet_version.is_some()
            && !plan.kubelet_needs_drain
            && !plan.done.kubelet
            && let Step::Stop(outcome) = self.update_kubelet(journal).await?
        {
            return Ok(outcome);
        }
        if !journal.plan().needs_drain() {
            self.node
                .mark(
                    &BTreeMap::new(),
                    &BTreeMap::from([(
                        keys::ANNOTATION_CHECKSUM_APPLIED_OSC,
                        Some(journal.plan().checksum.as_str()),
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

        let plan = journal.plan();
        if plan.ca_rotation
            && !plan.done.ca_rotation
            && let Step::Stop(outcome) = self.rotate_ca(journal).await?
        {
            return Ok(outcome);
        }
        let plan = journal.plan();
        if plan.sa_rotation && !plan.done.sa_rotation {
            tracing::info!("service account key rotation: refreshing tokens");
            if let Err(reason) = self.sync_tokens().await {
                return self.fail(journal, reason).await;
            }
            journal.record(|plan| plan.done.sa_rotation = true).await?;
        }
        let plan = journal.plan();
        if plan.kubelet_version.is_some()
            && !plan.done.kubelet
            && let Step::Stop(outcome) = self.update_kubelet(journal).await?
        {
            return Ok(outcome);
        }
        let plan = journal.plan();
        if plan.os_version.is_some()
            && !plan.done.os
            && let Step::Stop(outcome) = self.update_os(journal).await?
        {
            return Ok(outcome);
        }
        if !journal.plan().done.reported {
            self.report_success(journal).await?;
        }
        Ok(Outcome::Applied)
    }

    /// Writes the plan's changed files.
    async fn write_files(&self, journal: &mut Journal<'_>) -> Result<Step, AgentError> {
        let plan = journal.plan();
        let osc = plan.osc.clone();
        let wanted = plan.files.clone();
        for file in osc.spec.files.iter().filter(|f| wanted.contains(&f.path)) {
            let bytes = match file.bytes() {
                Ok(b) => b,
                Err(e) => {
                    let reason = format!("file {} of the OSC is unusable: {e}", file.path);
                    return Ok(Step::Stop(self.fail(journal, reason).await?));
                }
            };
            if let Err(e) = self
                .platform
                .files
                .write(&file.path, &bytes, file.permissions.unwrap_or(0o600))
                .await
            {
                let reason = format!("failed to write file {}: {}", file.path, error_chain(&e));
                return Ok(Step::Stop(self.fail(journal, reason).await?));
            }
        }
        journal.record(|plan| plan.done.files = true).await?;
        Ok(Step::Continue)
    }

    /// The certificate authorities rotation: re-bootstraps the kubelet and waits for its health.
    async fn rotate_ca(&self, journal: &mut Journal<'_>) -> Result<Step, AgentError> {
        tracing::info!("certificate authorities rotation: re-bootstrapping the kubelet");
        if let Err(e) = self.platform.kubelet.rebootstrap().await {
            let reason = format!(
                "failed to re-bootstrap the kubelet after the CA rotation: {}",
                error_chain(&e)
            );
            return Ok(Step::Stop(self.fail(journal, reason).await?));
        }
        if !self.wait_kubelet_healthy().await {
            let reason = format!(
                "kubelet is not healthy within {} after the CA rotation",
                rackproof_clock::format_duration(self.config.kubelet_health_timeout)
            );
            return Ok(Step::Stop(self.fail(journal, reason).await?));
        }
        journal.record(|plan| plan.done.ca_rotation = true).await?;
        Ok(Step::Continue)
    }

    /// Success of an in-place update: the pods left on the node deleted, the Node labelled
    /// `update-result=successful` with the applied checksum.
    async fn report_success(&self, journal: &mut Journal<'_>) -> Result<(), AgentError> {
        let deleted = self.node.delete_pods().await?;
        tracing::info!(deleted, "deleted the pods left on the node");
        let checksum = journal.plan().checksum.clone();
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
        journal.record(|plan| plan.done.reported = true).await?;
        Ok(())
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

    async fn update_kubelet(&self, journal: &mut Journal<'_>) -> Result<Step, AgentError> {
        let plan = journal.plan();
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
                    journal,
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
            return Ok(Step::Stop(self.fail(journal, reason).await?));
        }
        journal.record(|plan| plan.done.kubelet = true).await?;
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
}
