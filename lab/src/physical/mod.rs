//! The `physical` backend: rack nodes from an inventory file, driven through their real BMCs.
//!
//! - [`InventoryFile`]: the YAML inventory (BMC kind, endpoint and credentials reference; SSH
//!   host, user, key and pinned host key; console; disks), with errors at `file:line:column`, and
//!   node lookup that refuses unlisted names with a "did you mean".
//! - [`Reservation`]: an exclusive per-node lock file, so two runs never drive the same node.
//! - [`deliver_identity`]: a run's node identity written over SSH to the node's state partition.
//! - [`StreamConsole`]: a node's console from a file or a TCP socket, as a
//!   [`crate::console::ConsoleSource`] the strategies watch.
//!
//! Power and boot control go through [`crate::bmc`], the same clients the emulated backends use;
//! the [`crate::commands`] module puts these together (with dry-run).

mod console;
mod identity;
mod inventory;
mod reservation;

pub use self::console::{ConsoleError, StreamConsole};
pub use self::identity::{Delivered, DeliveryError, IDENTITY_PATH, deliver_identity, ssh_target};
pub use self::inventory::{InventoryError, InventoryFile, UnknownNode};
pub use self::reservation::{Holder, Reservation, ReservationError};
