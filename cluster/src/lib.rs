//! Cluster providers: where a scenario's Kubernetes API comes from.
//!
//! - [`local`]: a real control plane (etcd + kube-apiserver v1.20.2, and optionally
//!   kube-controller-manager v1.20.2 with the node lifecycle, disruption, garbage-collector,
//!   namespace and service-account controllers, both built from Debian bookworm's source package)
//!   on 127.0.0.1, the fidelity tier and the referee of the embedded API server.
//!
//! The crate's `tests/differential.rs` replays request sequences against the embedded server and
//! the `local` control plane and lists every known difference; `benches/apiserver.rs` (run by
//! `ci/bench`) compares their throughput.

pub mod local;
