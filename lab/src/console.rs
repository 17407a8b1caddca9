//! Console observation: lines a machine prints, who can subscribe to them, and the boot events
//! they carry. Strategies watch boots through this, so they work for any backend whose console
//! prints the same markers (the sim machine here; the node images print them too).
//!
//! The marker lines (a contract with the images):
//! - `firmware: power on` / `firmware: reset (...)` — a boot starts;
//! - `firmware: power off` / `firmware: power lost` — the machine is off;
//! - `systemd-boot: selected entry ID` — the loader picked an entry;
//! - `Kernel panic - not syncing: ...` — the kernel died;
//! - `rackproof-os VERSION: up` — the OS is up and runs VERSION.

use std::fmt;

use jiff::Timestamp;
use tokio::sync::broadcast;

/// One console line with the time it was printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleLine {
    pub at: Timestamp,
    pub text: String,
}

/// Something whose console can be watched.
pub trait ConsoleSource: Send + Sync + fmt::Debug {
    /// The lines printed since the current boot started (or since power-off), and a receiver of
    /// every later line, taken atomically so no line falls between them.
    fn subscribe(&self) -> (Vec<ConsoleLine>, broadcast::Receiver<ConsoleLine>);
}

/// What a console line says about the boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootEvent {
    /// A boot starts (power on, or a reset).
    FirmwareStart,
    /// Power went off.
    PowerOff,
    /// The loader selected this entry id.
    EntrySelected(String),
    /// The loader found nothing to boot.
    NoEntries,
    /// The kernel panicked.
    Panic,
    /// The OS is up and runs this version.
    OsUp(String),
}

impl BootEvent {
    /// The event a line carries, if any.
    pub fn parse(line: &str) -> Option<Self> {
        if line == "firmware: power on" || line.starts_with("firmware: reset") {
            return Some(Self::FirmwareStart);
        }
        if line == "firmware: power off" || line == "firmware: power lost" {
            return Some(Self::PowerOff);
        }
        if let Some(id) = line.strip_prefix("systemd-boot: selected entry ") {
            return Some(Self::EntrySelected(id.trim().to_owned()));
        }
        if line.starts_with("systemd-boot: no boot entries found") {
            return Some(Self::NoEntries);
        }
        if line.starts_with("Kernel panic - not syncing") {
            return Some(Self::Panic);
        }
        let rest = line.strip_prefix("rackproof-os ")?;
        let version = rest.strip_suffix(": up")?;
        (!version.is_empty() && !version.contains(' ')).then(|| Self::OsUp(version.to_owned()))
    }
}

/// What one boot did, as seen on the console.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BootObservation {
    /// The entry id the loader selected.
    pub entry: Option<String>,
    /// The version the OS reported when it came up.
    pub up: Option<String>,
    pub panicked: bool,
    pub no_entries: bool,
}

/// Folds boot events into per-boot observations.
#[derive(Debug, Clone, Default)]
pub struct BootTracker {
    boots: Vec<BootObservation>,
    off: bool,
}

impl BootTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one line; returns the event it carried.
    pub fn feed(&mut self, line: &str) -> Option<BootEvent> {
        let event = BootEvent::parse(line)?;
        match &event {
            BootEvent::FirmwareStart => {
                self.boots.push(BootObservation::default());
                self.off = false;
            }
            BootEvent::PowerOff => self.off = true,
            BootEvent::EntrySelected(id) => {
                if let Some(b) = self.boots.last_mut() {
                    b.entry = Some(id.clone());
                }
            }
            BootEvent::NoEntries => {
                if let Some(b) = self.boots.last_mut() {
                    b.no_entries = true;
                }
            }
            BootEvent::Panic => {
                if let Some(b) = self.boots.last_mut() {
                    b.panicked = true;
                }
            }
            BootEvent::OsUp(v) => {
                if let Some(b) = self.boots.last_mut() {
                    b.up = Some(v.clone());
                }
            }
        }
        Some(event)
    }

    /// Boots seen so far, in order.
    pub fn boots(&self) -> &[BootObservation] {
        &self.boots
    }

    /// The version the current boot reported, if the OS is up now.
    pub fn up_now(&self) -> Option<&str> {
        if self.off {
            return None;
        }
        self.boots
            .last()
            .filter(|b| !b.panicked)
            .and_then(|b| b.up.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lines_parse() {
        assert_eq!(
            BootEvent::parse("firmware: power on"),
            Some(BootEvent::FirmwareStart)
        );
        assert_eq!(
            BootEvent::parse("firmware: reset (panic)"),
            Some(BootEvent::FirmwareStart)
        );
        assert_eq!(
            BootEvent::parse("systemd-boot: selected entry os-2+3.conf"),
            Some(BootEvent::EntrySelected("os-2+3.conf".into()))
        );
        assert_eq!(
            BootEvent::parse("rackproof-os 1.2.0: up"),
            Some(BootEvent::OsUp("1.2.0".into()))
        );
        assert_eq!(
            BootEvent::parse("Kernel panic - not syncing: VFS"),
            Some(BootEvent::Panic)
        );
        assert_eq!(BootEvent::parse("rackproof-os : up"), None);
        assert_eq!(BootEvent::parse("hello"), None);
    }

    #[test]
    fn tracker_follows_boots() {
        let mut t = BootTracker::new();
        for line in [
            "firmware: power on",
            "systemd-boot: selected entry a+3.conf",
            "Kernel panic - not syncing: x",
        ] {
            t.feed(line);
        }
        assert_eq!(t.up_now(), None);
        for line in [
            "firmware: reset (panic)",
            "systemd-boot: selected entry b.conf",
            "rackproof-os 1: up",
        ] {
            t.feed(line);
        }
        assert_eq!(t.up_now(), Some("1"));
        assert_eq!(t.boots().len(), 2);
        assert!(t.boots()[0].panicked);
        t.feed("firmware: power off");
        assert_eq!(t.up_now(), None);
    }
}
