//! Rack servers as lab nodes (backend `physical`): the inventory's nodes the scenario names,
//! reserved for the run (`rackproof_lab::physical::Reservation`), driven through their own BMCs,
//! watched on the consoles the inventory names, and reached over SSH.
//!
//! A server boots whatever is on its disk, so a run can't reimage it. Provisioning one for a
//! Machine instead:
//! 1. brings it up (when the lab is built, all servers at once: a server's POST takes minutes);
//! 2. over SSH, checks it runs the pool's version and writes the run's identity to its state
//!    partition (`rackproof_lab::physical::deliver_identity`);
//! 3. shuts it down through the BMC (ACPI, then a forced power-off if it lingers), so the power-on
//!    that follows boots it with the identity, as a guest's first boot would.

use std::path::PathBuf;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::{DriverError, PowerState, ResetAction};
use rackproof_lab::bmc::{self, BmcError, BmcOptions};
use rackproof_lab::env::{Env, NoDirectory};
use rackproof_lab::physical::{
    self, ConsoleError, DeliveryError, InventoryFile, Reservation, ReservationError, StreamConsole,
    UnknownNode,
};
use rackproof_lab::resource::ConsoleDescription;
use rackproof_qemu::NodeIdentity;
use regex::Regex;

use crate::engine::lab::guest::{Guest, GuestError, RackServer};

/// How long a server may take from power-on to its OS reporting up (POST on real hardware).
const BOOT_DEADLINE: Duration = Duration::from_secs(900);
/// How long an ACPI shutdown may take before the power is forced off.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(90);
/// How long a server may take to report `Off` after a forced power-off.
const FORCE_OFF_GRACE: Duration = Duration::from_secs(30);

/// Why a rack server could not be reserved, reached, brought up or provisioned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RackError {
    /// The inventory does not list the node.
    #[error(transparent)]
    NotInInventory(#[from] UnknownNode),
    /// There is no directory for the reservations' lock files.
    #[error(transparent)]
    LockDir(#[from] NoDirectory),
    /// The node is held by another run, or its lock could not be taken.
    #[error(transparent)]
    Reservation(#[from] ReservationError),
    /// The inventory names no console for the node.
    #[error(
        "node {node}: no console in inventory {}; a run watches it to see the OS come up",
        inventory.display()
    )]
    NoConsole { node: String, inventory: PathBuf },
    /// The node's console could not be followed.
    #[error(transparent)]
    Console(#[from] ConsoleError),
    /// The node's BMC could not be connected to.
    #[error(transparent)]
    Bmc(#[from] BmcError),
    /// The node is not reachable over SSH, or the identity could not be delivered.
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    /// The node's BMC did not report its power state.
    #[error("node {node}: read its power state")]
    PowerState {
        node: String,
        #[source]
        source: DriverError,
    },
    /// The node's BMC refused or failed a reset.
    #[error("node {node}: {action}")]
    Reset {
        node: String,
        action: ResetAction,
        #[source]
        source: DriverError,
    },
    /// The node's OS did not come up on its console.
    #[error(transparent)]
    NotUp(#[from] GuestError),
    /// The node runs another OS version than the pool starts from.
    #[error(
        "node {node} runs OS {runs}, but the pool starts from {wanted}; install {wanted} on it (ci/build-images makes disks/{wanted}.raw) and run again"
    )]
    WrongVersion {
        node: String,
        runs: String,
        wanted: String,
    },
    /// A forced power-off did not take.
    #[error("node {node}: its BMC still reports it on after a forced power-off")]
    StillOn { node: String },
}

/// Reserves, connects and starts following the console of the inventory's node `name`.
pub(crate) async fn open(
    inventory: &InventoryFile,
    name: &str,
    clock: &Clock,
) -> Result<RackServer, RackError> {
    let description = inventory.node(name)?.clone();
    let env = Env::process();
    let lock_dir = env.lock_dir()?;
    let reservation = Reservation::acquire(&lock_dir, name, clock)?;
    let console = description
        .console
        .as_ref()
        .ok_or_else(|| RackError::NoConsole {
            node: name.to_owned(),
            inventory: inventory.path.clone(),
        })?;
    physical::ssh_target(&description)?;
    let source = StreamConsole::open(name, console, clock.clone()).await?;
    let bmc = bmc::connect_node(&description, &env, &BmcOptions::default(), clock.clone()).await?;
    // What a console wait that timed out points at.
    let log = match console {
        ConsoleDescription::File { path } => path.clone(),
        ConsoleDescription::Tcp { host, port } => {
            std::path::PathBuf::from(format!("tcp://{host}:{port}"))
        }
    };
    Ok(RackServer::new(description, bmc, source, reservation, &log))
}

/// Makes sure the server's OS is up: powers it on if it is off, restarts it if it is on but its
/// console does not show the OS up (stuck, or a boot the run did not see start).
pub(crate) async fn ensure_up(name: &str, guest: &Guest, clock: &Clock) -> Result<(), RackError> {
    let bmc = guest.power();
    let up = Regex::new(r"^rackproof-os \S+: up$").expect("a valid pattern");
    let started = Regex::new(r"^rackproof-os \S+: init started").expect("a valid pattern");
    let mark = guest.mark();
    let state = bmc
        .power_state()
        .await
        .map_err(|source| RackError::PowerState {
            node: name.to_owned(),
            source,
        })?;
    let action = match state {
        PowerState::On => {
            let lines = guest.lines();
            if lines
                .iter()
                .rev()
                .find(|l| up.is_match(l) || started.is_match(l))
                .is_some_and(|l| up.is_match(l))
            {
                return Ok(());
            }
            ResetAction::ForceRestart
        }
        _ => ResetAction::On,
    };
    tracing::info!(node = name, %action, "bringing the rack server up to deliver its identity");
    bmc.reset(action).await.map_err(|source| RackError::Reset {
        node: name.to_owned(),
        action,
        source,
    })?;
    guest
        .wait_line_since(clock, mark, &up, BOOT_DEADLINE)
        .await?;
    Ok(())
}

/// Steps 1–3 of the module docs for one server.
pub(crate) async fn provision(
    server: &RackServer,
    guest: &Guest,
    identity: &NodeIdentity,
    version: &str,
    clock: &Clock,
) -> Result<(), RackError> {
    let name = server.description.name.as_str();
    ensure_up(name, guest, clock).await?;
    let delivered = physical::deliver_identity(&server.description, identity, clock).await?;
    if delivered.version != version {
        return Err(RackError::WrongVersion {
            node: name.to_owned(),
            runs: delivered.version,
            wanted: version.to_owned(),
        });
    }
    shut_down(name, server, clock).await
}

/// An ACPI shutdown through the BMC; a forced power-off when the OS does not finish in time.
async fn shut_down(name: &str, server: &RackServer, clock: &Clock) -> Result<(), RackError> {
    let fail = |action: ResetAction| {
        move |source| RackError::Reset {
            node: name.to_owned(),
            action,
            source,
        }
    };
    server
        .bmc
        .reset(ResetAction::GracefulShutdown)
        .await
        .map_err(fail(ResetAction::GracefulShutdown))?;
    if wait_off(server, clock, SHUTDOWN_GRACE).await {
        return Ok(());
    }
    tracing::warn!(
        node = name,
        "still on {SHUTDOWN_GRACE:?} after an ACPI shutdown; forcing it off"
    );
    server
        .bmc
        .reset(ResetAction::ForceOff)
        .await
        .map_err(fail(ResetAction::ForceOff))?;
    if wait_off(server, clock, FORCE_OFF_GRACE).await {
        return Ok(());
    }
    Err(RackError::StillOn {
        node: name.to_owned(),
    })
}

async fn wait_off(server: &RackServer, clock: &Clock, within: Duration) -> bool {
    let deadline = clock.instant() + within;
    while clock.instant() < deadline {
        if matches!(server.bmc.power_state().await, Ok(PowerState::Off)) {
            return true;
        }
        clock.sleep(Duration::from_secs(1)).await;
    }
    false
}
