//! Lines of text per source (a node's console, an external component's output), each prefixed
//! with its time since the run started: what becomes `console/<node>.log` and
//! `components/<name>.log` in the artifacts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rackproof_std::LockExt;

use crate::engine::shared::Shared;

/// The lines of a run per source. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct LineLogs(Arc<Mutex<BTreeMap<String, Vec<String>>>>);

impl LineLogs {
    /// Appends `line` to `source`'s log, stamped with the run's elapsed time.
    pub fn push(&self, shared: &Shared, source: &str, line: &str) {
        let at = rackproof_clock::format_duration(shared.elapsed());
        self.0
            .locked()
            .entry(source.to_owned())
            .or_default()
            .push(format!("[{at}] {line}"));
    }

    /// Appends lines stamped elsewhere (a process's own log file) to `source`'s log.
    pub fn extend(&self, source: &str, lines: Vec<String>) {
        self.0
            .locked()
            .entry(source.to_owned())
            .or_default()
            .extend(lines);
    }

    /// Every source's lines, leaving the logs empty.
    pub fn take(&self) -> BTreeMap<String, Vec<String>> {
        std::mem::take(&mut *self.0.locked())
    }
}
