//! Real libvirt domains through the driver traits, Rackproof's own Redfish and IPMI emulators in
//! front of them, and sushy-tools / VirtualBMC in front of them.
//!
//! Run with `cargo nextest run -p rackproof-libvirt --features libvirt` after `ci/start-libvirtd`
//! (installs and starts libvirtd, QEMU, OVMF and the BMC tools). Tests that boot a guest are in
//! `mod qemu`, so nextest's `qemu` group (at most four guests) applies. Every guest boots an empty
//! disk: OVMF tries it, then PXE, and ends in its shell; each boot prints `BdsDxe:` lines.

mod machine;
mod qemu;
mod support;
