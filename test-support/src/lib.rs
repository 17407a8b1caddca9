//! Helpers that the test suites of several Rackproof crates share, so each exists once: a
//! dev-dependency only, never a dependency of a shipped binary.
//!
//! - [`ipmitool`]: Debian's ipmitool, the referee of the IPMI emulators, run against 127.0.0.1;
//! - [`processes`]: scans of `/proc` for the processes a test must not leave behind;
//! - [`logs`]: log output captured in memory, to assert which spans a line was logged in;
//! - [`node_images`] (feature `qemu`): the node images of `ci/build-images`, or a failure that
//!   says how to build them;
//! - [`kube`] (feature `kube`): the embedded API server with Rackproof's CRDs in virtual time, and
//!   a fault-injecting client in front of it.

use std::path::PathBuf;

pub mod ipmitool;
#[cfg(feature = "kube")]
pub mod kube;
pub mod logs;
pub mod processes;

#[cfg(feature = "qemu")]
mod images;

#[cfg(feature = "qemu")]
pub use images::node_images;

/// The workspace's root directory (where `Cargo.toml`, `ci/` and `target/` are).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .expect("test-support/ sits in the workspace root")
        .to_path_buf()
}

/// Fails the test unless kubectl is on the `PATH`, saying how to install it (a test that needs
/// a prerequisite never skips).
pub fn require_kubectl() {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("kubectl").is_file()));
    assert!(
        on_path,
        "kubectl is missing: install it with `apt-get install -y kubernetes-client` (ci/setup does)"
    );
}
