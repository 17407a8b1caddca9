//! Strategies: idempotent procedures over a node's [`Power`] driver and its console
//! ([`ConsoleSource`]), with deadlines on the [`Clock`], so they work for every backend.
//!
//! 1. [`NodeControl::power_on_and_wait_until_up`]: already up → returns at once; on but booting →
//!    waits; off → powers on, and if the BMC accepted the request but the machine stays off (a
//!    known vendor quirk), asks again, up to `power_on_attempts` times.
//!    The power-on itself is [`power_on`], which backends without a console of their own here
//!    (the image lab's guests and rack servers) call directly.
//! 2. [`NodeControl::power_cycle_and_wait_for_boot`]: power-cycles (or powers on, when off) and
//!    waits until the Nth boot after that reaches the wanted stage, returning every boot seen.

use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::{Clock, format_duration};
use rackproof_driver::{DriverError, Power, PowerState, ResetAction};
use tokio::sync::broadcast;

use crate::console::{BootEvent, BootObservation, BootTracker, ConsoleLine, ConsoleSource};

/// How long to wait for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    /// Overall limit for the whole strategy.
    pub deadline: Duration,
    /// After a power-on request, how long the machine may take to report `On`.
    pub power_on_grace: Duration,
    /// Power-on requests before giving up.
    pub power_on_attempts: u32,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(600),
            power_on_grace: Duration::from_secs(10),
            power_on_attempts: 3,
        }
    }
}

/// How far the awaited boot must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootStage {
    /// The firmware started it.
    Started,
    /// The loader selected an entry.
    EntrySelected,
    /// The OS reported it is up.
    Up,
}

/// A strategy that could not reach its goal.
#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    #[error("node {node}: {action}")]
    Driver {
        node: String,
        action: String,
        #[source]
        source: DriverError,
    },
    #[error("node {node}: stayed off after {attempts} power-on requests")]
    PowerOnIgnored { node: String, attempts: u32 },
    #[error("node {node}: {what} did not happen within {after} ({boots} boots seen)")]
    Timeout {
        node: String,
        what: String,
        after: String,
        boots: usize,
    },
    #[error("node {node}: console closed")]
    ConsoleClosed { node: String },
}

/// The drivers of one node, plus its clock: what strategies act through.
#[derive(Debug, Clone)]
pub struct NodeControl {
    pub node: String,
    pub power: Arc<dyn Power>,
    pub console: Arc<dyn ConsoleSource>,
    pub clock: Clock,
}

impl NodeControl {
    pub fn new(
        node: impl Into<String>,
        power: Arc<dyn Power>,
        console: Arc<dyn ConsoleSource>,
        clock: Clock,
    ) -> Self {
        Self {
            node: node.into(),
            power,
            console,
            clock,
        }
    }

    fn driver(&self, action: &str) -> impl FnOnce(DriverError) -> StrategyError + '_ {
        let action = action.to_owned();
        move |source| StrategyError::Driver {
            node: self.node.clone(),
            action,
            source,
        }
    }

    /// Makes sure the machine is on, asking again if a power-on request is silently ignored.
    async fn ensure_on(&self, options: &WaitOptions) -> Result<(), StrategyError> {
        power_on(&self.node, &*self.power, &self.clock, options, |attempt| {
            tracing::warn!(node = %self.node, attempt, "power-on request had no effect, asking again");
        })
        .await
    }

    /// Powers the node on if needed and waits until its OS reports it is up; returns the version.
    pub async fn power_on_and_wait_until_up(
        &self,
        options: WaitOptions,
    ) -> Result<String, StrategyError> {
        let (backlog, mut rx) = self.console.subscribe();
        let mut tracker = BootTracker::new();
        for line in &backlog {
            tracker.feed(&line.text);
        }
        let on = self
            .power
            .power_state()
            .await
            .map_err(self.driver("read power state"))?
            == PowerState::On;
        if on && let Some(up) = tracker.up_now() {
            return Ok(up.to_owned());
        }
        let work = async {
            if !on {
                self.ensure_on(&options).await?;
            }
            loop {
                let line = self.next_line(&mut rx).await?;
                if let Some(BootEvent::OsUp(v)) = tracker.feed(&line.text) {
                    return Ok(v);
                }
            }
        };
        match self.clock.timeout(options.deadline, work).await {
            Ok(result) => result,
            Err(_) => Err(self.timeout("the OS coming up", options.deadline, &tracker)),
        }
    }

    /// Power-cycles the node (or powers it on if off) and waits until the `n`th boot after that
    /// (1 = the first) reaches `stage`. Returns the boots seen, in order.
    pub async fn power_cycle_and_wait_for_boot(
        &self,
        n: usize,
        stage: BootStage,
        options: WaitOptions,
    ) -> Result<Vec<BootObservation>, StrategyError> {
        let (_backlog, mut rx) = self.console.subscribe();
        let mut tracker = BootTracker::new();
        let reached = |t: &BootTracker| {
            t.boots()
                .get(n.saturating_sub(1))
                .is_some_and(|b| match stage {
                    BootStage::Started => true,
                    BootStage::EntrySelected => b.entry.is_some(),
                    BootStage::Up => b.up.is_some(),
                })
        };
        let work = async {
            if self
                .power
                .power_state()
                .await
                .map_err(self.driver("read power state"))?
                == PowerState::Off
            {
                self.ensure_on(&options).await?;
            } else {
                self.power
                    .reset(ResetAction::PowerCycle)
                    .await
                    .map_err(self.driver("power-cycle"))?;
            }
            while !reached(&tracker) {
                let line = self.next_line(&mut rx).await?;
                tracker.feed(&line.text);
            }
            Ok(tracker.boots().to_vec())
        };
        match self.clock.timeout(options.deadline, work).await {
            Ok(result) => result,
            Err(_) => Err(self.timeout(
                &format!("boot {n} reaching {stage:?}"),
                options.deadline,
                &tracker,
            )),
        }
    }

    async fn next_line(
        &self,
        rx: &mut broadcast::Receiver<ConsoleLine>,
    ) -> Result<ConsoleLine, StrategyError> {
        loop {
            match rx.recv().await {
                Ok(line) => return Ok(line),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(node = %self.node, missed, "console lines missed");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(StrategyError::ConsoleClosed {
                        node: self.node.clone(),
                    });
                }
            }
        }
    }

    fn timeout(&self, what: &str, after: Duration, tracker: &BootTracker) -> StrategyError {
        StrategyError::Timeout {
            node: self.node.clone(),
            what: what.to_owned(),
            after: format_duration(after),
            boots: tracker.boots().len(),
        }
    }
}

/// Powers `node` on through `power` and waits until it is no longer off. Already on: returns at
/// once. A request the BMC accepted while the machine stayed off for `options.power_on_grace` (a
/// known vendor quirk) is repeated, up to `options.power_on_attempts` requests in all;
/// `before_retry(n)` is told before the n-th repetition. Every backend powers nodes on through
/// this one procedure.
pub async fn power_on(
    node: &str,
    power: &dyn Power,
    clock: &Clock,
    options: &WaitOptions,
    mut before_retry: impl FnMut(u32),
) -> Result<(), StrategyError> {
    let driver = |action: &str| {
        let action = action.to_owned();
        move |source| StrategyError::Driver {
            node: node.to_owned(),
            action,
            source,
        }
    };
    let attempts = options.power_on_attempts.max(1);
    for attempt in 1..=attempts {
        if power
            .power_state()
            .await
            .map_err(driver("read power state"))?
            == PowerState::On
        {
            return Ok(());
        }
        if attempt > 1 {
            before_retry(attempt - 1);
        }
        power
            .reset(ResetAction::On)
            .await
            .map_err(driver("power on"))?;
        let start = clock.instant();
        while clock.since(start) < options.power_on_grace {
            if power
                .power_state()
                .await
                .map_err(driver("read power state"))?
                != PowerState::Off
            {
                return Ok(());
            }
            clock.sleep(Duration::from_secs(1)).await;
        }
    }
    Err(StrategyError::PowerOnIgnored {
        node: node.to_owned(),
        attempts,
    })
}
