//! The `sim` machine backend: an in-process machine with firmware, an in-memory ESP with
//! systemd-boot's boot counting (`inplace-boot`), OS images with behaviours, boot timing on the
//! clock, a console, fault hooks, and the in-process agent started and stopped with its power.

mod catalog;
mod guest;
mod machine;

pub use catalog::{Behaviour, Catalog, OsImage, SlotArtifact, entry_stem};
pub use guest::{GuestContext, GuestOs, GuestTask};
pub use machine::{
    BootTiming, Phase, SimError, SimHandle, SimMachine, SimMachineBuilder, booted_entry_of,
};
