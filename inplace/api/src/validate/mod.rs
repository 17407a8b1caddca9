//! Validation of a worker pool and of a change to it, with every rule the reference documents
//! state (GEP-31; "Shoot Updates and Upgrades"; "Controlling the Kubernetes Versions for Specific
//! Worker Pools"; the versioning page). Time is a parameter ([`ValidationContext::now`]); nothing
//! here reads a clock.
//!
//! Rules on any pool ([`validate_pool`], and on the new object of [`validate_pool_update`]):
//!
//! 1. `minimum ≥ 0`, `maximum ≥ minimum` ([`Rule::PoolSize`]).
//! 2. `maxSurge` / `maxUnavailable` are non-negative numbers or percentages ([`Rule::IntOrPercent`]),
//!    not both zero ([`Rule::SurgeAndUnavailableZero`]).
//! 3. MCM durations parse (`2h`, `10m`) and are positive ([`Rule::Malformed`]); `maxEvictRetries ≥ 0`
//!    ([`Rule::MaxEvictRetries`]); `machineInPlaceUpdateTimeout` and `disableHealthTimeout` only on
//!    in-place pools ([`Rule::InPlaceOnlySetting`]).
//! 4. Versions and quantities parse ([`Rule::Malformed`]).
//! 5. A pool Kubernetes version is not above the control plane's ([`Rule::AboveControlPlane`]) and at
//!    most two minors below it ([`Rule::ControlPlaneSkew`]).
//! 6. New versions (on create, or when changed) are in the catalog ([`Rule::UnknownVersion`]) and not
//!    expired at `now` ([`Rule::Expired`]).
//! 7. An in-place pool's image version has `inPlaceUpdates.supported: true` ([`Rule::InPlaceNotSupported`]).
//! 15. The maintenance time window parses (`HHMMSS+ZZZZ`) and lasts 30 minutes to 6 hours
//!     ([`Rule::MaintenanceWindow`]).
//!
//! Rules on a change ([`validate_pool_update`]):
//!
//! 8. No switch between rolling and in-place strategies; Auto ↔ Manual in-place is fine
//!    ([`Rule::StrategySwitch`]).
//! 9. In-place pools can't change image name, machine type, volume type/size, CRI or node-local DNS
//!    ([`Rule::ImmutableForInPlace`]).
//! 10. No Kubernetes downgrade (a newly set override counts from the inherited control-plane version);
//!     no image downgrade for in-place pools ([`Rule::Downgrade`]).
//! 11. In-place pools don't skip a Kubernetes minor version ([`Rule::MinorVersionSkip`]).
//! 12. Removing the override is allowed only within one minor of the control plane
//!     ([`Rule::VersionRemovalSkew`]).
//! 13. An in-place image update needs the current version ≥ the target's `minVersionForUpdate`, and
//!     a target without one can't be reached in place ([`Rule::MinVersionForUpdate`]).
//! 14. While an in-place update is in progress, a change that updates nodes is refused unless the pool
//!     carries `gardener.cloud/operation: force-in-place-update` ([`Rule::UpdateInProgress`]).
//!
//! The context's control-plane version is the new object's; the old object is resolved with
//! [`ValidationContext::previous_control_plane_version`] when the control plane moved since it was
//! accepted. So a control-plane change is judged as a change of every pool that inherits its
//! version (rules 10, 11 and 14 apply to it), and a pool with its own version is checked against
//! the new control plane again (rule 5).

mod spec;
mod update;
mod versions;
mod violation;

use jiff::Timestamp;

use crate::crd::{Annotations, ImageCatalogSpec, WorkerPoolSpec};
use crate::pool::ResolvedPool;
use crate::version::KubeVersion;

pub use violation::{Rule, Violation, Violations};

/// What validation needs besides the pool itself.
#[derive(Debug, Clone, Copy)]
pub struct ValidationContext<'a> {
    /// The control plane's Kubernetes version.
    pub control_plane_version: KubeVersion,
    /// The control plane's version when the old spec was accepted, if it was another one; only
    /// [`validate_pool_update`] reads it.
    pub previous_control_plane_version: Option<KubeVersion>,
    /// The versions on offer.
    pub catalog: &'a ImageCatalogSpec,
    /// The pool's annotations (of the new object).
    pub annotations: &'a Annotations,
    /// Whether an in-place update of the pool is still in progress.
    pub update_in_progress: bool,
    /// The time to judge expiration dates by.
    pub now: Timestamp,
}

/// Validates a new pool.
pub fn validate_pool(spec: &WorkerPoolSpec, ctx: &ValidationContext<'_>) -> Result<(), Violations> {
    let mut out = Vec::new();
    spec::check(spec, &mut out);
    match ResolvedPool::resolve(spec, &ctx.control_plane_version) {
        Ok(pool) => versions::check(spec, &pool, None, ctx, &mut out),
        Err(errors) => out.extend(errors.0),
    }
    Violations(out).into_result()
}

/// Validates a change of a pool from `old` to `new`.
pub fn validate_pool_update(
    old: &WorkerPoolSpec,
    new: &WorkerPoolSpec,
    ctx: &ValidationContext<'_>,
) -> Result<(), Violations> {
    let mut out = Vec::new();
    spec::check(new, &mut out);
    update::check_strategy(old, new, &mut out);
    let old_control_plane = ctx
        .previous_control_plane_version
        .unwrap_or(ctx.control_plane_version);
    match (
        ResolvedPool::resolve(old, &old_control_plane),
        ResolvedPool::resolve(new, &ctx.control_plane_version),
    ) {
        (Ok(old_pool), Ok(new_pool)) => {
            versions::check(new, &new_pool, Some(&old_pool), ctx, &mut out);
            update::check(old, new, &old_pool, &new_pool, ctx, &mut out);
        }
        (Err(_), Ok(new_pool)) => versions::check(new, &new_pool, None, ctx, &mut out),
        (_, Err(errors)) => out.extend(errors.0),
    }
    Violations(out).into_result()
}

#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod update_tests;
