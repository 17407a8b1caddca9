//! The system under test's components as a run starts them: the supervisor that runs the
//! orchestrator, the watchdog and the stand-ins for kube-controller-manager's node lifecycle and
//! ReplicaSet controllers (builtin, or external programs through the outside door) and follows
//! their Deployments' replicas.

pub(crate) mod external;
pub(crate) mod group;
pub(crate) mod lifecycle;
pub(crate) mod outside;
pub(crate) mod partial;
pub(crate) mod supervisor;
pub(crate) mod workloads;
