//! Small additions to the standard library that every Rackproof crate uses, kept in one place so
//! each behaves the same everywhere: [`error_chain`] prints an error with its sources on one line,
//! and [`LockExt`] locks a [`std::sync::Mutex`] whether or not a panicking holder poisoned it.
//!
//! The crate depends on nothing but `std`: the node agent and the QEMU helper binaries are built
//! alone, statically, and pull it in.

mod error;
mod lock;

pub use error::error_chain;
pub use lock::LockExt;
