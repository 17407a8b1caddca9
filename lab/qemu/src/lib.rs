//! QEMU machines for the lab (ARCHITECTURE.md, "Machines"): TCG guests with OVMF and a real ESP,
//! booting the node OS images of `images/` with systemd-boot boot counting.
//!
//! - [`machine`]: [`QemuMachine`], one node: QEMU process, QMP power control, [`Power`] and
//!   [`BootControl`](rackproof_driver::BootControl);
//! - [`console`]: the serial console, logged to a file and streamed, with race-free waits;
//! - [`qmp`]: the QMP client; [`identity`]: the per-node identity passed through fw_cfg;
//! - [`mtools`]: an ESP inside a disk image, through mtools (no loop devices, no mounts);
//! - [`slot`] and [`images`]: the slot artifacts and disks `ci/build-images` builds;
//! - [`prereq`]: the host programs and firmware, or the command installing them.
//!
//! [`Power`]: rackproof_driver::Power

pub mod console;
pub mod identity;
pub mod images;
pub mod machine;
pub mod mtools;
pub mod prereq;
pub mod qmp;
pub mod slot;

pub use console::{Console, ConsoleError, Line, Mark};
pub use identity::{HOST_ALIAS, NodeIdentity};
pub use images::Images;
pub use machine::{DirectBoot, QemuConfig, QemuError, QemuMachine};
pub use mtools::MtoolsEsp;
pub use prereq::Prerequisites;
pub use qmp::{Qmp, QmpError, QmpEvent};
pub use slot::{Slot, SlotError};
