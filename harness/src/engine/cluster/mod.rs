//! The cluster a run works against: which API it is (`api`: embedded or a local control plane,
//! with the local one's node authorizer), the Kubernetes objects built from the scenario (pure
//! functions) and the setup that creates them and places the workloads.

pub(crate) mod api;
pub(crate) mod node_authorizer;
pub(crate) mod objects;
pub(crate) mod setup;
