//! Integration tests, one binary: the handler without transport, the BMC core fed datagrams,
//! the native client against the emulator, and Debian's ipmitool against the emulator.

mod bmc;
mod client;
mod common;
mod fuzz;
mod handler;
mod ipmitool;
