//! The cluster a run works against: which API it is (`api`: embedded, a local control plane
//! with its node authorizer, or an existing cluster the run shares (`existing`)), the Kubernetes objects built from the scenario (pure
//! functions) and the setup that creates them and places the workloads.

pub(crate) mod api;
pub(crate) mod existing;
pub(crate) mod node_authorizer;
pub(crate) mod objects;
pub(crate) mod setup;
