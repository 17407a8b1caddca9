//! Real-guest tests: the node OS images of `ci/build-images` booted in QEMU (TCG) with OVMF and
//! systemd-boot; checked from the serial console and from the ESP afterwards, which must be
//! exactly what inplace-boot's model of systemd-boot 252 predicts.
//!
//! Run with `cargo nextest run -p rackproof-qemu --profile ci` (they are in the `qemu` group).
//! Each test keeps its node directory (serial.log, qemu.log, disk) under
//! `target/qemu-artifacts/TEST` when it fails, and names it in the failure message.
//!
//! - [`qemu::boot`]: the installed version, power actions, graceful power requests, updates to a
//!   good, a panicking and a hanging version;
//! - [`qemu::variants`]: the silent and the rollback variant, total failure;
//! - [`qemu::bless`]: an update blessed by the agent in the guest, with the embedded API server.

mod qemu;
