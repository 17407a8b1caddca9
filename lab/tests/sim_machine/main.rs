//! The simulated machine in virtual time: boots, boot counting with fallback, hangs, power cuts
//! during a slot install, every reset action, faults, and the guest started and stopped with power.

mod boots;
mod lifecycle;
mod power;
mod resets;
mod support;
