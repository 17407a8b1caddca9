//! A small in-test machine implementing the driver traits, and helpers to put the emulator in
//! front of it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_redfish::{Emulator, EmulatorConfig};

pub(crate) const USER: &str = "admin";
pub(crate) const PASSWORD: &str = "hunter2-very-secret";

/// A machine whose power and boot override are plain fields.
#[derive(Debug)]
pub(crate) struct TestMachine {
    allowed: Vec<ResetAction>,
    state: Mutex<MachineState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MachineState {
    pub(crate) power: PowerState,
    pub(crate) boot: BootOverride,
    /// Boots so far (power-on, restarts, cycles).
    pub(crate) boots: u32,
    /// The boot target each boot used.
    pub(crate) booted_from: Vec<BootTarget>,
    pub(crate) resets: Vec<ResetAction>,
    pub(crate) nmis: u32,
}

impl TestMachine {
    pub(crate) fn new(power: PowerState) -> Arc<Self> {
        Self::with_allowed(power, ResetAction::ALL.to_vec())
    }

    pub(crate) fn with_allowed(power: PowerState, allowed: Vec<ResetAction>) -> Arc<Self> {
        Arc::new(Self {
            allowed,
            state: Mutex::new(MachineState {
                power,
                boot: BootOverride::default(),
                boots: 0,
                booted_from: Vec::new(),
                resets: Vec::new(),
                nmis: 0,
            }),
        })
    }

    pub(crate) fn snapshot(&self) -> MachineState {
        self.state.lock().unwrap().clone()
    }
}

impl MachineState {
    fn boot(&mut self) {
        self.power = PowerState::On;
        self.boots += 1;
        let target = if self.boot.mode == BootOverrideMode::Disabled {
            BootTarget::None
        } else {
            self.boot.target
        };
        self.booted_from.push(target);
        if self.boot.mode == BootOverrideMode::Once {
            self.boot = BootOverride::default();
        }
    }
}

#[async_trait]
impl Power for TestMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        Ok(self.state.lock().unwrap().power)
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let mut state = self.state.lock().unwrap();
        state.resets.push(action);
        let off = state.power == PowerState::Off;
        let refused = |reason: &str| DriverError::Refused {
            action: action.to_string(),
            target: "test machine".into(),
            reason: reason.into(),
        };
        match action {
            ResetAction::On if off => state.boot(),
            ResetAction::On => {}
            ResetAction::ForceOff | ResetAction::GracefulShutdown => state.power = PowerState::Off,
            ResetAction::GracefulRestart | ResetAction::ForceRestart if off => {
                return Err(refused("powered off"));
            }
            ResetAction::GracefulRestart | ResetAction::ForceRestart | ResetAction::PowerCycle => {
                state.boot()
            }
            ResetAction::Nmi if off => return Err(refused("powered off")),
            ResetAction::Nmi => state.nmis += 1,
        }
        Ok(())
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        self.allowed.clone()
    }
}

#[async_trait]
impl BootControl for TestMachine {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        Ok(self.state.lock().unwrap().boot)
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        self.state.lock().unwrap().boot = setting;
        Ok(())
    }
}

/// An emulator with one system (`1`) in front of `machine`.
pub(crate) fn emulator(machine: Arc<TestMachine>, clock: Clock) -> Emulator {
    Emulator::new(EmulatorConfig::single(machine, USER, PASSWORD, clock)).unwrap()
}
