//! Everything platform-specific, behind small traits with one real and one simulated
//! implementation each (see the crate docs for the table).

pub mod files;
pub mod kubelet;
pub mod os_version;
pub mod reboot;
