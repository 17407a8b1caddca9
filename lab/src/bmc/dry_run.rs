//! Dry-run: a stand-in for a BMC client that records and prints each action it would take and
//! takes none. It never contacts the BMC; power-state reads answer from an assumed state that
//! follows the recorded actions.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use rackproof_driver::{BootControl, BootOverride, DriverError, Power, PowerState, ResetAction};
use rackproof_std::LockExt;

/// One BMC request a dry run would have sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BmcAction {
    ReadPowerState,
    Reset(ResetAction),
    ReadBootOverride,
    SetBootOverride(BootOverride),
}

impl std::fmt::Display for BmcAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ReadPowerState => f.write_str("read the power state"),
            Self::Reset(action) => write!(f, "send reset {action}"),
            Self::ReadBootOverride => f.write_str("read the boot override"),
            Self::SetBootOverride(o) => write!(
                f,
                "set the boot override to {} ({:?})",
                o.target.as_str(),
                o.mode
            ),
        }
    }
}

/// Where a dry run's lines go besides its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRunSink {
    /// Print each line on standard output.
    Stdout,
    /// Only record them.
    Quiet,
}

/// Records and prints BMC actions instead of taking them. Clones share the record.
#[derive(Debug, Clone)]
pub struct DryRunPower {
    node: String,
    target: String,
    sink: DryRunSink,
    state: Arc<Mutex<Record>>,
}

#[derive(Debug)]
struct Record {
    assumed: PowerState,
    boot: BootOverride,
    actions: Vec<BmcAction>,
    lines: Vec<String>,
}

impl DryRunPower {
    /// A dry run for `node` whose BMC is `target` (e.g. `redfish https://10.0.0.11`), assuming
    /// the machine is `assumed` to begin with.
    pub fn new(node: &str, target: &str, assumed: PowerState, sink: DryRunSink) -> Self {
        Self {
            node: node.to_owned(),
            target: target.to_owned(),
            sink,
            state: Arc::new(Mutex::new(Record {
                assumed,
                boot: BootOverride::default(),
                actions: Vec::new(),
                lines: Vec::new(),
            })),
        }
    }

    /// The actions recorded so far, in order.
    pub fn actions(&self) -> Vec<BmcAction> {
        self.lock().actions.clone()
    }

    /// The lines printed so far, in order.
    pub fn lines(&self) -> Vec<String> {
        self.lock().lines.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Record> {
        self.state.locked()
    }

    fn record(&self, record: &mut Record, action: BmcAction) {
        let line = format!(
            "dry-run: node {} ({}): would {action}",
            self.node, self.target
        );
        if self.sink == DryRunSink::Stdout {
            println!("{line}");
        }
        record.actions.push(action);
        record.lines.push(line);
    }
}

#[async_trait]
impl Power for DryRunPower {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        let mut record = self.lock();
        self.record(&mut record, BmcAction::ReadPowerState);
        Ok(record.assumed)
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let mut record = self.lock();
        self.record(&mut record, BmcAction::Reset(action));
        match action {
            ResetAction::On
            | ResetAction::PowerCycle
            | ResetAction::ForceRestart
            | ResetAction::GracefulRestart => record.assumed = PowerState::On,
            ResetAction::ForceOff | ResetAction::GracefulShutdown => {
                record.assumed = PowerState::Off;
            }
            ResetAction::Nmi => {}
        }
        Ok(())
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        ResetAction::ALL.to_vec()
    }
}

#[async_trait]
impl BootControl for DryRunPower {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        let mut record = self.lock();
        self.record(&mut record, BmcAction::ReadBootOverride);
        Ok(record.boot)
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        let mut record = self.lock();
        self.record(&mut record, BmcAction::SetBootOverride(setting));
        record.boot = setting;
        Ok(())
    }
}
