//! Machine phases, last-operation states and operation types, as MCM writes them into
//! `Machine.status`.

use crate::string_enum::string_enum;

string_enum! {
    /// `Machine.status.currentStatus.phase`.
    pub enum MachinePhase {
        /// The machine is being created.
        Pending = "Pending",
        /// The machine exists at the provider but has not joined the cluster.
        Available = "Available",
        /// The node is ready and running.
        Running = "Running",
        /// The machine is being deleted.
        Terminating = "Terminating",
        /// The node is not ready at the moment.
        Unknown = "Unknown",
        /// An operation timed out.
        Failed = "Failed",
        /// Creation keeps failing.
        CrashLoopBackOff = "CrashLoopBackOff",
        /// The machine is being updated in place.
        InPlaceUpdating = "InPlaceUpdating",
        /// The in-place update succeeded.
        InPlaceUpdateSuccessful = "InPlaceUpdateSuccessful",
        /// The in-place update failed.
        InPlaceUpdateFailed = "InPlaceUpdateFailed",
    }
}

impl MachinePhase {
    /// Whether the phase belongs to an in-place update (MCM counts these machines unavailable).
    pub fn is_in_place(&self) -> bool {
        matches!(
            self,
            Self::InPlaceUpdating | Self::InPlaceUpdateSuccessful | Self::InPlaceUpdateFailed
        )
    }
}

string_enum! {
    /// `Machine.status.lastOperation.state`.
    pub enum MachineState {
        /// The operation is not complete yet.
        Processing = "Processing",
        /// The operation failed.
        Failed = "Failed",
        /// The operation completed.
        Successful = "Successful",
    }
}

string_enum! {
    /// `Machine.status.lastOperation.type`.
    pub enum MachineOperationType {
        /// Creation.
        Create = "Create",
        /// A (rolling) update.
        Update = "Update",
        /// An in-place update.
        InPlaceUpdate = "InPlaceUpdate",
        /// A node drain.
        DrainNode = "DrainNode",
        /// A health check of the node.
        HealthCheck = "HealthCheck",
        /// Deletion.
        Delete = "Delete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_phases_use_mcm_wire_names() {
        for (phase, wire) in [
            (MachinePhase::InPlaceUpdating, "\"InPlaceUpdating\""),
            (
                MachinePhase::InPlaceUpdateSuccessful,
                "\"InPlaceUpdateSuccessful\"",
            ),
            (MachinePhase::InPlaceUpdateFailed, "\"InPlaceUpdateFailed\""),
            (MachinePhase::Running, "\"Running\""),
            (MachinePhase::Pending, "\"Pending\""),
            (MachinePhase::Failed, "\"Failed\""),
            (MachinePhase::Terminating, "\"Terminating\""),
            (MachinePhase::CrashLoopBackOff, "\"CrashLoopBackOff\""),
        ] {
            assert_eq!(serde_json::to_string(&phase).unwrap(), wire);
            assert_eq!(serde_json::from_str::<MachinePhase>(wire).unwrap(), phase);
        }
        assert!(MachinePhase::InPlaceUpdateFailed.is_in_place());
        assert!(!MachinePhase::Running.is_in_place());
    }

    #[test]
    fn unknown_phase_survives_a_round_trip() {
        let phase: MachinePhase = serde_json::from_str("\"Preserved\"").unwrap();
        assert_eq!(phase, MachinePhase::Other("Preserved".to_owned()));
        assert_eq!(serde_json::to_string(&phase).unwrap(), "\"Preserved\"");
    }

    #[test]
    fn operation_state_and_type_use_mcm_wire_names() {
        assert_eq!(MachineState::from("Processing"), MachineState::Processing);
        assert_eq!(
            MachineOperationType::InPlaceUpdate.as_str(),
            "InPlaceUpdate"
        );
        assert_eq!(
            MachineOperationType::from("DrainNode"),
            MachineOperationType::DrainNode
        );
    }
}
