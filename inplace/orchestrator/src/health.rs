//! Machine health outside an in-place update, as MCM's machine controller judges it
//! (`machineCreationTimeout`, `machineHealthTimeout`):
//!
//! 1. A Machine `Pending` (no node bound, or its node never `Ready`) for longer than its creation
//!    timeout is `Failed`: `lastOperation` type `Create`, state `Failed`, the reason in its
//!    description, and a `CreationTimeout` Warning Event.
//! 2. A Machine `Unknown` (its node was `Ready`, is not now) for longer than its health timeout
//!    is `Failed` likewise (type `HealthCheck`, Event `HealthTimeout`), unless the Machine says
//!    `disableHealthTimeout: true` (the default of in-place pools, as Gardener renders them).
//! 3. Both are suspended while the Machine is under an in-place update: an in-place phase, or a
//!    node selected for update (a node rebooting into its new version is NotReady on purpose).
//!    The clock counts from the phase's `lastUpdateTime`, so it starts afresh after an update.
//! 4. `Failed` is final: the health phases never turn it back; the MachineSet deletes the
//!    Machine and creates a replacement (`machineset`), as MCM's does.

use std::time::Duration;

use inplace_api::crd::Machine;
use inplace_api::keys::{MachineOperationType, MachinePhase, MachineState};
use jiff::Timestamp;
use kube::ResourceExt;
use rackproof_clock::format_duration;

use crate::nodeops::PhaseChange;

/// What the health timeouts say about a Machine now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// No timeout runs (healthy, disabled, under update, or already failed).
    Fine,
    /// A timeout runs out at this instant.
    Due(Timestamp),
    /// A timeout ran out: the phase change and the Event reason.
    Failed(PhaseChange, &'static str),
}

/// The timeouts that apply to one Machine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) creation: Duration,
    pub(crate) health: Duration,
}

/// Judges `machine` (whose node is `node`, if bound) at `now`.
pub(crate) fn judge(
    machine: &Machine,
    node: Option<&str>,
    under_update: bool,
    timeouts: Timeouts,
    now: Timestamp,
) -> Verdict {
    let Some(status) = machine.status.as_ref() else {
        return Verdict::Fine;
    };
    let Some(since) = status.current_status.last_update_time.as_ref().map(|t| t.0) else {
        return Verdict::Fine;
    };
    if under_update {
        return Verdict::Fine;
    }
    let name = machine.name_any();
    let (timeout, operation, reason, description) = match status.current_status.phase {
        Some(MachinePhase::Pending) => (
            timeouts.creation,
            MachineOperationType::Create,
            "CreationTimeout",
            match node {
                None => format!(
                    "machine {name} failed to join the cluster within machineCreationTimeout ({}): no node was bound",
                    format_duration(timeouts.creation)
                ),
                Some(node) => format!(
                    "machine {name} failed to join the cluster within machineCreationTimeout ({}): node {node} never became Ready",
                    format_duration(timeouts.creation)
                ),
            },
        ),
        Some(MachinePhase::Unknown) if machine.spec.disable_health_timeout != Some(true) => (
            timeouts.health,
            MachineOperationType::HealthCheck,
            "HealthTimeout",
            format!(
                "machine {name} was unhealthy for longer than machineHealthTimeout ({}): node {} is not Ready",
                format_duration(timeouts.health),
                node.unwrap_or("(none)")
            ),
        ),
        _ => return Verdict::Fine,
    };
    let Some(deadline) = since.checked_add(timeout).ok() else {
        return Verdict::Fine;
    };
    if now < deadline {
        return Verdict::Due(deadline);
    }
    Verdict::Failed(
        PhaseChange {
            phase: MachinePhase::Failed,
            description,
            state: MachineState::Failed,
            operation,
        },
        reason,
    )
}

#[cfg(test)]
mod tests {
    use inplace_api::crd::{CurrentStatus, MachineStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    const TIMEOUTS: Timeouts = Timeouts {
        creation: Duration::from_secs(20 * 60),
        health: Duration::from_secs(10 * 60),
    };

    fn machine(phase: MachinePhase, since: Timestamp, disable: Option<bool>) -> Machine {
        let mut machine = Machine::new("m-0", Default::default());
        machine.spec.disable_health_timeout = disable;
        machine.status = Some(MachineStatus {
            current_status: CurrentStatus {
                phase: Some(phase),
                last_update_time: Some(Time(since)),
                ..Default::default()
            },
            ..Default::default()
        });
        machine
    }

    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH
            .checked_add(jiff::SignedDuration::from_mins(minutes))
            .unwrap()
    }

    #[test]
    fn pending_fails_after_the_creation_timeout_and_unknown_after_the_health_timeout() {
        let pending = machine(MachinePhase::Pending, at(0), None);
        assert_eq!(
            judge(&pending, None, false, TIMEOUTS, at(19)),
            Verdict::Due(at(20))
        );
        let Verdict::Failed(change, reason) = judge(&pending, None, false, TIMEOUTS, at(20)) else {
            panic!("a Pending machine fails at its creation timeout");
        };
        assert_eq!(
            (change.phase, change.operation, reason),
            (
                MachinePhase::Failed,
                MachineOperationType::Create,
                "CreationTimeout"
            )
        );
        let unknown = machine(MachinePhase::Unknown, at(0), None);
        let Verdict::Failed(change, reason) = judge(&unknown, Some("n-0"), false, TIMEOUTS, at(10))
        else {
            panic!("an Unknown machine fails at its health timeout");
        };
        assert_eq!(
            (change.state, reason),
            (MachineState::Failed, "HealthTimeout")
        );
        assert!(
            change.description.contains("node n-0"),
            "{}",
            change.description
        );
    }

    #[test]
    fn an_update_or_disable_health_timeout_suspends_them() {
        let unknown = machine(MachinePhase::Unknown, at(0), None);
        assert_eq!(
            judge(&unknown, Some("n"), true, TIMEOUTS, at(60)),
            Verdict::Fine
        );
        let disabled = machine(MachinePhase::Unknown, at(0), Some(true));
        assert_eq!(
            judge(&disabled, Some("n"), false, TIMEOUTS, at(60)),
            Verdict::Fine
        );
        let running = machine(MachinePhase::Running, at(0), None);
        assert_eq!(
            judge(&running, Some("n"), false, TIMEOUTS, at(60)),
            Verdict::Fine
        );
        let failed = machine(MachinePhase::Failed, at(0), None);
        assert_eq!(
            judge(&failed, Some("n"), false, TIMEOUTS, at(60)),
            Verdict::Fine
        );
    }
}
