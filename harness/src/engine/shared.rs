//! What the tasks of one run share: the judge (world, timeline, verdicts), the clock and the
//! start time, and a change counter that wakes everyone waiting for a condition.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use rackproof_clock::Clock;
use rackproof_std::LockExt;
use tokio::sync::watch;

use crate::engine::credentials::Credentials;
use crate::engine::judge::Judge;
use crate::engine::judge::observe::Observation;
use crate::engine::judge::timeline::EntryKind;

/// A handle on the run's shared state. Clones share it.
#[derive(Debug, Clone)]
pub struct Shared {
    judge: Arc<Mutex<Judge>>,
    clock: Clock,
    start: Timestamp,
    changes: Arc<watch::Sender<u64>>,
    /// The credentials the lab made, for the run's result.
    credentials: Arc<Mutex<Credentials>>,
}

impl Shared {
    /// Shares `judge`; the run starts now.
    pub fn new(judge: Judge, clock: Clock) -> Self {
        let start = clock.now();
        let (changes, _) = watch::channel(0);
        Self {
            judge: Arc::new(Mutex::new(judge)),
            clock,
            start,
            changes: Arc::new(changes),
            credentials: Arc::default(),
        }
    }

    /// Keeps credentials the run made (so its artifacts can be checked for them).
    pub fn keep_credentials(&self, values: impl IntoIterator<Item = String>) {
        self.credentials.locked().extend(values);
    }

    /// The credentials kept so far.
    pub fn credentials(&self) -> Credentials {
        self.credentials.locked().clone()
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Time since the run started (virtual on `sim`).
    pub fn elapsed(&self) -> Duration {
        let now = self.clock.now();
        now.duration_since(self.start).unsigned_abs()
    }

    /// The judge, locked. Never held across an `.await`.
    pub fn judge(&self) -> MutexGuard<'_, Judge> {
        self.judge.locked()
    }

    /// Records a timeline entry now.
    pub fn record(&self, node: Option<&str>, kind: EntryKind, text: impl Into<String>) {
        let text = text.into();
        tracing::info!(node = node.unwrap_or("-"), kind = ?kind, "{text}");
        let at = self.elapsed();
        self.judge().timeline.push(at, node, kind, text);
        self.notify();
    }

    /// Applies an observation and wakes the waiters.
    pub fn observe(&self, observation: Observation) {
        let at = self.elapsed();
        let now = self.clock.now();
        let mut judge = self.judge();
        judge.world.now = Some(now);
        judge.observe(observation, at);
        drop(judge);
        self.notify();
    }

    /// Records when `node`'s Lease expires (`None`: it has none any more). Wakes nobody: no
    /// condition or expectation reads Leases, only the judge's availability (`World::down`).
    pub fn lease(&self, node: String, expiry: Option<Timestamp>) {
        self.judge().lease(node, expiry);
    }

    /// Re-evaluates the expectations as time passes.
    pub fn tick(&self) {
        let at = self.elapsed();
        self.judge().judge_expectations(at);
    }

    /// Prints every timeline entry as it is recorded (the live progress display), until `done`
    /// fires; then prints the rest and returns.
    pub async fn print_progress(self, mut done: tokio::sync::oneshot::Receiver<()>) {
        let mut changes = self.changes.subscribe();
        let mut printed = 0;
        loop {
            let new: Vec<String> = self
                .judge()
                .timeline
                .entries
                .iter()
                .skip(printed)
                .map(ToString::to_string)
                .collect();
            printed += new.len();
            for line in new {
                println!("{line}");
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = &mut done => {
                    for line in self.judge().timeline.entries.iter().skip(printed) {
                        println!("{line}");
                    }
                    return;
                }
            }
        }
    }

    fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Waits until `check` holds on the judge, at most `within`. Returns whether it held.
    pub async fn wait_until(&self, within: Duration, check: impl Fn(&Judge) -> bool) -> bool {
        let mut changes = self.changes.subscribe();
        let waiting = async {
            loop {
                if check(&self.judge()) {
                    return;
                }
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        self.clock.timeout(within, waiting).await.is_ok()
    }
}
