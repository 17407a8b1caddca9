//! How a run ends short of judging the system under test, as types: a step that did not do what
//! it says (the verdict is `Failed`) and a lab failure (`LabFailed`). `run::drive` returns them
//! apart, and the verdict and the CLI's exit code are read from the type.

use crate::engine::cluster::api::ClusterError;
use crate::engine::cluster::setup::{SetupError, WorkloadsError};
use crate::engine::components::outside::OutsideError;
use crate::engine::lab::images::ImageBuildError;
use crate::engine::lab::images::build::BuildError;
use crate::engine::lab::sim::SimLabError;

/// A step that did not do what it says.
#[derive(Debug, thiserror::Error)]
#[error("step {number} ({summary}) failed: {reason}")]
pub(crate) struct StepFailure {
    /// The step's number in the scenario, from 1.
    pub(crate) number: usize,
    /// The step as the timeline shows it.
    pub(crate) summary: String,
    pub(crate) reason: StepError,
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// A `waitUntil` condition did not come true in time.
    #[error("{condition} did not hold within {within}")]
    NotWithin { condition: String, within: String },
    /// A request of the step failed at the API server.
    #[error("failed to {action}: {source}")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The orchestrator did not judge a pool change in time.
    #[error("the orchestrator did not judge the change within {within}; last seen: {last}")]
    NotJudged { within: String, last: String },
    /// The pool refused a change the scenario meant to make.
    #[error("the pool refused the change: {reason}: {message}")]
    Refused { reason: String, message: String },
    /// The pool accepted a change the scenario expected it to refuse.
    #[error("the pool accepted the change; expected a refusal matching /{pattern}/")]
    NotRefused { pattern: String },
    /// The pool refused, for another reason than the scenario expected.
    #[error("refused, but neither reason nor message matches /{pattern}/: {reason}: {message}")]
    RefusedOtherwise {
        pattern: String,
        reason: String,
        message: String,
    },
    /// A `run` step's command ended with another exit code than expected.
    #[error("it ended with {ended}, not the expected exit code {expected}{output}")]
    Exit {
        ended: String,
        expected: i32,
        output: String,
    },
    /// The run opened no outside door, so a `run` step's command cannot run.
    #[error("the run opened no outside access for commands")]
    NoOutside,
    /// A `run` step's command could not be started or waited for, or ran past its timeout. The
    /// message carries the whole chain: a step failure is read as one line.
    #[error("{}", rackproof_std::error_chain(.0))]
    Command(OutsideError),
    /// The lab could not do what the step asked (a `publish` on a backend without one). The
    /// message carries the whole chain.
    #[error("{}", rackproof_std::error_chain(.0))]
    Lab(crate::engine::lab::LabError),
    /// A value of the step the loader let through but the run cannot use.
    #[error("{0}")]
    Invalid(String),
}

/// The lab, the cluster or the run's own machinery failed before the system under test could be
/// judged. Its message is read with its sources ([`rackproof_std::error_chain`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabFailure {
    /// The node images could not be found or built.
    #[error("the node images are not ready")]
    Images(#[from] ImageBuildError),
    /// The cluster (a local control plane) could not be started.
    #[error(transparent)]
    ClusterStart(ClusterError),
    /// The scenario's objects could not be created.
    #[error("cluster setup failed")]
    ClusterSetup(#[source] SetupError),
    /// The node-image backends could not build the lab's machines.
    #[error(transparent)]
    BuildImages(#[from] BuildError),
    /// The `sim` backend could not build the lab's machines.
    #[error(transparent)]
    BuildSim(#[from] SimLabError),
    /// Backend `physical` was given no inventory.
    #[error("backend physical without an inventory")]
    NoInventory,
    /// The scenario's control-plane version is not a Kubernetes version.
    #[error("control-plane version {version:?}")]
    ControlPlaneVersion {
        version: String,
        #[source]
        source: inplace_api::version::VersionError,
    },
    /// The outside door for external components and `run` steps could not be opened, or a
    /// program they name is not found.
    #[error(transparent)]
    Components(#[from] OutsideError),
    /// Not every node of the pool registered and became Ready in time.
    #[error("the pool's {size} nodes did not come up within {within}; not up: {}", not_up.join(", "))]
    NodesNotUp {
        size: u32,
        within: String,
        not_up: Vec<String>,
    },
    /// The workloads could not be placed or did not start.
    #[error("placing the workloads failed")]
    Workloads(#[from] WorkloadsError),
}

/// How the steps ended when the lab held.
#[derive(Debug)]
pub(crate) enum StepsEnded {
    /// Every step did what it says.
    Done,
    /// A step failed; the ones after it did not run.
    Failed(StepFailure),
    /// The scenario's `timeout` ran out during the steps.
    TimedOut { timeout: String },
}

impl StepsEnded {
    /// What the run's failures list says about it (nothing when the steps were done).
    pub(crate) fn failure(&self) -> Option<String> {
        match self {
            Self::Done => None,
            Self::Failed(failure) => Some(failure.to_string()),
            Self::TimedOut { timeout } => Some(format!(
                "the scenario did not finish within its timeout of {timeout}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn a_step_failure_is_one_line_with_the_commands_whole_chain() {
        let failure = StepFailure {
            number: 2,
            summary: "run no-such-tool".to_owned(),
            reason: StepError::Command(OutsideError::Start {
                command: "no-such-tool --flag".to_owned(),
                source: not_found(),
            }),
        };
        assert_eq!(
            failure.to_string(),
            "step 2 (run no-such-tool) failed: failed to start `no-such-tool --flag` (is it installed and on PATH?): no such file"
        );
    }

    #[test]
    fn a_lab_failure_reads_with_its_sources() {
        let failure = LabFailure::from(OutsideError::KubeconfigDir(not_found()));
        assert_eq!(
            rackproof_std::error_chain(&failure),
            "failed to create a directory for the run's kubeconfig: no such file"
        );
    }
}
