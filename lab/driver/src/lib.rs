//! Driver traits for lab hardware, in labgrid's three layers: resources describe hardware as plain
//! data (elsewhere), drivers act on it through the small traits here, and strategies compose
//! drivers into idempotent state machines.
//!
//! Every BMC protocol (Redfish, IPMI, QMP) implements [`Power`] and [`BootOverride`] as a client,
//! and every machine backend (sim, qemu, libvirt) implements them directly, so a BMC emulator can
//! sit in front of any machine and the harness drives an emulated node and a rack server through
//! the same client code.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Power state as a BMC reports it (Redfish `PowerState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PowerState {
    On,
    Off,
    PoweringOn,
    PoweringOff,
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::On => "On",
            Self::Off => "Off",
            Self::PoweringOn => "PoweringOn",
            Self::PoweringOff => "PoweringOff",
        })
    }
}

/// A power action, named as Redfish's `ComputerSystem.Reset` `ResetType` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResetAction {
    /// Power on (nothing to do if already on).
    On,
    /// Cut power at once.
    ForceOff,
    /// Ask the OS to shut down (ACPI power button).
    GracefulShutdown,
    /// Ask the OS to reboot.
    GracefulRestart,
    /// Reset the machine at once, power staying on.
    ForceRestart,
    /// Power off, then on again.
    PowerCycle,
    /// Send a non-maskable interrupt.
    Nmi,
}

impl ResetAction {
    /// Every reset action, in Redfish's order.
    pub const ALL: [ResetAction; 7] = [
        Self::On,
        Self::ForceOff,
        Self::GracefulShutdown,
        Self::GracefulRestart,
        Self::ForceRestart,
        Self::PowerCycle,
        Self::Nmi,
    ];

    /// The Redfish `ResetType` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "On",
            Self::ForceOff => "ForceOff",
            Self::GracefulShutdown => "GracefulShutdown",
            Self::GracefulRestart => "GracefulRestart",
            Self::ForceRestart => "ForceRestart",
            Self::PowerCycle => "PowerCycle",
            Self::Nmi => "Nmi",
        }
    }
}

impl fmt::Display for ResetAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ResetAction {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownValue::new("reset type", s, Self::ALL.iter().map(|a| a.as_str())))
    }
}

/// Whether a boot source override applies (Redfish `BootSourceOverrideEnabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum BootOverrideMode {
    #[default]
    Disabled,
    /// For the next boot only; the BMC clears it after that boot.
    Once,
    /// For every boot until changed.
    Continuous,
}

/// The device a boot override points at (Redfish `BootSourceOverrideTarget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum BootTarget {
    /// No override: the firmware's boot order (for us: the disk's ESP and systemd-boot).
    #[default]
    None,
    Pxe,
    Hdd,
    Cd,
    UefiHttp,
}

impl BootTarget {
    /// Every boot target, in Redfish's order.
    pub const ALL: [BootTarget; 5] = [Self::None, Self::Pxe, Self::Hdd, Self::Cd, Self::UefiHttp];

    /// The Redfish `BootSourceOverrideTarget` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Pxe => "Pxe",
            Self::Hdd => "Hdd",
            Self::Cd => "Cd",
            Self::UefiHttp => "UefiHttp",
        }
    }
}

impl FromStr for BootTarget {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                UnknownValue::new("boot target", s, Self::ALL.iter().map(|t| t.as_str()))
            })
    }
}

/// A boot source override: where the next boot(s) go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct BootOverride {
    pub mode: BootOverrideMode,
    pub target: BootTarget,
}

/// A string that names none of the allowed values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}; allowed: {}", allowed.join(", "))]
pub struct UnknownValue {
    what: &'static str,
    given: String,
    allowed: Vec<String>,
}

impl UnknownValue {
    fn new<'a>(what: &'static str, given: &str, allowed: impl Iterator<Item = &'a str>) -> Self {
        Self {
            what,
            given: given.to_owned(),
            allowed: allowed.map(str::to_owned).collect(),
        }
    }
}

/// What went wrong in a driver call. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The hardware or BMC does not offer this action (e.g. a reset type not in its allowable values).
    #[error("{action} is not supported by {target}")]
    Unsupported { action: String, target: String },
    /// The action was refused in the current state (e.g. reset while powered off).
    #[error("{target} refused {action}: {reason}")]
    Refused {
        action: String,
        target: String,
        reason: String,
    },
    /// The BMC or machine could not be reached or answered with an error.
    #[error("{target} failed: {message}")]
    Failed {
        target: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A deadline passed while waiting for the hardware.
    #[error("{target}: {what} did not happen within {after:?}")]
    Timeout {
        target: String,
        what: String,
        after: std::time::Duration,
    },
}

/// Power control, from a BMC client or directly from a machine backend.
#[async_trait]
pub trait Power: Send + Sync + fmt::Debug {
    /// The current power state.
    async fn power_state(&self) -> Result<PowerState, DriverError>;
    /// Performs `action`. Idempotent where the action allows it: `On` when on does nothing.
    async fn reset(&self, action: ResetAction) -> Result<(), DriverError>;
    /// The reset actions this target offers (Redfish `ResetType@Redfish.AllowableValues`).
    fn allowed_resets(&self) -> Vec<ResetAction>;
}

/// Boot source override, from a BMC client or directly from a machine backend.
#[async_trait]
pub trait BootControl: Send + Sync + fmt::Debug {
    /// The override in force.
    async fn boot_override(&self) -> Result<BootOverride, DriverError>;
    /// Sets the override for the next boot (`Once`) or every boot (`Continuous`).
    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError>;
}

/// A machine seen from its management side: what a BMC emulator sits in front of.
pub trait ManagedMachine: Power + BootControl {}

impl<T: Power + BootControl> ManagedMachine for T {}

/// A shared handle to any managed machine.
pub type SharedMachine = Arc<dyn ManagedMachine>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_actions_round_trip_through_their_redfish_names() {
        for action in ResetAction::ALL {
            assert_eq!(action.as_str().parse::<ResetAction>().unwrap(), action);
        }
        let err = "Reboot".parse::<ResetAction>().unwrap_err().to_string();
        assert!(err.contains("unknown reset type \"Reboot\""), "{err}");
        assert!(err.contains("ForceRestart"), "{err}");
    }

    #[test]
    fn boot_targets_round_trip_through_their_redfish_names() {
        for target in BootTarget::ALL {
            assert_eq!(target.as_str().parse::<BootTarget>().unwrap(), target);
        }
        assert!("Floppy".parse::<BootTarget>().is_err());
    }
}
