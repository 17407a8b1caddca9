//! The scenario engine: brings up the lab and the cluster, starts the components, runs steps and
//! faults, watches everything into one timeline, and judges expectations and invariants.

pub mod conditions;
pub mod expectations;
pub mod invariants;
pub mod judge;
pub mod objects;
pub mod observe;
pub mod sim_nodes;
pub mod timeline;
pub mod world;
