//! MachineDeployment controller: the in-place rollout (MCM's `rolloutInPlace`).
//!
//! One pass over a MachineDeployment with `strategy.type: InPlaceUpdate`:
//!
//! 1. **New MachineSet.** The template's hash (SHA-256 of its JSON, 10 hex digits, label
//!    `machine-template-hash`) names the new set `<deployment>-<hash>`. It is created with all
//!    replicas when no old set exists, else with `maxSurge` replicas (Auto) or none (Manual).
//! 2. **Protection.** While old sets have machines: old sets get `scale-up-disabled`; every node of
//!    the deployment gets the cluster-autoscaler scale-down-disabled annotations (with MCM's
//!    `-by-mcm` marker, so only ours are removed later); old nodes get `candidate-for-update`.
//! 3. **Counts** (MCM's `syncMachineSets`): a new set with more machines than replicas grows by the
//!    machines that arrived with the Machine label `update-result=successful`, which is then removed;
//!    old sets shrink to the machines they still own. New-set nodes whose update succeeded are
//!    cleared: labels and reason annotation removed, uncordoned (the Machine controller then drops
//!    the condition and sets the Machine `Running`).
//! 4. **New-set size**: capped at `replicas`; raised to fill `replicas − old machines`.
//! 5. **Transfer**: an old Machine whose node says `update-result=successful` and whose phase is
//!    `InPlaceUpdateSuccessful` gets the new set as controller owner and the new template-hash
//!    label (the GEP's "owner reference update" option, which MCM implements), then old −1, new +1.
//!    First the configuration the agent applied (node annotation `checksum/cloud-config-data`)
//!    is compared with the current OSC (the `checksum/data-script` of the Secret the template
//!    names): a success for an earlier configuration — a forced update replaced it while the
//!    node was updating — moves nothing; the result label is removed (conditional on the Node
//!    as read, so a newer result is never lost), and the node, still selected, is walked through
//!    drain and `ReadyForUpdate` again to take the current configuration.
//! 6. **Surplus**: once the new set holds `replicas` (surge machines plus transferred ones) and no
//!    old node is in progress, old sets go to zero: the `maxSurge` machines the surge replaced are
//!    terminated.
//! 7. **Selection** (`plan`): Auto labels `selected-for-update` within `maxUnavailable`;
//!    Manual waits for a person. The halt is reported in status condition
//!    [`CONDITION_HALTED`] and with Events when it starts and ends.
//! 8. **Completion**: old sets without machines are deleted, our autoscaler annotations removed.
//!
//! Every write is idempotent and every decision is re-derived from what the API says (MachineSets,
//! Machines and Nodes through the watch caches, never older than this orchestrator's own last
//! write, see `cache`), so a crash between any two writes is repaired by the next pass.

mod completion;
mod machinesets;
mod pass;
mod rollout;
mod selection;

use inplace_api::crd::MachineDeploymentStrategyType;
use inplace_api::crd::{MachineDeployment, MachineTemplateSpec};
use inplace_api::keys::MACHINE_TEMPLATE_HASH_LABEL;
use inplace_api::strategy::{OrchestrationType, scaled_int_or_percent};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::plan::Orchestration;
use crate::{Action, Context, settings};

use pass::{Pass, Progress, Sets};

/// MachineDeployment status condition: `True` while failed nodes halt the rollout.
pub const CONDITION_HALTED: &str = "InPlaceUpdateHalted";
/// Reason of [`CONDITION_HALTED`] while halted.
pub const REASON_HALTED: &str = "FailedNodesReachedMaxUnavailable";

/// The template hash that names the MachineSet for `template`. The MCM settings (timeouts,
/// `maxEvictRetries`) are left out, as MCM does: changing them starts no rollout (`settings`).
pub fn template_hash(template: &MachineTemplateSpec) -> String {
    let mut clean = template.clone();
    clean.metadata.labels.remove(MACHINE_TEMPLATE_HASH_LABEL);
    clean.spec = settings::without(&clean.spec);
    let bytes = serde_json::to_vec(&clean).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    hex::encode(digest)[..10].to_owned()
}

/// What the deployment's strategy says, resolved against its replicas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    pub(crate) replicas: u32,
    pub(crate) max_surge: u32,
    pub(crate) max_unavailable: u32,
    pub(crate) orchestration: Orchestration,
}

pub(crate) fn resolve(md: &MachineDeployment) -> Option<Resolved> {
    let strategy = &md.spec.strategy;
    if strategy.type_.as_ref() != Some(&MachineDeploymentStrategyType::InPlaceUpdate) {
        return None;
    }
    let in_place = strategy.in_place_update.clone().unwrap_or_default();
    let replicas = md.spec.replicas.max(0);
    let orchestration = match in_place.orchestration_type {
        Some(OrchestrationType::Manual) => Orchestration::Manual,
        _ => Orchestration::Auto,
    };
    let value = |v: &Option<IntOrString>, up: bool, default: i32| {
        v.as_ref()
            .and_then(|v| scaled_int_or_percent(v, replicas, up))
            .unwrap_or(default)
            .max(0) as u32
    };
    let max_surge = if orchestration == Orchestration::Manual {
        0
    } else {
        value(&in_place.max_surge, true, 0)
    };
    let mut max_unavailable = value(&in_place.max_unavailable, false, 1).min(replicas as u32);
    if max_unavailable == 0 && max_surge == 0 {
        max_unavailable = 1.min(replicas as u32);
    }
    Some(Resolved {
        replicas: replicas as u32,
        max_surge,
        max_unavailable,
        orchestration,
    })
}

/// One pass over `md`: the numbered steps of this module's documentation, in order. A step that
/// wrote something the next step must see ends the pass with [`Action::soon`].
pub(crate) async fn reconcile(md: &MachineDeployment, ctx: &Context) -> Result<Action, Error> {
    if md.metadata.deletion_timestamp.is_some() {
        return Ok(Action::idle(ctx));
    }
    let Some(resolved) = resolve(md) else {
        // Rolling updates are out of scope (ARCHITECTURE.md): leave such deployments alone.
        return Ok(Action::idle(ctx));
    };
    let Sets { hash, new, old } = Sets::read(md, ctx).await?;
    // 1. New MachineSet.
    let Some(new) = new else {
        machinesets::create_new(md, &resolved, &hash, &old, ctx).await?;
        return Ok(Action::soon());
    };
    if machinesets::copy_settings_into_all(md, &new, &old, ctx).await? {
        return Ok(Action::soon());
    }
    let observed = pass::Observed::read(md, ctx).await?;
    let pass = Pass::new(md, ctx, resolved, &hash, &new, &old, &observed);
    let mut progress = Progress::start(&pass);
    // 2. Protection.
    if pass.rolling {
        rollout::protect(&pass, &mut progress).await?;
    }
    // 3. Counts.
    rollout::count(&pass, &mut progress).await?;
    // 4. New-set size.
    rollout::size_new_set(&pass, &mut progress).await?;
    // 5. Transfer.
    rollout::transfer_updated(&pass, &mut progress).await?;
    if progress.changed {
        return Ok(Action::soon());
    }
    // 6. Surplus.
    if rollout::terminate_surplus(&pass, &progress).await? {
        return Ok(Action::soon());
    }
    // 7. Selection.
    let selection = selection::select(&pass, &progress).await?;
    // 8. Completion.
    if !pass.rolling {
        completion::complete(&pass).await?;
    }
    completion::write_status(&pass, &selection).await?;
    Ok(if selection.plan.select.is_empty() {
        Action::idle(ctx)
    } else {
        Action::soon()
    })
}
