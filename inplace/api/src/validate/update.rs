//! Rules 8–14: what may change, and when.

use super::{Rule, ValidationContext, Violation};
use crate::classify::{classify, replacement_fields};
use crate::crd::WorkerPoolSpec;
use crate::keys::{ANNOTATION_OPERATION, OPERATION_FORCE_IN_PLACE_UPDATE, has_operation};
use crate::pool::{ResolvedPool, field};
use crate::version::ImageVersion;

/// Rule 8, which needs no resolved pools.
pub(super) fn check_strategy(old: &WorkerPoolSpec, new: &WorkerPoolSpec, out: &mut Vec<Violation>) {
    let (from, to) = (old.strategy(), new.strategy());
    if !from.may_switch_to(to) {
        out.push(Violation::new(
            Rule::StrategySwitch,
            field::UPDATE_STRATEGY,
            format!("the strategy can't change from {from} to {to}: switching between rolling and in-place updates is not supported"),
            format!("keep {from}, or create a new pool with {to} and move the workload"),
        ));
    }
}

/// Rules 9–14.
pub(super) fn check(
    old_spec: &WorkerPoolSpec,
    new_spec: &WorkerPoolSpec,
    old: &ResolvedPool,
    new: &ResolvedPool,
    ctx: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    let in_place = old.strategy.is_in_place();
    if in_place {
        for path in replacement_fields(old, new) {
            out.push(Violation::new(
                Rule::ImmutableForInPlace,
                path,
                format!("{path} can't change for a pool with an in-place update strategy: it needs new machines"),
                "restore the old value, or create a new pool with the new value",
            ));
        }
    }
    kubernetes_versions(old_spec, new_spec, old, new, ctx, out);
    if in_place {
        image_versions(old, new, ctx, out);
        in_progress(old, new, ctx, out);
    }
}

fn kubernetes_versions(
    old_spec: &WorkerPoolSpec,
    new_spec: &WorkerPoolSpec,
    old: &ResolvedPool,
    new: &ResolvedPool,
    ctx: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    let (from, to) = (old.inputs.kubelet_version, new.inputs.kubelet_version);
    if to < from {
        out.push(Violation::new(
            Rule::Downgrade,
            field::KUBERNETES_VERSION,
            format!("kubernetes version {to} is lower than the pool's current {from}"),
            format!("use {from} or newer; downgrades are not supported"),
        ));
        return;
    }
    if let (Some(_), None) = (old_spec.kubernetes_version(), new_spec.kubernetes_version()) {
        let control_plane = ctx.control_plane_version;
        if control_plane.minors_ahead_of(&from) > 1 {
            out.push(Violation::new(
                Rule::VersionRemovalSkew,
                field::KUBERNETES_VERSION,
                format!(
                    "removing the version would move the pool from {from} to the control plane's {control_plane}, more than one minor version at once"
                ),
                format!("first set the pool version to {}.{}.x, then remove it", from.major, from.minor + 1),
            ));
        }
        return;
    }
    if old.strategy.is_in_place() && to.minors_ahead_of(&from) > 1 {
        out.push(Violation::new(
            Rule::MinorVersionSkip,
            field::KUBERNETES_VERSION,
            format!("kubernetes version {from} → {to} skips a minor version, which in-place pools can't do"),
            format!("update to {}.{}.x first", from.major, from.minor + 1),
        ));
    }
}

fn image_versions(
    old: &ResolvedPool,
    new: &ResolvedPool,
    ctx: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    let (from, to) = (&old.inputs.os_version, &new.inputs.os_version);
    if old.image_name != new.image_name || from == to {
        return;
    }
    if to < from {
        out.push(Violation::new(
            Rule::Downgrade,
            field::IMAGE_VERSION,
            format!("machine image version {to} is lower than the pool's current {from}"),
            format!("use {from} or newer; in-place pools can't downgrade"),
        ));
        return;
    }
    let Some(entry) = ctx.catalog.image_version(&new.image_name, to) else {
        return;
    };
    let Some(support) = entry.in_place_updates.as_ref().filter(|s| s.supported) else {
        return;
    };
    match support.min_version_for_update.as_deref().map(ImageVersion::parse) {
        None => out.push(Violation::new(
            Rule::MinVersionForUpdate,
            field::IMAGE_VERSION,
            format!("machine image version {to} names no minVersionForUpdate, so no in-place update can reach it"),
            "pick a target version whose catalog entry sets inPlaceUpdates.minVersionForUpdate",
        )),
        Some(Err(err)) => out.push(Violation::new(
            Rule::MinVersionForUpdate,
            field::IMAGE_VERSION,
            format!("the catalog's minVersionForUpdate of {to} is unreadable: {err}"),
            "fix the image catalog",
        )),
        Some(Ok(min)) if *from < min => out.push(Violation::new(
            Rule::MinVersionForUpdate,
            field::IMAGE_VERSION,
            format!("machine image version {to} can only be reached in place from {min} or newer, and the pool runs {from}"),
            format!("update to a version between {min} and {to} first"),
        )),
        Some(Ok(_)) => {}
    }
}

fn in_progress(
    old: &ResolvedPool,
    new: &ResolvedPool,
    ctx: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    if !ctx.update_in_progress {
        return;
    }
    let forced = ctx
        .annotations
        .get(ANNOTATION_OPERATION)
        .is_some_and(|v| has_operation(v, OPERATION_FORCE_IN_PLACE_UPDATE));
    let class = classify(old, new);
    if forced || !class.is_update() {
        return;
    }
    let fields = class.fields();
    out.push(Violation::new(
        Rule::UpdateInProgress,
        fields.first().copied().unwrap_or("spec"),
        format!("an in-place update of the pool is still in progress, and this change ({}) would start another", fields.join(", ")),
        format!(
            "wait until the update finishes, or annotate the pool with {ANNOTATION_OPERATION}={OPERATION_FORCE_IN_PLACE_UPDATE} to force it"
        ),
    ));
}
