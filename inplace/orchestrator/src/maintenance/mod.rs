//! Maintenance controller, in the role of gardener-controller-manager's shoot maintenance: once
//! per daily window of each pool (`spec.maintenance.timeWindow`), it moves versions and carries
//! out the operations the pool asked for, and records what it did. It runs on the injected
//! [`Clock`], so on a simulated clock a week of windows passes in seconds.
//!
//! One pass over a pool (`pool`):
//!
//! 1. **When.** Only a pool with a valid window, only while work may start (`[begin, end − 15
//!    min)`), and only once per window: a `status.lastMaintenance.triggeredTime` at or after this
//!    window's begin means it is done. A window that ends mid-rollout lets the rollout go on
//!    (the orchestrator does that); nothing new starts until the next window.
//! 2. **What** (`target`): the machine image version and the pool's own Kubernetes version, each
//!    moved when opted in (`autoUpdate`) and a higher one is on offer, or forced when expired.
//!    Then the operations of `maintenance.gardener.cloud/operation` (`operation`).
//! 3. **Check.** Each change is validated as the WorkerPool controller will validate it
//!    (`validate_pool_update`, with the in-progress state from the pool status). A change that
//!    fails, or a forced update with no target, is a failed operation: it touches nothing.
//! 4. **Write.** One merge patch of the pool (spec changes, the operation annotation removed,
//!    `force-in-place-update` handed on to `gardener.cloud/operation`), guarded by the
//!    resourceVersion; then `status.lastMaintenance` (description, `Succeeded`/`Failed`, failure
//!    reason, triggered time) and one Event per operation (`MachineImageVersionMaintenance`,
//!    `KubernetesVersionMaintenance`, `MaintenanceOperation`; Warning when failed).
//!
//! A pool's spec changes made by people wait for the window when the pool sets
//! `confineSpecUpdateRollout`; that is the WorkerPool controller's part
//! ([`crate::workerpool`]), as it is gardenlet's in Gardener.

mod operation;
mod pool;
mod record;
mod target;

use std::time::Duration;

use futures::StreamExt;
use inplace_api::crd::{ImageCatalog, WorkerPool};
use inplace_api::events::Recorder;
use jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use rackproof_clock::Clock;
use rackproof_std::error_chain;
use tokio::sync::Notify;

use crate::Config;
use crate::error::{Error, kube};

/// Component name on the Events it writes.
pub const COMPONENT: &str = "inplace-maintenance";
/// Event reason for machine image version changes.
pub const REASON_MACHINE_IMAGE: &str = "MachineImageVersionMaintenance";
/// Event reason for Kubernetes version changes.
pub const REASON_KUBERNETES: &str = "KubernetesVersionMaintenance";
/// Event reason for operations of the maintenance operation annotation.
pub const REASON_OPERATION: &str = "MaintenanceOperation";

/// What one pass needs.
struct Pass<'a> {
    client: &'a Client,
    config: &'a Config,
    recorder: &'a Recorder,
    now: Timestamp,
}

/// Runs the maintenance controller over the WorkerPools of [`Config::namespace`] until the
/// future is dropped, reading the catalog [`Config::catalog_name`] and the control-plane version
/// [`Config::control_plane_version`]. Returns only for an unusable configuration.
pub async fn run(client: Client, clock: Clock, config: Config) -> Result<(), Error> {
    if config.sync_period.is_zero() {
        return Err(Error::Config(
            "the sync period must be longer than zero".to_owned(),
        ));
    }
    let recorder = Recorder::new(client.clone(), clock.clone(), COMPONENT);
    let wake = Notify::new();
    let pools: Api<WorkerPool> = Api::namespaced(client.clone(), &config.namespace);
    let watch = watcher(pools, watcher::Config::default())
        .default_backoff()
        .for_each(|_| {
            wake.notify_one();
            futures::future::ready(())
        });
    let passes = async {
        loop {
            let pass = Pass {
                client: &client,
                config: &config,
                recorder: &recorder,
                now: clock.now(),
            };
            let next = pass.run().await;
            let wait = next.map_or(config.sync_period, |at| clock.until(at));
            tokio::select! {
                biased;
                _ = clock.sleep(wait.max(Duration::from_millis(1))) => {}
                _ = wake.notified() => clock.sleep(Duration::from_millis(50)).await,
            }
        }
    };
    tokio::select! {
        biased;
        _ = watch => {}
        _ = passes => {}
    }
    Ok(())
}

impl Pass<'_> {
    /// One pass over every pool; returns when to look again (`None`: after the sync period).
    /// Between windows nothing happens, so the controller sleeps until the earliest next begin
    /// (a week of windows is a few dozen passes); changes of pools wake it earlier.
    async fn run(&self) -> Option<Timestamp> {
        let api: Api<WorkerPool> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let pools = match api.list(&Default::default()).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "maintenance: failed to list workerpools");
                return None;
            }
        };
        let catalog = match self.catalog().await {
            Ok(Some(catalog)) => catalog,
            Ok(None) => {
                tracing::warn!(catalog = %self.config.catalog_name, "maintenance: the image catalog does not exist; waiting for it");
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "maintenance: no image catalog");
                return None;
            }
        };
        let mut next: Option<Timestamp> = None;
        for wp in &pools {
            let span = tracing::info_span!("maintenance", pool = %wp.name_any());
            let _enter = span.enter();
            match pool::reconcile(wp, &catalog.spec, self).await {
                Ok(Some(at)) => next = Some(next.map_or(at, |n| n.min(at))),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %error_chain(&e), "maintenance pass failed");
                    return None;
                }
            }
        }
        // Every pool's next window begin; pool changes wake the loop through the watch.
        next
    }

    async fn catalog(&self) -> Result<Option<ImageCatalog>, Error> {
        let name = &self.config.catalog_name;
        Api::<ImageCatalog>::all(self.client.clone())
            .get_opt(name)
            .await
            .map_err(kube(format!("read imagecatalog {name}")))
    }
}
