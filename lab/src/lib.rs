//! Lab controller: machines, BMC clients and emulators, consoles, SSH.
