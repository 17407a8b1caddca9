//! Pure per-node step of the in-place flow: given a node's labels, its `InPlaceUpdate` condition
//! and its Machine's phase, what the Machine controller does next (no I/O).
//!
//! The walk (MCM's `updateNodeConditionBasedOnLabel` + `inPlaceUpdate`, with the timeout of
//! `reconcileMachineHealth`):
//!
//! 1. candidate label, no condition → condition `CandidateForUpdate`;
//! 2. candidate + selected labels, condition `CandidateForUpdate` → `SelectedForUpdate` (its
//!    transition time starts the drain timeout) — unless the pool's rollout is halted (failed
//!    nodes reached `maxUnavailable`, in Auto and Manual pools alike): then the node stays
//!    selected and `CandidateForUpdate`, its condition message and an Event say why, and it goes
//!    on once the halt clears (GEP-31: "no additional machines in that MachineDeployment will be
//!    updated until the nodes with the update-failed label are fixed"). Nodes already past
//!    `SelectedForUpdate` finish their update;
//! 3. `SelectedForUpdate` → cordon and drain; forced once `machineDrainTimeout` has passed since
//!    the selection;
//! 4. drained → Machine phase `InPlaceUpdating` (its update time starts the update timeout), then
//!    condition `DrainSuccessful` → `ReadyForUpdate` (the agent's signal);
//! 5. `update-result=successful` → phase `InPlaceUpdateSuccessful`, condition `UpdateSuccessful`
//!    (the MachineDeployment reconciler then moves the Machine and clears the node);
//!    `update-result=failed` → phase `InPlaceUpdateFailed`, condition `UpdateFailed`, node stays
//!    cordoned;
//! 6. no result `machineInPlaceUpdateTimeout` after phase `InPlaceUpdating` → the orchestrator
//!    writes the failed mark itself (label + reason annotation naming the timeout), then 5;
//! 7. a person removes the failed mark (the `update-result` label) → the node is reset to a plain
//!    candidate: selection label, reason annotation and condition reset, node uncordoned; a node
//!    that is no candidate (its update needed no drain: a kubelet patch or a file change the
//!    agent applies at once) is recovered: reason annotation and condition removed, node
//!    uncordoned, Machine `Running` (the agent then tries its update again);
//! 8. leftovers of a step cut short by a restart are finished: a node that is no candidate any
//!    more while its Machine still says `InPlaceUpdateSuccessful` (cleared by the
//!    MachineDeployment before the condition was written) loses its condition and the Machine
//!    goes back to `Running`; a candidate whose Machine still has an in-place phase after a reset
//!    is reset again.

use std::time::Duration;

use jiff::Timestamp;

use crate::plan::UpdateResult;

/// `InPlaceUpdate` condition reasons, in MCM's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    CandidateForUpdate,
    SelectedForUpdate,
    DrainSuccessful,
    ReadyForUpdate,
    UpdateSuccessful,
    UpdateFailed,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::CandidateForUpdate => "CandidateForUpdate",
            Reason::SelectedForUpdate => "SelectedForUpdate",
            Reason::DrainSuccessful => "DrainSuccessful",
            Reason::ReadyForUpdate => "ReadyForUpdate",
            Reason::UpdateSuccessful => "UpdateSuccessful",
            Reason::UpdateFailed => "UpdateFailed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "CandidateForUpdate" => Reason::CandidateForUpdate,
            "SelectedForUpdate" => Reason::SelectedForUpdate,
            "DrainSuccessful" => Reason::DrainSuccessful,
            "ReadyForUpdate" => Reason::ReadyForUpdate,
            "UpdateSuccessful" => Reason::UpdateSuccessful,
            "UpdateFailed" => Reason::UpdateFailed,
            _ => return None,
        })
    }
}

/// Machine phases the step reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InPlacePhase {
    Updating,
    Successful,
    Failed,
    Other,
}

/// What the step looks at.
#[derive(Debug, Clone)]
pub(crate) struct NodeFacts {
    pub(crate) candidate: bool,
    pub(crate) selected: bool,
    pub(crate) result: Option<UpdateResult>,
    /// The `InPlaceUpdate` condition's reason and last transition time.
    pub(crate) condition: Option<(Reason, Timestamp)>,
    pub(crate) phase: InPlacePhase,
    /// When the Machine entered its current phase.
    pub(crate) phase_since: Option<Timestamp>,
    /// Whether the rollout of the node's pool is halted: `Some(None)` no, `Some(Some(why))`
    /// yes, `None` not known yet (no pass has got as far as the selection since the start).
    pub(crate) halt: Option<Option<String>>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Nothing,
    SetCondition(Reason),
    Drain {
        force: bool,
        deadline: Timestamp,
    },
    /// Set phase `InPlaceUpdating` (if not yet) and walk the condition to `ReadyForUpdate`.
    ReadyForUpdate,
    /// Phase `InPlaceUpdating` is missing although the condition says `ReadyForUpdate`.
    SetUpdating,
    WaitForResult {
        deadline: Timestamp,
    },
    RecordSuccess,
    RecordFailure,
    TimedOut {
        after: Duration,
    },
    /// The failed mark (or the selection, before the drain finished) was removed: back to candidate.
    ResetToCandidate,
    /// Selected while the rollout is halted (`Some(why)`), or while it is not known yet whether
    /// it is (`None`): the node stays selected and `CandidateForUpdate`, not drained.
    Hold(Option<String>),
    /// No candidate label any more: drop a leftover condition.
    ClearCondition,
    /// The failed mark of a node that is no candidate (an update that needed no drain: a
    /// kubelet patch, a file change) was removed: uncordon it and drop the condition.
    Recover,
}

pub(crate) fn next_step(
    facts: &NodeFacts,
    now: Timestamp,
    drain_timeout: Duration,
    update_timeout: Duration,
) -> Step {
    let reason = facts.condition.map(|(reason, _)| reason);
    match facts.result {
        Some(UpdateResult::Failed) => {
            if reason != Some(Reason::UpdateFailed) || facts.phase != InPlacePhase::Failed {
                return Step::RecordFailure;
            }
            return Step::Nothing;
        }
        Some(UpdateResult::Successful) => {
            if reason != Some(Reason::UpdateSuccessful) || facts.phase != InPlacePhase::Successful {
                return Step::RecordSuccess;
            }
            return Step::Nothing;
        }
        None => {}
    }
    if reason == Some(Reason::UpdateFailed) {
        return if facts.candidate {
            Step::ResetToCandidate
        } else {
            Step::Recover
        };
    }
    if !facts.candidate {
        return match reason {
            Some(
                Reason::CandidateForUpdate | Reason::SelectedForUpdate | Reason::UpdateSuccessful,
            ) => Step::ClearCondition,
            // The node was cleared after a success whose last writes were cut short (a restart
            // between the Machine phase and the condition, or between removing the condition and
            // resetting the phase): the update is over, finish the clean-up.
            _ if facts.phase == InPlacePhase::Successful => Step::ClearCondition,
            // A recovery cut short after the condition went but before the Machine's phase did.
            None if facts.phase == InPlacePhase::Failed => Step::Recover,
            _ => Step::Nothing,
        };
    }
    match facts.condition {
        None | Some((Reason::UpdateSuccessful, _)) => {
            Step::SetCondition(Reason::CandidateForUpdate)
        }
        Some((Reason::CandidateForUpdate, _)) if facts.selected => match &facts.halt {
            Some(None) => Step::SetCondition(Reason::SelectedForUpdate),
            Some(Some(why)) => Step::Hold(Some(why.clone())),
            None => Step::Hold(None),
        },
        // A reset to candidate cut short before the Machine phase was reset.
        Some((Reason::CandidateForUpdate, _)) if facts.phase != InPlacePhase::Other => {
            Step::ResetToCandidate
        }
        Some((Reason::CandidateForUpdate, _)) => Step::Nothing,
        Some((Reason::SelectedForUpdate, _)) if !facts.selected => Step::ResetToCandidate,
        Some((Reason::SelectedForUpdate, since)) => {
            let deadline = add(since, drain_timeout);
            Step::Drain {
                force: now >= deadline,
                deadline,
            }
        }
        Some((Reason::DrainSuccessful, _)) => Step::ReadyForUpdate,
        Some((Reason::ReadyForUpdate, _)) => {
            if facts.phase != InPlacePhase::Updating {
                return Step::SetUpdating;
            }
            let Some(since) = facts.phase_since else {
                return Step::SetUpdating;
            };
            let deadline = add(since, update_timeout);
            if now >= deadline {
                Step::TimedOut {
                    after: update_timeout,
                }
            } else {
                Step::WaitForResult { deadline }
            }
        }
        Some((Reason::UpdateFailed, _)) => Step::ResetToCandidate,
    }
}

fn add(at: Timestamp, duration: Duration) -> Timestamp {
    at.checked_add(duration).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            candidate: true,
            selected: false,
            result: None,
            condition: None,
            phase: InPlacePhase::Other,
            phase_since: None,
            halt: Some(None),
        }
    }

    const D: Duration = Duration::from_secs(7200);
    const U: Duration = Duration::from_secs(600);

    #[test]
    fn walks_candidate_selected_drain_ready() {
        let mut f = facts();
        assert_eq!(
            next_step(&f, t(0), D, U),
            Step::SetCondition(Reason::CandidateForUpdate)
        );
        f.condition = Some((Reason::CandidateForUpdate, t(0)));
        assert_eq!(next_step(&f, t(1), D, U), Step::Nothing);
        f.selected = true;
        assert_eq!(
            next_step(&f, t(1), D, U),
            Step::SetCondition(Reason::SelectedForUpdate)
        );
        f.condition = Some((Reason::SelectedForUpdate, t(2)));
        assert_eq!(
            next_step(&f, t(3), D, U),
            Step::Drain {
                force: false,
                deadline: t(7202)
            }
        );
        assert_eq!(
            next_step(&f, t(7202), D, U),
            Step::Drain {
                force: true,
                deadline: t(7202)
            }
        );
        f.condition = Some((Reason::DrainSuccessful, t(10)));
        assert_eq!(next_step(&f, t(10), D, U), Step::ReadyForUpdate);
    }

    #[test]
    fn a_selection_waits_while_the_rollout_is_halted() {
        let mut f = facts();
        f.selected = true;
        f.condition = Some((Reason::CandidateForUpdate, t(0)));
        f.halt = Some(Some("halted".into()));
        assert_eq!(next_step(&f, t(1), D, U), Step::Hold(Some("halted".into())));
        f.halt = None;
        assert_eq!(next_step(&f, t(1), D, U), Step::Hold(None));
        f.halt = Some(None);
        assert_eq!(
            next_step(&f, t(1), D, U),
            Step::SetCondition(Reason::SelectedForUpdate)
        );
        // A node already past the selection is not held.
        f.halt = Some(Some("halted".into()));
        f.condition = Some((Reason::SelectedForUpdate, t(2)));
        assert!(matches!(next_step(&f, t(3), D, U), Step::Drain { .. }));
    }

    #[test]
    fn times_out_exactly_at_the_deadline() {
        let mut f = facts();
        f.selected = true;
        f.condition = Some((Reason::ReadyForUpdate, t(0)));
        f.phase = InPlacePhase::Updating;
        f.phase_since = Some(t(0));
        assert_eq!(
            next_step(&f, t(599), D, U),
            Step::WaitForResult { deadline: t(600) }
        );
        assert_eq!(next_step(&f, t(600), D, U), Step::TimedOut { after: U });
    }

    #[test]
    fn results_are_recorded_once() {
        let mut f = facts();
        f.selected = true;
        f.condition = Some((Reason::ReadyForUpdate, t(0)));
        f.phase = InPlacePhase::Updating;
        f.result = Some(UpdateResult::Failed);
        assert_eq!(next_step(&f, t(1), D, U), Step::RecordFailure);
        f.condition = Some((Reason::UpdateFailed, t(1)));
        f.phase = InPlacePhase::Failed;
        assert_eq!(next_step(&f, t(2), D, U), Step::Nothing);
        f.result = Some(UpdateResult::Successful);
        assert_eq!(next_step(&f, t(3), D, U), Step::RecordSuccess);
    }

    #[test]
    fn removed_failed_mark_resets_to_candidate() {
        let mut f = facts();
        f.selected = true;
        f.condition = Some((Reason::UpdateFailed, t(0)));
        f.phase = InPlacePhase::Failed;
        assert_eq!(next_step(&f, t(1), D, U), Step::ResetToCandidate);
    }

    #[test]
    fn removed_failed_mark_of_a_no_drain_update_recovers_the_node() {
        let mut f = facts();
        f.candidate = false;
        f.condition = Some((Reason::UpdateFailed, t(0)));
        f.phase = InPlacePhase::Failed;
        assert_eq!(next_step(&f, t(1), D, U), Step::Recover);
        f.result = Some(UpdateResult::Failed);
        assert_eq!(next_step(&f, t(1), D, U), Step::Nothing, "still marked");
        // Cut short after the condition went: the Machine's phase is still reset.
        f.result = None;
        f.condition = None;
        assert_eq!(next_step(&f, t(1), D, U), Step::Recover);
        f.phase = InPlacePhase::Other;
        assert_eq!(next_step(&f, t(1), D, U), Step::Nothing);
    }

    #[test]
    fn clean_up_cut_short_by_a_restart_is_finished() {
        // Cleared (labels gone) while the condition still says ReadyForUpdate.
        let mut f = facts();
        f.candidate = false;
        f.condition = Some((Reason::ReadyForUpdate, t(0)));
        f.phase = InPlacePhase::Successful;
        assert_eq!(next_step(&f, t(1), D, U), Step::ClearCondition);
        // Condition removed, phase not yet back to Running.
        f.condition = None;
        assert_eq!(next_step(&f, t(1), D, U), Step::ClearCondition);
        // A candidate again, but the phase still says the update failed.
        let mut f = facts();
        f.condition = Some((Reason::CandidateForUpdate, t(0)));
        f.phase = InPlacePhase::Failed;
        assert_eq!(next_step(&f, t(1), D, U), Step::ResetToCandidate);
        // Without a stale phase nothing happens.
        f.phase = InPlacePhase::Other;
        assert_eq!(next_step(&f, t(1), D, U), Step::Nothing);
        // A node that is no candidate mid-update (someone removed the label) is left alone.
        let mut f = facts();
        f.candidate = false;
        f.condition = Some((Reason::ReadyForUpdate, t(0)));
        f.phase = InPlacePhase::Updating;
        assert_eq!(next_step(&f, t(1), D, U), Step::Nothing);
    }

    #[test]
    fn selection_on_a_non_candidate_is_ignored() {
        let mut f = facts();
        f.candidate = false;
        f.selected = true;
        assert_eq!(next_step(&f, t(0), D, U), Step::Nothing);
    }
}
