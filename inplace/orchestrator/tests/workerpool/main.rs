//! Integration tests of the WorkerPool controller against the embedded API server, in virtual
//! time: validation, rendering of the MachineDeployment and the OSC Secret, and the status.

#[path = "../support/mod.rs"]
mod support;

mod control_plane;
mod rendering;
mod status;
mod validation;

use inplace_api::crd::WorkerPool;
use inplace_orchestrator::Config;

use support::Lab;
use support::pool::IMAGE_SERVER;

pub(crate) const POOL: &str = "pool-a";

pub(crate) fn config() -> Config {
    Config {
        image_server_url: IMAGE_SERVER.to_owned(),
        ..Lab::config()
    }
}

pub(crate) fn pending(pool: &WorkerPool) -> (Vec<String>, Vec<String>) {
    let lists = pool
        .status
        .as_ref()
        .and_then(|s| s.in_place_updates.as_ref())
        .and_then(|u| u.pending_worker_updates.clone());
    lists
        .map(|l| (l.auto_in_place_update, l.manual_in_place_update))
        .unwrap_or_default()
}
