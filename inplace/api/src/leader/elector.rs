//! The elector: client-go's acquire-or-renew on a Lease, and a fence that cancels the acting
//! future at the moment leadership can no longer be assumed.
//!
//! # One attempt (client-go's `tryAcquireOrRenew`)
//!
//! 1. Read the Lease; if there is none, create it with this instance as holder.
//! 2. If its spec differs from the one last seen, remember it and the local instant now: the
//!    *observed time*. Expiry is judged from this instant on this instance's own monotonic clock,
//!    never from the `renewTime` another instance wrote, so clocks need not agree between
//!    instances (only run at the same rate).
//! 3. Another holder whose record was observed less than its `leaseDurationSeconds` ago: not
//!    ours. Otherwise (ours, released, or lapsed) replace it carrying the resourceVersion read,
//!    holder = us, `renewTime` = now; `acquireTime` and `leaseTransitions` kept when it was ours,
//!    else `acquireTime` = now and `leaseTransitions` + 1. A conflict means another instance
//!    wrote first: this attempt failed.
//!
//! # While leading
//!
//! Leadership is valid until the instant taken just *before* the last successful renewal was
//! sent, plus the renew deadline. The fence sleeps until that instant and is re-armed by each
//! renewal; the renewal loop tries every retry period, and ends leadership at once when it finds
//! another holder in the Lease. Either ends the `select` that runs the acting future, which drops
//! it: the component makes no request after that point.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use rackproof_clock::{Clock, format_duration};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{InvalidElection, LeaderElection};

/// Why a leader stopped acting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// No renewal succeeded within the renew deadline.
    RenewDeadline,
    /// The Lease names another holder.
    Taken {
        /// The holder found.
        holder: String,
    },
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RenewDeadline => f.write_str("no renewal succeeded within the renew deadline"),
            Self::Taken { holder } => write!(f, "the lease is held by {holder}"),
        }
    }
}

/// What one attempt found.
enum Attempt {
    /// This instance holds the Lease (acquired or renewed).
    Leading,
    /// Another instance holds it; it lapses in this long unless renewed.
    HeldBy { holder: String, lapses_in: Duration },
    /// The API refused or failed; try again after the retry period.
    Failed(kube::Error),
}

/// The Lease spec last seen and the local instant it was first seen.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// Competes for one Lease on behalf of one component instance.
pub struct Elector {
    api: Api<Lease>,
    clock: Clock,
    config: LeaderElection,
    component: &'static str,
    observed: Option<Observed>,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("component", &self.component)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Elector {
    /// An elector for `component` (named in logs) with `config`, checked.
    pub fn new(
        client: Client,
        clock: Clock,
        config: LeaderElection,
        component: &'static str,
    ) -> Result<Self, InvalidElection> {
        config.validate()?;
        Ok(Self {
            api: Api::namespaced(client, &config.lease_namespace),
            clock,
            config,
            component,
            observed: None,
        })
    }

    /// Runs `act()` whenever this instance leads, until `act()` returns (then returns too).
    /// Waits while another instance leads; cancels (drops) the running `act()` the moment
    /// leadership ends, then competes again, and calls `act()` afresh when it leads again — so
    /// each term starts from what the API says, not from what a deposed term remembered.
    pub async fn run<F, Fut>(mut self, mut act: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            let valid_until = self.acquire().await;
            tracing::info!(
                component = self.component,
                lease = %self.lease(),
                identity = %self.config.identity,
                "acquired the leader lease: acting"
            );
            let (renewed, valid) = watch::channel(valid_until);
            let clock = self.clock.clone();
            // Biased: the fence is polled before the acting future every time either wakes, so
            // the acting future never runs past the moment leadership ended.
            let lost = tokio::select! {
                biased;
                () = fence(&clock, valid) => Lost::RenewDeadline,
                lost = self.keep(&renewed) => lost,
                () = act() => return,
            };
            tracing::warn!(
                component = self.component,
                lease = %self.lease(),
                identity = %self.config.identity,
                why = %lost,
                "lost the leader lease: stopped acting"
            );
        }
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.config.lease_namespace, self.config.lease_name)
    }

    /// Tries every retry period until this instance holds the Lease; returns until when its
    /// leadership is valid. Logs the holder it waits for whenever that changes.
    async fn acquire(&mut self) -> Instant {
        let mut waiting_for: Option<String> = None;
        loop {
            let start = self.clock.instant();
            match self.try_acquire_or_renew().await {
                Attempt::Leading => return start + self.config.renew_deadline,
                Attempt::HeldBy { holder, lapses_in } => {
                    if waiting_for.as_ref() != Some(&holder) {
                        tracing::info!(
                            component = self.component,
                            lease = %self.lease(),
                            identity = %self.config.identity,
                            holder = %holder,
                            lapses_in = %format_duration(lapses_in),
                            "waiting for the leader lease held by {holder}"
                        );
                        waiting_for = Some(holder);
                    }
                }
                Attempt::Failed(error) => {
                    tracing::warn!(
                        component = self.component,
                        lease = %self.lease(),
                        error = %error,
                        "failed to acquire the leader lease; retrying"
                    );
                }
            }
            self.clock.sleep(self.config.retry_period).await;
        }
    }

    /// Renews every retry period, moving the fence's deadline on each success; returns when the
    /// Lease names another holder.
    async fn keep(&mut self, renewed: &watch::Sender<Instant>) -> Lost {
        loop {
            self.clock.sleep(self.config.retry_period).await;
            let start = self.clock.instant();
            match self.try_acquire_or_renew().await {
                Attempt::Leading => {
                    renewed.send_replace(start + self.config.renew_deadline);
                }
                Attempt::HeldBy { holder, .. } => return Lost::Taken { holder },
                Attempt::Failed(error) => {
                    tracing::warn!(
                        component = self.component,
                        lease = %self.lease(),
                        error = %error,
                        "failed to renew the leader lease; retrying until the renew deadline"
                    );
                }
            }
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let now = self.clock.now();
        let seen_at = self.clock.instant();
        let name = self.config.lease_name.clone();
        let existing = match self.api.get_opt(&name).await {
            Ok(existing) => existing,
            Err(error) => return Attempt::Failed(error),
        };
        let Some(mut lease) = existing else {
            let spec = self.record(None, now);
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.config.lease_namespace.clone()),
                    ..Default::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observed = Some(Observed { spec, at: seen_at });
                    Attempt::Leading
                }
                Err(error) => Attempt::Failed(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let observed_at = match &self.observed {
            Some(observed) if observed.spec == spec => observed.at,
            _ => {
                self.observed = Some(Observed {
                    spec: spec.clone(),
                    at: seen_at,
                });
                seen_at
            }
        };
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if !holder.is_empty() && holder != self.config.identity {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            let lapses = observed_at + duration;
            if lapses > seen_at {
                return Attempt::HeldBy {
                    holder,
                    lapses_in: lapses - seen_at,
                };
            }
        }
        let record = self.record(Some(&spec), now);
        lease.spec = Some(record.clone());
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = Some(Observed {
                    spec: record,
                    at: seen_at,
                });
                Attempt::Leading
            }
            Err(error) => Attempt::Failed(error),
        }
    }

    /// The record this instance writes over `old` (none: a new Lease) at `now`.
    fn record(&self, old: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
        let ours = old.and_then(|o| o.holder_identity.as_deref()) == Some(&self.config.identity);
        let (acquired, transitions) = match old {
            None => (now, 0),
            Some(old) if ours => (
                old.acquire_time.as_ref().map_or(now, |t| t.0),
                old.lease_transitions.unwrap_or(0),
            ),
            Some(old) => (now, old.lease_transitions.unwrap_or(0).saturating_add(1)),
        };
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

/// Returns once the instant in `valid` has passed; each renewal moves it later. Every poll
/// compares the deadline with the monotonic clock first, so a task woken late (a paused process
/// resuming, a timer not yet fired) sees the deadline passed before its acting future runs.
async fn fence(clock: &Clock, valid: watch::Receiver<Instant>) {
    let deadline = valid.clone();
    let timer = std::pin::pin!(fence_timer(clock, valid));
    let mut timer = timer;
    std::future::poll_fn(|cx| {
        if *deadline.borrow() <= clock.instant() {
            return std::task::Poll::Ready(());
        }
        timer.as_mut().poll(cx)
    })
    .await;
}

/// Wakes when the instant in `valid` passes (re-armed by each change).
async fn fence_timer(clock: &Clock, mut valid: watch::Receiver<Instant>) {
    loop {
        let until = *valid.borrow_and_update();
        let left = until.saturating_duration_since(clock.instant());
        if left.is_zero() {
            return;
        }
        tokio::select! {
            biased;
            () = clock.sleep(left) => {}
            changed = valid.changed() => {
                if changed.is_err() {
                    // The renewal loop ended: leadership ends with it (the caller sees why).
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}
