//! IPMI over LAN (RMCP+): BMC emulator and client.
