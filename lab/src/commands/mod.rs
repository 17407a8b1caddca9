//! The library side of `rackproof lab`: each command takes an inventory and node names, and
//! returns typed results; the binary parses flags and prints.
//!
//! - [`up`]: reserve the nodes, power each on and wait until its OS is up (the
//!   [`NodeControl::power_on_and_wait_until_up`] strategy, watching the node's console);
//! - [`down`]: reserve the nodes, power each off (`ForceOff`) and wait until the BMC reports `Off`;
//! - [`power`]: reserve one node and run `on|off|cycle|reset|status` on it;
//! - [`console`]: stream one node's console (no reservation: reading disturbs nobody);
//! - [`bmc_serve`]: Redfish and/or IPMI emulators in front of sim or QEMU machines ([`qemu_nodes`]
//!   makes a QEMU node set from the images), with a credentials file per node and an inventory
//!   that points at them (for QEMU nodes also SSH and the harness address: a rack `rackproof run`
//!   can use as backend `physical`).
//!
//! Unknown node names are refused before anything happens. With [`LabOptions::dry_run`] set,
//! credentials are still resolved (so a missing variable shows up), but no BMC is contacted and
//! no node reserved: a [`DryRunPower`] records and prints what would be sent. Since it cannot
//! read the real power state, it assumes the state that makes the command act (off for `up` and
//! `power on`, on otherwise), so the plan lists every action the command can take.
//! Nodes of one command are worked on concurrently; each gets its own [`NodeOutcome`].

mod serve;

use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::{DriverError, Power, PowerState, ResetAction};
use tokio::sync::broadcast;

pub use self::serve::{
    BmcServer, QemuNodesError, SSH_KEY_FILE, ServeError, ServeKind, ServeMachine, ServeOptions,
    ServedNode, bmc_serve, images_host_key, qemu_nodes,
};
use crate::bmc::{
    BmcAction, BmcError, BmcOptions, DryRunPower, DryRunSink, connect_node, describe,
    resolve_credentials,
};
use crate::console::{ConsoleLine, ConsoleSource};
use crate::env::{Env, NoDirectory};
use crate::physical::{
    ConsoleError, InventoryFile, Reservation, ReservationError, StreamConsole, UnknownNode,
};
use crate::resource::NodeDescription;
use crate::strategy::{NodeControl, StrategyError, WaitOptions};

/// What every command needs besides its arguments.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Where credentials variables and `RACKPROOF_LOCK_DIR` are read.
    pub env: Env,
    pub clock: Clock,
    /// `Some`: record (and maybe print) BMC actions instead of taking them.
    pub dry_run: Option<DryRunSink>,
    pub bmc: BmcOptions,
    pub wait: WaitOptions,
    /// The pause between power-state polls while waiting for `Off`.
    pub poll_interval: Duration,
}

impl LabOptions {
    /// The process environment, the wall clock, real actions and default waits.
    pub fn new(env: Env, clock: Clock) -> Self {
        Self {
            env,
            clock,
            dry_run: None,
            bmc: BmcOptions::default(),
            wait: WaitOptions::default(),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// A command that failed, for the whole command or for one node.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    UnknownNode(#[from] UnknownNode),
    #[error(transparent)]
    LockDir(#[from] NoDirectory),
    #[error(transparent)]
    Reservation(#[from] ReservationError),
    #[error(transparent)]
    Bmc(Box<BmcError>),
    #[error(transparent)]
    Strategy(Box<StrategyError>),
    #[error(transparent)]
    Console(#[from] ConsoleError),
    #[error("node {node}: {action}")]
    Driver {
        node: String,
        action: String,
        #[source]
        source: DriverError,
    },
    #[error("node {node}: no console in the inventory{}", if *for_up { "; `up` watches it to see the OS come up" } else { "" })]
    NoConsole { node: String, for_up: bool },
    #[error("node {node}: still {state} {} after ForceOff", rackproof_clock::format_duration(*after))]
    StayedOn {
        node: String,
        state: PowerState,
        after: Duration,
    },
}

impl From<BmcError> for CommandError {
    fn from(error: BmcError) -> Self {
        Self::Bmc(Box::new(error))
    }
}

impl From<StrategyError> for CommandError {
    fn from(error: StrategyError) -> Self {
        Self::Strategy(Box::new(error))
    }
}

/// One node's result within a command.
#[derive(Debug)]
pub struct NodeOutcome<T> {
    pub node: String,
    pub result: Result<T, CommandError>,
}

/// What `up` did to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpReport {
    /// The OS is up and reports this version.
    Up {
        version: String,
    },
    DryRun {
        actions: Vec<BmcAction>,
    },
}

/// What `down` did to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReport {
    /// The node is off; it was `was` before.
    Off {
        was: PowerState,
    },
    DryRun {
        actions: Vec<BmcAction>,
    },
}

/// `rackproof lab power NODE on|off|cycle|reset|status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerCommand {
    /// `On` (nothing to do when on).
    On,
    /// `ForceOff`.
    Off,
    /// `PowerCycle`.
    Cycle,
    /// `ForceRestart`.
    Reset,
    /// Read the power state.
    Status,
}

impl PowerCommand {
    pub const ALL: [PowerCommand; 5] =
        [Self::On, Self::Off, Self::Cycle, Self::Reset, Self::Status];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Cycle => "cycle",
            Self::Reset => "reset",
            Self::Status => "status",
        }
    }

    /// The reset it sends, if any.
    pub fn reset_action(self) -> Option<ResetAction> {
        match self {
            Self::On => Some(ResetAction::On),
            Self::Off => Some(ResetAction::ForceOff),
            Self::Cycle => Some(ResetAction::PowerCycle),
            Self::Reset => Some(ResetAction::ForceRestart),
            Self::Status => None,
        }
    }
}

/// "would: A; B" for a dry run's actions.
fn dry_run(f: &mut std::fmt::Formatter<'_>, actions: &[BmcAction]) -> std::fmt::Result {
    let actions: Vec<String> = actions.iter().map(ToString::to_string).collect();
    write!(
        f,
        "dry run, would: {}",
        if actions.is_empty() {
            "nothing".to_owned()
        } else {
            actions.join("; ")
        }
    )
}

impl std::fmt::Display for UpReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Up { version } => write!(f, "up, running {version}"),
            Self::DryRun { actions } => dry_run(f, actions),
        }
    }
}

impl std::fmt::Display for DownReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Off { was } => write!(f, "off (was {was})"),
            Self::DryRun { actions } => dry_run(f, actions),
        }
    }
}

impl std::fmt::Display for PowerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done {
                command: PowerCommand::Status,
                state,
            } => write!(f, "power is {state}"),
            Self::Done { command, state } => write!(f, "{command} done, power is {state}"),
            Self::DryRun { actions } => dry_run(f, actions),
        }
    }
}

impl std::fmt::Display for PowerCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A power command name that is not one of `on|off|cycle|reset|status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown power command {given:?}; use one of on, off, cycle, reset, status")]
pub struct UnknownPowerCommand {
    pub given: String,
}

impl std::str::FromStr for PowerCommand {
    type Err = UnknownPowerCommand;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownPowerCommand {
                given: s.to_owned(),
            })
    }
}

/// What `power` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerReport {
    /// The command ran; the BMC reports `state` afterwards.
    Done {
        command: PowerCommand,
        state: PowerState,
    },
    DryRun {
        actions: Vec<BmcAction>,
    },
}

/// A node's power driver: the BMC client, or a dry run standing in for it.
enum Driver {
    Real(Arc<dyn Power>),
    DryRun(DryRunPower),
}

impl Driver {
    fn power(&self) -> Arc<dyn Power> {
        match self {
            Self::Real(p) => p.clone(),
            Self::DryRun(d) => Arc::new(d.clone()),
        }
    }

    fn dry_run_actions(&self) -> Option<Vec<BmcAction>> {
        match self {
            Self::Real(_) => None,
            Self::DryRun(d) => Some(d.actions()),
        }
    }
}

/// The node's driver; a dry run assumes the machine starts `assumed` (the state that makes the
/// command do something, so the plan shows every action).
async fn driver(
    node: &NodeDescription,
    options: &LabOptions,
    assumed: PowerState,
) -> Result<Driver, CommandError> {
    let Some(sink) = options.dry_run else {
        let machine = connect_node(node, &options.env, &options.bmc, options.clock.clone()).await?;
        let power: Arc<dyn Power> = machine;
        return Ok(Driver::Real(power));
    };
    let bmc = node.bmc.as_ref().ok_or_else(|| BmcError::NoBmc {
        node: node.name.clone(),
    })?;
    resolve_credentials(&bmc.credentials, &options.env).map_err(|source| {
        BmcError::Credentials {
            node: node.name.clone(),
            source,
        }
    })?;
    Ok(Driver::DryRun(DryRunPower::new(
        &node.name,
        &describe(bmc),
        assumed,
        sink,
    )))
}

fn driver_error<'a>(
    node: &'a str,
    action: &'a str,
) -> impl FnOnce(DriverError) -> CommandError + 'a {
    move |source| CommandError::Driver {
        node: node.to_owned(),
        action: action.to_owned(),
        source,
    }
}

/// Reserves `nodes` unless dry-running.
fn reserve(
    nodes: &[&NodeDescription],
    options: &LabOptions,
) -> Result<Vec<Reservation>, CommandError> {
    if options.dry_run.is_some() {
        return Ok(Vec::new());
    }
    let dir = options.env.lock_dir()?;
    Ok(Reservation::acquire_all(
        &dir,
        nodes.iter().map(|n| n.name.as_str()),
        &options.clock,
    )?)
}

async fn each<'a, T, F, Fut>(nodes: &[&'a NodeDescription], run: F) -> Vec<NodeOutcome<T>>
where
    F: Fn(&'a NodeDescription) -> Fut,
    Fut: Future<Output = Result<T, CommandError>>,
{
    let runs = nodes.iter().map(|node| {
        let fut = run(node);
        async move {
            NodeOutcome {
                node: node.name.clone(),
                result: fut.await,
            }
        }
    });
    futures::future::join_all(runs).await
}

/// Powers `nodes` (every node when empty) on and waits until their OS is up.
pub async fn up(
    inventory: &InventoryFile,
    nodes: &[String],
    options: &LabOptions,
) -> Result<Vec<NodeOutcome<UpReport>>, CommandError> {
    let selected = inventory.select(nodes)?;
    let _reservations = reserve(&selected, options)?;
    Ok(each(&selected, |node| up_one(node, options)).await)
}

async fn up_one(node: &NodeDescription, options: &LabOptions) -> Result<UpReport, CommandError> {
    let Some(console) = &node.console else {
        return Err(CommandError::NoConsole {
            node: node.name.clone(),
            for_up: true,
        });
    };
    let driver = driver(node, options, PowerState::Off).await?;
    let power = driver.power();
    if matches!(driver, Driver::DryRun(_)) {
        if power
            .power_state()
            .await
            .map_err(driver_error(&node.name, "read power state"))?
            != PowerState::On
        {
            power
                .reset(ResetAction::On)
                .await
                .map_err(driver_error(&node.name, "power on"))?;
        }
        return Ok(UpReport::DryRun {
            actions: driver.dry_run_actions().unwrap_or_default(),
        });
    }
    let console = StreamConsole::open(&node.name, console, options.clock.clone()).await?;
    let control = NodeControl::new(&node.name, power, Arc::new(console), options.clock.clone());
    let version = control.power_on_and_wait_until_up(options.wait).await?;
    Ok(UpReport::Up { version })
}

/// Powers `nodes` (every node when empty) off and waits until their BMCs report `Off`.
pub async fn down(
    inventory: &InventoryFile,
    nodes: &[String],
    options: &LabOptions,
) -> Result<Vec<NodeOutcome<DownReport>>, CommandError> {
    let selected = inventory.select(nodes)?;
    let _reservations = reserve(&selected, options)?;
    Ok(each(&selected, |node| down_one(node, options)).await)
}

async fn down_one(
    node: &NodeDescription,
    options: &LabOptions,
) -> Result<DownReport, CommandError> {
    let driver = driver(node, options, PowerState::On).await?;
    let power = driver.power();
    let name = node.name.as_str();
    let was = power
        .power_state()
        .await
        .map_err(driver_error(name, "read power state"))?;
    if was != PowerState::Off {
        power
            .reset(ResetAction::ForceOff)
            .await
            .map_err(driver_error(name, "power off"))?;
    }
    if let Some(actions) = driver.dry_run_actions() {
        return Ok(DownReport::DryRun { actions });
    }
    let start = options.clock.instant();
    loop {
        let state = power
            .power_state()
            .await
            .map_err(driver_error(name, "read power state"))?;
        if state == PowerState::Off {
            return Ok(DownReport::Off { was });
        }
        if options.clock.since(start) >= options.wait.power_on_grace {
            return Err(CommandError::StayedOn {
                node: name.to_owned(),
                state,
                after: options.wait.power_on_grace,
            });
        }
        options.clock.sleep(options.poll_interval).await;
    }
}

/// Runs `command` on `node` through its BMC.
pub async fn power(
    inventory: &InventoryFile,
    node: &str,
    command: PowerCommand,
    options: &LabOptions,
) -> Result<PowerReport, CommandError> {
    let description = inventory.node(node)?;
    let _reservation = reserve(&[description], options)?;
    let assumed = match command {
        PowerCommand::On => PowerState::Off,
        _ => PowerState::On,
    };
    let driver = driver(description, options, assumed).await?;
    let power = driver.power();
    if let Some(action) = command.reset_action() {
        power
            .reset(action)
            .await
            .map_err(driver_error(node, &format!("power {command}")))?;
    }
    if let Some(actions) = driver.dry_run_actions() {
        return Ok(PowerReport::DryRun { actions });
    }
    let state = power
        .power_state()
        .await
        .map_err(driver_error(node, "read power state"))?;
    Ok(PowerReport::Done { command, state })
}

/// A node's console being streamed: the lines since the current boot started, then each new one.
#[derive(Debug)]
pub struct ConsoleSession {
    backlog: std::collections::VecDeque<ConsoleLine>,
    receiver: broadcast::Receiver<ConsoleLine>,
    _source: StreamConsole,
}

impl ConsoleSession {
    /// The next line; `None` when the console ended. Lines missed because the reader fell far
    /// behind are skipped (with a warning).
    pub async fn next_line(&mut self) -> Option<ConsoleLine> {
        if let Some(line) = self.backlog.pop_front() {
            return Some(line);
        }
        loop {
            match self.receiver.recv().await {
                Ok(line) => return Some(line),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "console lines skipped");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Opens `node`'s console for streaming.
pub async fn console(
    inventory: &InventoryFile,
    node: &str,
    options: &LabOptions,
) -> Result<ConsoleSession, CommandError> {
    let description = inventory.node(node)?;
    let Some(console) = &description.console else {
        return Err(CommandError::NoConsole {
            node: node.to_owned(),
            for_up: false,
        });
    };
    let source = StreamConsole::open(node, console, options.clock.clone()).await?;
    let (backlog, receiver) = source.subscribe();
    Ok(ConsoleSession {
        backlog: backlog.into(),
        receiver,
        _source: source,
    })
}

#[cfg(test)]
mod tests {
    use rackproof_driver::{PowerState, ResetAction};

    use super::{BmcAction, DownReport, PowerCommand, PowerReport, UpReport};

    #[test]
    fn reports_read_as_sentences() {
        let status = PowerReport::Done {
            command: PowerCommand::Status,
            state: PowerState::On,
        };
        assert_eq!(status.to_string(), "power is On");
        let cycle = PowerReport::Done {
            command: PowerCommand::Cycle,
            state: PowerState::On,
        };
        assert_eq!(cycle.to_string(), "cycle done, power is On");
        assert_eq!(
            UpReport::Up {
                version: "1.1.0".into()
            }
            .to_string(),
            "up, running 1.1.0"
        );
        assert_eq!(
            DownReport::Off {
                was: PowerState::On
            }
            .to_string(),
            "off (was On)"
        );
        let dry = PowerReport::DryRun {
            actions: vec![
                BmcAction::ReadPowerState,
                BmcAction::Reset(ResetAction::ForceOff),
            ],
        };
        assert_eq!(
            dry.to_string(),
            format!(
                "dry run, would: read the power state; send reset {}",
                ResetAction::ForceOff
            )
        );
        assert_eq!(
            DownReport::DryRun {
                actions: Vec::new()
            }
            .to_string(),
            "dry run, would: nothing"
        );
    }
}
