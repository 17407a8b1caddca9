//! The `local` provider against the real etcd, kube-apiserver and kube-controller-manager v1.20.2.
//!
//! These tests need `etcd` (Debian `etcd-server`) and the kube-apiserver and
//! kube-controller-manager built by `ci/build-kube-apiserver`; without them they fail, naming
//! `ci/install-local-control-plane`. The controller manager runs with short grace periods; waits
//! poll the API until a deadline.

mod api;
mod controller_manager;
mod support;
