//! The OS-update step (its cases in the module docs of [`crate::agent`]): bless after the boot
//! into the target, detect a rollback or a reboot that never happened, run the OS-update command
//! with its retry budget, and reboot. Each change is recorded in the [`Journal`] before the
//! action it guards (crash-safety rules 2 and 3 of [`crate::state`]).

use std::collections::BTreeMap;

use inplace_api::keys::{self, OsUpdateExit};
use rackproof_std::error_chain;

use super::journal::Journal;

use super::{Agent, AgentError, Outcome, Step};
use crate::osupdate::runner::{OsUpdateInvocation, RunError};
use crate::state::Plan;

impl Agent {
    pub(super) async fn update_os(&self, journal: &mut Journal<'_>) -> Result<Step, AgentError> {
        let target = journal
            .plan()
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
            journal.record(|plan| plan.done.os = true).await?;
            return Ok(Step::Continue);
        }
        if journal.plan().os.rebooting {
            let boot = self.platform.reboot.boot_id();
            if boot.is_some() && boot == journal.plan().os.reboot_from_boot {
                tracing::warn!("the requested reboot never happened (same boot); rebooting again");
                return self.reboot(journal, &target).await;
            }
            if let Err(e) = self.platform.boot.reject_version(&target) {
                tracing::warn!(error = %error_chain(&e), "could not mark the failed entry bad");
            }
            let reason = format!(
                "OS update rolled back: the node rebooted into version {target} but came back on version {running}; \
                 the new boot entry failed and systemd-boot fell back to the previous one"
            );
            return Ok(Step::Stop(self.fail(journal, reason).await?));
        }
        if journal.plan().os.installed {
            return self.reboot(journal, &target).await;
        }
        let max = self.config.os_update_max_attempts.max(1);
        let progress = &journal.plan().os;
        if progress.started > progress.finished {
            let interrupted = progress.started;
            let next_run_at = self
                .clock
                .now()
                .checked_add(self.config.backoff_before(interrupted + 1))
                .ok();
            tracing::warn!(
                attempt = interrupted,
                "an OS-update run was interrupted; it is not repeated"
            );
            journal
                .record(|plan| {
                    let progress = &mut plan.os;
                    progress.finished = progress.started;
                    progress.last_error = Some(format!(
                        "attempt {interrupted} was interrupted (the agent stopped while the command ran)"
                    ));
                    progress.next_run_at = next_run_at;
                })
                .await?;
        }
        let progress = &journal.plan().os;
        if progress.started >= max {
            let reason = format!(
                "OS update to {target} failed after {max} attempts (retriable errors turn non-retriable after {max}); last: {}",
                progress.last_error.clone().unwrap_or_default()
            );
            return Ok(Step::Stop(self.fail(journal, reason).await?));
        }
        if let Some(at) = progress.next_run_at
            && at > self.clock.now()
        {
            return Ok(Step::Stop(Outcome::Retrying(at)));
        }
        let Some(command) = journal.plan().osc.os_update().cloned() else {
            return Ok(Step::Stop(
                self.fail(journal, "the OSC names no OS-update command".to_owned())
                    .await?,
            ));
        };
        self.node
            .mark(
                &BTreeMap::new(),
                &BTreeMap::from([(keys::ANNOTATION_UPDATING_OS_VERSION, Some(target.as_str()))]),
            )
            .await?;
        journal.record(|plan| plan.os.started += 1).await?;
        let attempt = journal.plan().os.started;
        let invocation = OsUpdateInvocation {
            command: command.command.clone(),
            args: command.args.clone(),
            timeout: self.config.os_update_timeout,
            attempt,
            node: self.config.node_name.clone(),
        };
        tracing::info!(%target, attempt, command = %invocation.command, args = ?invocation.args, "running the OS-update command");
        let result = self.platform.os_update.run(&invocation).await;
        let (retriable, error) = match &result {
            Ok(outcome) if outcome.exit == OsUpdateExit::Success => {
                journal
                    .record(|plan| {
                        plan.os.finished = attempt;
                        plan.os.installed = true;
                        plan.os.last_error = None;
                    })
                    .await?;
                return self.reboot(journal, &target).await;
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
        // The attempt's end is written with whatever comes of it: a failure, or the retry time.
        let finished = |plan: &mut Plan| {
            plan.os.finished = attempt;
            plan.os.last_error = Some(error.clone());
        };
        if !retriable {
            let reason =
                format!("OS update to {target} failed with a non-retriable error: {error}");
            return Ok(Step::Stop(
                self.fail_after(journal, reason, finished).await?,
            ));
        }
        if attempt >= max {
            let reason = format!(
                "OS update to {target} failed after {max} attempts (retriable errors turn non-retriable after {max}); last: {error}"
            );
            return Ok(Step::Stop(
                self.fail_after(journal, reason, finished).await?,
            ));
        }
        let at = self
            .clock
            .now()
            .checked_add(self.config.backoff_before(attempt + 1))
            .unwrap_or_else(|_| self.clock.now());
        journal
            .record(|plan| {
                finished(plan);
                plan.os.next_run_at = Some(at);
            })
            .await?;
        tracing::warn!(%error, retry_at = %at, "retriable OS-update failure");
        Ok(Step::Stop(Outcome::Retrying(at)))
    }

    /// Records `rebooting` with the current boot id, then reboots; a reboot that returns failed.
    async fn reboot(&self, journal: &mut Journal<'_>, target: &str) -> Result<Step, AgentError> {
        let boot = self.platform.reboot.boot_id();
        journal
            .record(|plan| {
                plan.os.rebooting = true;
                plan.os.reboot_from_boot = boot;
            })
            .await?;
        tracing::info!(%target, "rebooting into the new OS version");
        let error = self.platform.reboot.reboot().await;
        let reason = format!(
            "failed to reboot into OS version {target}: {}",
            error_chain(&error)
        );
        Ok(Step::Stop(
            self.fail_after(journal, reason, |plan| plan.os.rebooting = false)
                .await?,
        ))
    }
}
