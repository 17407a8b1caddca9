//! What the agent persists between runs: the last-applied OSC and the plan being carried out,
//! with one flag per completed step (gardener-node-agent's `last-applied-osc.yaml` and
//! `last-computed-osc-changes.yaml`, in one JSON document written atomically).
//!
//! Crash safety rests on three rules:
//! 1. every step is recorded as done only after it took effect, and every step is idempotent,
//!    so redoing a step whose record was lost is harmless;
//! 2. the one step that must not be redone, running the OS-update command, is recorded as
//!    *started* before it runs: a restart that finds a started but unfinished run never runs
//!    that attempt again, it counts it as an interrupted (retriable) attempt;
//! 3. `rebooting` is recorded before the reboot: after it, a running version other than the
//!    attempted one means the machine fell back (a rollback), never "try again".
//!
//! A document that does not parse (a torn write on a file system without atomic rename, a disk
//! error) is set aside as [`CORRUPT_KEY`] for a person to read, and the agent starts from an
//! empty state: the running version and the ESP's entries say where the OS update stands (see
//! `Agent::recover`), and every other step is idempotent.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::store::{StateStore, StoreError};

/// The store key of the state document.
pub const STATE_KEY: &str = "agent-state.json";
/// Where a state document that does not parse is kept (the latest one).
pub const CORRUPT_KEY: &str = "agent-state.corrupt.json";

/// The persisted state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    /// The OSC applied completely last, with its checksum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
    /// The plan towards the current OSC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

/// The last-applied OSC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// SHA-256 of the Secret data.
    pub checksum: String,
    /// The document.
    pub osc: inplace_api::osc::OperatingSystemConfig,
}

/// The changes from the last-applied OSC to the target one, and how far they got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Checksum of the target OSC.
    pub checksum: String,
    /// The target document.
    pub osc: inplace_api::osc::OperatingSystemConfig,
    /// Human-readable list of the changes (for logs and events).
    pub changes: Vec<String>,
    /// Paths of files to write.
    pub files: Vec<String>,
    /// The kubelet version to run, if it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<String>,
    /// Whether the kubelet change needs a drain (minor version or configuration).
    pub kubelet_needs_drain: bool,
    /// A CA rotation.
    pub ca_rotation: bool,
    /// A ServiceAccount key rotation.
    pub sa_rotation: bool,
    /// The OS version to move to, if it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    /// Steps done.
    pub done: Done,
    /// The OS-update progress.
    pub os: OsProgress,
    /// Why the update failed, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Whether the failure is on the Node (`update-result=failed`).
    #[serde(default)]
    pub failure_reported: bool,
}

impl Plan {
    /// Whether anything needs the node drained (`ReadyForUpdate`) first.
    pub fn needs_drain(&self) -> bool {
        self.os_version.is_some()
            || self.kubelet_needs_drain
            || self.ca_rotation
            || self.sa_rotation
    }
}

/// Completed steps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Done {
    /// Files written.
    pub files: bool,
    /// Kubelet updated and healthy.
    pub kubelet: bool,
    /// Kubelet re-bootstrapped and healthy.
    pub ca_rotation: bool,
    /// Tokens refreshed.
    pub sa_rotation: bool,
    /// Running the target OS version, booted entry blessed.
    pub os: bool,
    /// `update-result=successful` set (pods deleted before).
    pub reported: bool,
}

/// The OS-update command's progress for [`Plan::os_version`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsProgress {
    /// Runs started (attempt numbers 1..=started).
    pub started: u32,
    /// Runs whose outcome was recorded.
    pub finished: u32,
    /// Not before this time may the next run start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<Timestamp>,
    /// The last failed run's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The command exited 0: the new entry is on the ESP.
    pub installed: bool,
    /// The reboot into the new version was requested.
    pub rebooting: bool,
    /// The boot id when the reboot was requested (to tell a reboot that never happened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_from_boot: Option<String>,
}

/// Reading or writing the state failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store failed.
    #[error("failed to access the agent state")]
    Store(#[source] StoreError),
    /// The stored document does not parse.
    #[error("the stored agent state ({STATE_KEY}) is corrupt")]
    Corrupt(#[source] serde_json::Error),
}

/// Loads the state (default when absent).
pub async fn load(store: &dyn StateStore) -> Result<AgentState, StateError> {
    match store.get(STATE_KEY).await.map_err(StateError::Store)? {
        None => Ok(AgentState::default()),
        Some(bytes) => serde_json::from_slice(&bytes).map_err(StateError::Corrupt),
    }
}

/// Moves a corrupt state document to [`CORRUPT_KEY`], so the next [`load`] starts empty.
pub async fn set_aside(store: &dyn StateStore) -> Result<(), StateError> {
    if let Some(bytes) = store.get(STATE_KEY).await.map_err(StateError::Store)? {
        store
            .put(CORRUPT_KEY, &bytes)
            .await
            .map_err(StateError::Store)?;
    }
    store.delete(STATE_KEY).await.map_err(StateError::Store)
}

/// Saves the state atomically.
pub async fn save(store: &dyn StateStore, state: &AgentState) -> Result<(), StateError> {
    let bytes = serde_json::to_vec_pretty(state).expect("the agent state always serialises");
    store
        .put(STATE_KEY, &bytes)
        .await
        .map_err(StateError::Store)
}
