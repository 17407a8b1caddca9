//! The worker pool hashes of GEP-31 ("Worker pool hash calculations").
//!
//! Two hashes describe a pool:
//!
//! * [`pool_hash`] names the pool's OperatingSystemConfig Secret
//!   ([`crate::osc::secret::secret_name`]). It is derived from the *rolling update triggers*; for
//!   an **in-place** pool it leaves out everything an in-place update may change, so the Secret the
//!   agent reads keeps its name while its content moves on:
//!
//!   | input | rolling pool | in-place pool |
//!   |---|---|---|
//!   | Kubernetes version, `MAJOR.MINOR` (pool's, else control plane's) | in | **out** |
//!   | `machine.type` | in | in |
//!   | `machine.image.name` | in | in |
//!   | `machine.image.version` | in | **out** |
//!   | `volume.size`, `volume.type` | in | in |
//!   | `cri.name` (default `containerd`) | in | in |
//!   | CA rotation `lastInitiationTime` | in | **out** |
//!   | ServiceAccount key rotation `lastInitiationTime` | in | **out** |
//!   | node-local DNS enabled | in | in |
//!   | kubelet `kubeReserved` + `systemReserved` (their *sum*), `evictionHard`, `cpuManagerPolicy` | in | **out** |
//!
//!   The Kubernetes patch version is in neither column: patch updates are applied in place without
//!   drain and never change a hash. The update strategy, `maxSurge`, `maxUnavailable` and the MCM
//!   timeouts are not inputs either.
//!
//! * [`machine_class_hash`] (Gardener's `WorkerPoolHashV2`) names the MachineClass. It is the pool
//!   hash plus, for in-place pools, the inputs the pool hash left out — so every in-place update
//!   trigger produces a new MachineClass, hence a new MachineSet, and MCM rolls the machines over
//!   to it in place. For rolling pools it changes exactly when the pool hash changes.
//!
//! # Encoding (stable; changing it renames every Secret)
//!
//! SHA-256 over the bytes
//!
//! ```text
//! <domain> "\n"
//! then, for each input that is present, in the order of the table:
//! <name> "=" <byte length of value, decimal> ":" <value> "\n"
//! ```
//!
//! with `<domain>` = `rackproof.dev/worker-pool-hash/v1` (pool hash) or
//! `rackproof.dev/machine-class-hash/v1` (machine class hash, whose first input is `poolHash` =
//! the pool hash in hex). Values are canonical: versions as numbers (`1443.8` for `1443.8.0`),
//! quantities in nano-units (`50Gi` and `53687091200` hash alike), timestamps as RFC 3339 UTC,
//! reservations as `cpu-memory-pid-ephemeralStorage` sums, eviction thresholds as
//! `imageFSAvailable-imageFSInodesFree-memoryAvailable-nodeFSAvailable-nodeFSInodesFree` (absent
//! parts empty). Absent inputs write nothing; node-local DNS is written only when enabled. The
//! length prefix keeps `("ab","c")` and `("a","bc")` apart. No map iteration order is involved.

use sha2::{Digest, Sha256};

use crate::pool::{ReservedSum, ResolvedPool, UpdateInputs};
use crate::quantity::Quantity;

const POOL_DOMAIN: &str = "rackproof.dev/worker-pool-hash/v1";
const MACHINE_CLASS_DOMAIN: &str = "rackproof.dev/machine-class-hash/v1";

/// A SHA-256 hash in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolHash(String);

impl PoolHash {
    /// Wraps a hex string (used when reading a hash back from a status field).
    pub fn from_hex(hex: &str) -> Self {
        Self(hex.to_owned())
    }

    /// All 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 16 hex digits, used in object names.
    pub fn short(&self) -> &str {
        &self.0[..self.0.len().min(16)]
    }
}

impl std::fmt::Display for PoolHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The pool hash (names the OSC Secret); see the module docs for its inputs.
pub fn pool_hash(pool: &ResolvedPool) -> PoolHash {
    let rolling = !pool.strategy.is_in_place();
    let inputs = &pool.inputs;
    let mut canon = Canon::new(POOL_DOMAIN);
    if rolling {
        canon.field("kubernetes.minor", &inputs.kubelet_version.major_minor());
    }
    canon.field("machine.type", &pool.machine_type);
    canon.field("machine.image.name", &pool.image_name);
    if rolling {
        canon.field("machine.image.version", &inputs.os_version.canonical());
    }
    if let Some(size) = &pool.volume_size {
        canon.field("volume.size", &size.canonical());
    }
    if let Some(volume_type) = &pool.volume_type {
        canon.field("volume.type", volume_type);
    }
    canon.field("cri.name", &pool.cri);
    if rolling {
        rotation_fields(&mut canon, inputs);
    }
    if pool.node_local_dns {
        canon.field("nodeLocalDNS.enabled", "true");
    }
    if rolling {
        kubelet_fields(&mut canon, inputs);
    }
    canon.finish()
}

/// The machine class hash (Gardener's `WorkerPoolHashV2`): the pool hash plus, for in-place
/// pools, every input an in-place update may change except the Kubernetes patch version.
pub fn machine_class_hash(pool: &ResolvedPool) -> PoolHash {
    let mut canon = Canon::new(MACHINE_CLASS_DOMAIN);
    canon.field("poolHash", pool_hash(pool).as_str());
    if pool.strategy.is_in_place() {
        let inputs = &pool.inputs;
        canon.field("kubernetes.minor", &inputs.kubelet_version.major_minor());
        canon.field("machine.image.version", &inputs.os_version.canonical());
        rotation_fields(&mut canon, inputs);
        kubelet_fields(&mut canon, inputs);
    }
    canon.finish()
}

fn rotation_fields(canon: &mut Canon, inputs: &UpdateInputs) {
    if let Some(time) = inputs.ca_rotation {
        canon.field(
            "credentialsRotation.certificateAuthorities",
            &time.to_string(),
        );
    }
    if let Some(time) = inputs.sa_key_rotation {
        canon.field("credentialsRotation.serviceAccountKey", &time.to_string());
    }
}

fn kubelet_fields(canon: &mut Canon, inputs: &UpdateInputs) {
    if let Some(sum) = inputs
        .reserved_sum
        .filter(|sum| *sum != ReservedSum::default())
    {
        let part = |q: &Option<Quantity>| q.map(|q| q.canonical()).unwrap_or_default();
        canon.field(
            "kubelet.reserved",
            &format!(
                "{}-{}-{}-{}",
                part(&sum.cpu),
                part(&sum.memory),
                part(&sum.pid),
                part(&sum.ephemeral_storage)
            ),
        );
    }
    if let Some(e) = &inputs.eviction_hard {
        let part = |s: &Option<String>| s.clone().unwrap_or_default();
        canon.field(
            "kubelet.evictionHard",
            &format!(
                "{}-{}-{}-{}-{}",
                part(&e.image_fs_available),
                part(&e.image_fs_inodes_free),
                part(&e.memory_available),
                part(&e.node_fs_available),
                part(&e.node_fs_inodes_free)
            ),
        );
    }
    if let Some(policy) = &inputs.cpu_manager_policy {
        canon.field("kubelet.cpuManagerPolicy", policy);
    }
}

/// The canonical encoding of the module docs.
struct Canon(Sha256);

impl Canon {
    fn new(domain: &str) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(domain.as_bytes());
        hasher.update(b"\n");
        Self(hasher)
    }

    fn field(&mut self, name: &str, value: &str) {
        self.0.update(format!("{name}={}:", value.len()).as_bytes());
        self.0.update(value.as_bytes());
        self.0.update(b"\n");
    }

    fn finish(self) -> PoolHash {
        PoolHash(hex::encode(self.0.finalize()))
    }
}

#[cfg(test)]
mod tests;
