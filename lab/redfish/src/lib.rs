//! Redfish BMC client and emulator.
