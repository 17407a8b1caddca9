//! libvirt machines for the lab: lab nodes as libvirt domains of type `qemu` (TCG) with OVMF.
//!
//! - [`spec`] and [`xml`] (always built, pure): the node configuration and its domain XML.
//! - [`console`] (always built): the serial console, tailed from the file libvirt logs it to.
//! - [`bmc`] (always built): sushy-tools (Redfish) and VirtualBMC (IPMI) as subprocesses in front
//!   of a domain, for users of the metal3/Ironic emulation stack.
//! - `machine` (feature `libvirt`, links libvirt through the `virt` crate: needs Debian's
//!   `libvirt-dev` and `pkg-config`): [`machine::LibvirtMachine`] implements the driver traits
//!   `Power` and `BootControl`.
//!
//! libvirtd must run for the machine: `ci/start-libvirtd` installs and starts it.

pub mod bmc;
pub mod console;
#[cfg(feature = "libvirt")]
pub mod machine;
pub mod spec;
pub mod xml;

pub use console::SerialConsole;
#[cfg(feature = "libvirt")]
pub use machine::{LibvirtMachine, MachineError, sweep_orphans, teardown_prefix};
pub use spec::{BootOrder, DomainSpec, Firmware, MachineConfig, SpecError};
pub use xml::domain_xml;
