//! QEMU machines for the lab (being built).
