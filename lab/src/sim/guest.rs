//! The hook through which a simulated machine runs the in-process node agent: when an OS is up,
//! the machine calls [`GuestOs::start`] and spawns the returned task; on power-off or reset it
//! aborts that task, as a real power cut kills the agent.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use inplace_boot::{EntryName, Esp};
use rackproof_clock::Clock;

use super::machine::SimHandle;

/// The task a guest runs while the OS is up.
pub type GuestTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What the OS knows about itself at boot.
#[derive(Debug, Clone)]
pub struct GuestContext {
    pub node: String,
    /// The booted entry's file name now (after the loader bumped its counter).
    pub booted_entry: EntryName,
    /// `LoaderEntrySelected`: the entry id as selected (before the bump).
    pub loader_entry_selected: String,
    /// `LoaderBootCountPath`, when the entry had a counter.
    pub loader_boot_count_path: Option<String>,
    /// The version the running OS reports.
    pub os_version: String,
    /// The machine's ESP, for blessing and installing entries.
    pub esp: Arc<dyn Esp>,
    pub clock: Clock,
    /// Reboot or power off from inside the OS.
    pub machine: SimHandle,
}

/// An OS payload the machine starts when it is up (the node agent, or a test double).
pub trait GuestOs: Send + Sync + fmt::Debug {
    fn start(&self, ctx: GuestContext) -> GuestTask;
}
