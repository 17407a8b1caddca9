//! The cluster a run starts from: the Kubernetes objects built from the scenario (pure
//! functions) and the setup that creates them and places the workloads.

pub(crate) mod objects;
pub(crate) mod setup;
