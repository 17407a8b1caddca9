//! Lab controller: machines, BMC clients and emulators, consoles, SSH.
//!
//! In labgrid's three layers: [`resource`] describes nodes as plain data; drivers act on them
//! through the `rackproof-driver` traits (implemented by [`sim::SimMachine`] here, and by the
//! Redfish/IPMI clients and other backends elsewhere); [`strategy`] composes drivers and the
//! [`console`] into idempotent procedures with deadlines.
//!
//! [`image_server`] serves slot artifacts to the nodes. [`bmc`] turns a node's BMC description into a Redfish or IPMI client (the same for emulated and
//! rack nodes), [`physical`] reads rack inventories and reserves nodes, and [`commands`] is the
//! library side of `rackproof lab` (`up`, `down`, `power`, `console`, and `bmc serve` in front of
//! sim or QEMU machines).

pub mod bmc;
pub mod commands;
pub mod console;
pub mod env;
pub mod image_server;
pub mod physical;
pub mod resource;
pub mod sim;
pub mod strategy;
