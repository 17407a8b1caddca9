//! Shared test fixtures: a small in-memory machine (ipmitool comes from `rackproof-test-support`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rackproof_driver::{
    BootControl, BootOverride, DriverError, Power, PowerState, ResetAction, SharedMachine,
};

/// What the test machine went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MachineState {
    pub(crate) power: PowerState,
    pub(crate) boot: BootOverride,
    /// Every reset action performed, in order.
    pub(crate) actions: Vec<ResetAction>,
    /// How many times the machine started booting (power on, cycle, reset).
    pub(crate) boots: u32,
}

/// A machine that changes state at once.
#[derive(Debug)]
pub(crate) struct TestMachine {
    state: Mutex<MachineState>,
    allowed: Vec<ResetAction>,
}

impl TestMachine {
    pub(crate) fn new(power: PowerState) -> Arc<Self> {
        Self::with_resets(power, ResetAction::ALL.to_vec())
    }

    /// A machine that offers only `allowed` reset actions.
    pub(crate) fn with_resets(power: PowerState, allowed: Vec<ResetAction>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(MachineState {
                power,
                boot: BootOverride::default(),
                actions: vec![],
                boots: 0,
            }),
            allowed,
        })
    }

    pub(crate) fn shared(self: &Arc<Self>) -> SharedMachine {
        Arc::clone(self) as SharedMachine
    }

    pub(crate) fn state(&self) -> MachineState {
        self.state.lock().unwrap().clone()
    }
}

#[async_trait]
impl Power for TestMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        Ok(self.state.lock().unwrap().power)
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let mut state = self.state.lock().unwrap();
        match action {
            ResetAction::On => {
                if state.power == PowerState::Off {
                    state.power = PowerState::On;
                    state.boots += 1;
                }
            }
            ResetAction::ForceOff | ResetAction::GracefulShutdown => state.power = PowerState::Off,
            ResetAction::PowerCycle => {
                state.power = PowerState::On;
                state.boots += 1;
            }
            ResetAction::ForceRestart | ResetAction::GracefulRestart | ResetAction::Nmi => {
                if state.power == PowerState::Off {
                    return Err(DriverError::Refused {
                        action: action.to_string(),
                        target: "test machine".to_owned(),
                        reason: "it is powered off".to_owned(),
                    });
                }
                if action != ResetAction::Nmi {
                    state.boots += 1;
                }
            }
        }
        state.actions.push(action);
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
