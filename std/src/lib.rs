//! Small additions to the standard library that every Rackproof crate uses, kept in one place so
//! each behaves the same everywhere: [`error_chain`] prints an error with its sources on one line,
//! [`LockExt`] locks a [`std::sync::Mutex`] whether or not a panicking holder poisoned it, and
//! [`free_tcp_port`] and [`free_udp_port`] find a free port on 127.0.0.1.
//!
//! The crate depends on nothing but `std`: the node agent and the QEMU helper binaries are built
//! alone, statically, and pull it in.

mod error;
mod lock;
mod net;

pub use error::error_chain;
pub use lock::LockExt;
pub use net::{free_tcp_port, free_udp_port};
