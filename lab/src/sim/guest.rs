//! The hook through which a simulated machine runs the node's services in-process (the node
//! agent, the kubelet): when an OS is up, the machine calls [`GuestOs::start`] for each of
//! [`GuestOs::services`] and spawns the returned tasks; on power-off or reset it aborts them, as
//! a real power cut kills every process. A fault kills one service alone while the OS stays up.

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

/// An OS payload the machine starts when it is up (the node agent and the kubelet, or a test
/// double).
pub trait GuestOs: Send + Sync + fmt::Debug {
    /// The services (unit names) the OS runs while up, in the order they start.
    fn services(&self) -> &'static [&'static str];
    /// The task of `service` (one of [`GuestOs::services`]) for the boot described by `ctx`.
    fn start(&self, service: &str, ctx: GuestContext) -> GuestTask;
}
