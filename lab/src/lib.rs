//! Lab controller: machines, BMC clients and emulators, consoles, SSH.
//!
//! In labgrid's three layers: [`resource`] describes nodes as plain data; drivers act on them
//! through the `rackproof-driver` traits (implemented by [`sim::SimMachine`] here, and by the
//! Redfish/IPMI clients and other backends elsewhere); [`strategy`] composes drivers and the
//! [`console`] into idempotent procedures with deadlines.

pub mod console;
pub mod resource;
pub mod sim;
pub mod strategy;
