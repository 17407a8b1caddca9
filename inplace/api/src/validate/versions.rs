//! Rules 5–7: the pool's versions against the control plane and the catalog.

use super::{Rule, ValidationContext, Violation};
use crate::crd::{WorkerPoolSpec, is_expired};
use crate::pool::{ResolvedPool, field};

/// Checks `pool` (resolved from `spec`); with `old`, only versions that changed are checked
/// against the catalog, and against the control plane unless it moved.
pub(super) fn check(
    spec: &WorkerPoolSpec,
    pool: &ResolvedPool,
    old: Option<&ResolvedPool>,
    ctx: &ValidationContext<'_>,
    out: &mut Vec<Violation>,
) {
    let kubelet = pool.inputs.kubelet_version;
    let kubelet_changed = old.is_none_or(|old| old.inputs.kubelet_version != kubelet);
    let control_plane_moved = old.is_some()
        && ctx
            .previous_control_plane_version
            .is_some_and(|v| v != ctx.control_plane_version);
    if spec.kubernetes_version().is_some() && (kubelet_changed || control_plane_moved) {
        kubernetes_version(pool, ctx, kubelet_changed, out);
    }
    let image = &pool.inputs.os_version;
    let image_changed =
        old.is_none_or(|old| old.inputs.os_version != *image || old.image_name != pool.image_name);
    let entry = ctx.catalog.image_version(&pool.image_name, image);
    if image_changed {
        match entry {
            None => out.push(Violation::new(
                Rule::UnknownVersion,
                field::IMAGE_VERSION,
                format!(
                    "machine image {} version {image} is not in the image catalog",
                    pool.image_name
                ),
                "pick a version the catalog lists",
            )),
            Some(entry) if is_expired(entry.expiration_date.as_ref(), ctx.now) => {
                out.push(Violation::new(
                    Rule::Expired,
                    field::IMAGE_VERSION,
                    format!(
                        "machine image {} version {image} is expired",
                        pool.image_name
                    ),
                    "pick a version that has not expired",
                ))
            }
            Some(_) => {}
        }
    }
    if pool.strategy.is_in_place()
        && let Some(entry) = entry
        && !entry.in_place_updates.as_ref().is_some_and(|u| u.supported)
    {
        out.push(Violation::new(
            Rule::InPlaceNotSupported,
            field::IMAGE_VERSION,
            format!("machine image {} version {image} does not support in-place updates", pool.image_name),
            "pick a version with inPlaceUpdates.supported: true, or use AutoRollingUpdate for a new pool",
        ));
    }
}

/// The skew against the control plane, and with `in_catalog` whether the catalog offers it.
fn kubernetes_version(
    pool: &ResolvedPool,
    ctx: &ValidationContext<'_>,
    in_catalog: bool,
    out: &mut Vec<Violation>,
) {
    let version = pool.inputs.kubelet_version;
    let control_plane = ctx.control_plane_version;
    if version > control_plane {
        out.push(Violation::new(
            Rule::AboveControlPlane,
            field::KUBERNETES_VERSION,
            format!("version {version} is newer than the control plane's {control_plane}"),
            format!("use {control_plane} or lower, or update the control plane first"),
        ));
    } else if control_plane.minors_ahead_of(&version) > 2 {
        out.push(Violation::new(
            Rule::ControlPlaneSkew,
            field::KUBERNETES_VERSION,
            format!("version {version} is more than two minor versions below the control plane's {control_plane}"),
            format!("use {}.{}.x or newer", control_plane.major, control_plane.minor.saturating_sub(2)),
        ));
    }
    if !in_catalog {
        return;
    }
    match ctx.catalog.kubernetes_version(&version) {
        None => out.push(Violation::new(
            Rule::UnknownVersion,
            field::KUBERNETES_VERSION,
            format!("kubernetes version {version} is not in the image catalog"),
            "pick a version the catalog lists",
        )),
        Some(entry) if is_expired(entry.expiration_date.as_ref(), ctx.now) => {
            out.push(Violation::new(
                Rule::Expired,
                field::KUBERNETES_VERSION,
                format!("kubernetes version {version} is expired"),
                "pick a version that has not expired",
            ))
        }
        Some(_) => {}
    }
}
