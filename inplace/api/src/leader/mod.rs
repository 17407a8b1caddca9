//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's semantics, for the
//! components that must act alone (the orchestrator and the watchdog, as machine-controller-manager
//! and dependency-watchdog do).
//!
//! [`LeaderElection`] is the configuration (lease name and namespace, identity, the three
//! durations); [`LeaderElectArgs`] is the same as command-line flags, named as MCM names them
//! (`--leader-elect`, `--leader-elect-lease-duration`, …); [`Elector::run`] waits for the Lease,
//! runs the component's acting future while it leads, and cancels that future the moment it
//! stops leading. The protocol and its guarantee are in `docs/protocols.md` ("Leader election") and
//! in [`elector`].

mod elector;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use elector::{Elector, Lost};
use rackproof_clock::parse_duration;

/// How a component elects its leader (client-go's `LeaderElectionConfig`, MCM's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// This instance's `holderIdentity`; unique among the instances that compete for the Lease.
    pub identity: String,
    /// How long a non-leader waits, from when it last saw the Lease change, before it takes the
    /// Lease over (written as `leaseDurationSeconds`, so whole seconds). MCM: 15 s.
    pub lease_duration: Duration,
    /// How long the leader goes on acting after its last successful renewal (measured from just
    /// before that renewal was sent); shorter than `lease_duration`. MCM: 10 s.
    pub renew_deadline: Duration,
    /// Time between two attempts to acquire or renew the Lease. MCM: 2 s.
    pub retry_period: Duration,
}

/// client-go's jitter factor: the renew deadline must leave room for more than one retry.
const JITTER_FACTOR: f64 = 1.2;

impl LeaderElection {
    /// An election for the Lease `namespace`/`name` with MCM's durations (15 s, 10 s, 2 s) and
    /// [`default_identity`].
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            lease_name: name.into(),
            lease_namespace: namespace.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the settings as client-go's `NewLeaderElector` does.
    pub fn validate(&self) -> Result<(), InvalidElection> {
        let invalid = |why: String| Err(InvalidElection { why });
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return invalid("the lease name and namespace must not be empty".to_owned());
        }
        if self.identity.is_empty() {
            return invalid("the identity must not be empty".to_owned());
        }
        if self.retry_period.is_zero() {
            return invalid("the retry period must be longer than zero".to_owned());
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.as_secs() == 0 {
            return invalid(format!(
                "the lease duration must be a whole number of seconds (the Lease's \
                 leaseDurationSeconds), got {}",
                rackproof_clock::format_duration(self.lease_duration)
            ));
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return invalid("the lease duration is too long".to_owned());
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid(format!(
                "the lease duration ({}) must be longer than the renew deadline ({})",
                rackproof_clock::format_duration(self.lease_duration),
                rackproof_clock::format_duration(self.renew_deadline)
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return invalid(format!(
                "the renew deadline ({}) must be longer than {JITTER_FACTOR} × the retry period ({})",
                rackproof_clock::format_duration(self.renew_deadline),
                rackproof_clock::format_duration(self.retry_period)
            ));
        }
        Ok(())
    }
}

/// An unusable [`LeaderElection`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid leader election settings: {why}")]
pub struct InvalidElection {
    /// What is wrong and how to fix it.
    pub why: String,
}

static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// `HOSTNAME_PID` for the first election of a process, `HOSTNAME_PID_N` for the N-th after it, so
/// instances in one process (the harness runs several builtin) never share an identity.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned());
    let pid = std::process::id();
    match INSTANCES.fetch_add(1, Ordering::Relaxed) {
        0 => format!("{host}_{pid}"),
        n => format!("{host}_{pid}_{n}"),
    }
}

/// The leader-election flags of a component's program, named as machine-controller-manager names
/// them; each also reads a `RACKPROOF_LEADER_ELECT*` variable (how a Rackproof run hands them over).
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderElectArgs {
    /// Hold a coordination.k8s.io Lease before acting, so that of several instances only one acts
    /// (`--leader-elect` or `--leader-elect=true`; default false: a single instance acts at once).
    #[arg(
        long = "leader-elect",
        env = "RACKPROOF_LEADER_ELECT",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub leader_elect: bool,
    /// How long a non-leader waits after it last saw the Lease change before taking it over
    /// (whole seconds).
    #[arg(long = "leader-elect-lease-duration", env = "RACKPROOF_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader goes on acting without a successful renewal.
    #[arg(long = "leader-elect-renew-deadline", env = "RACKPROOF_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew the Lease.
    #[arg(long = "leader-elect-retry-period", env = "RACKPROOF_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// Name of the Lease (default: the component's own, e.g. `machine-controller-manager`).
    #[arg(
        long = "leader-elect-resource-name",
        env = "RACKPROOF_LEADER_ELECT_RESOURCE_NAME"
    )]
    pub resource_name: Option<String>,
    /// Namespace of the Lease (default: the component's `--namespace`).
    #[arg(
        long = "leader-elect-resource-namespace",
        env = "RACKPROOF_LEADER_ELECT_RESOURCE_NAMESPACE"
    )]
    pub resource_namespace: Option<String>,
    /// This instance's holder identity (default: HOSTNAME_PID).
    #[arg(
        long = "leader-elect-identity",
        env = "RACKPROOF_LEADER_ELECT_IDENTITY"
    )]
    pub identity: Option<String>,
}

impl LeaderElectArgs {
    /// The election these flags ask for (`None` without `--leader-elect`), with `name` and
    /// `namespace` as the Lease's when the flags name none.
    pub fn election(&self, name: &str, namespace: &str) -> Option<LeaderElection> {
        if !self.leader_elect {
            return None;
        }
        let mut election = LeaderElection::new(
            self.resource_name.as_deref().unwrap_or(name),
            self.resource_namespace.as_deref().unwrap_or(namespace),
        );
        if let Some(identity) = &self.identity {
            election.identity.clone_from(identity);
        }
        election.lease_duration = self.lease_duration;
        election.renew_deadline = self.renew_deadline;
        election.retry_period = self.retry_period;
        Some(election)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Program {
        #[command(flatten)]
        election: LeaderElectArgs,
    }

    #[test]
    fn defaults_are_mcm_s_and_valid() {
        let election = LeaderElection::new("machine-controller-manager", "shoot");
        assert_eq!(election.lease_duration, Duration::from_secs(15));
        assert_eq!(election.renew_deadline, Duration::from_secs(10));
        assert_eq!(election.retry_period, Duration::from_secs(2));
        assert_eq!(election.validate(), Ok(()));
    }

    #[test]
    fn identities_in_one_process_differ() {
        assert_ne!(default_identity(), default_identity());
    }

    #[test]
    fn client_go_s_rules_refuse_unsafe_durations() {
        let mut election = LeaderElection::new("l", "ns");
        election.renew_deadline = Duration::from_secs(15);
        let error = election.validate().unwrap_err();
        assert!(
            error.why.contains("longer than the renew deadline"),
            "{error}"
        );
        let mut election = LeaderElection::new("l", "ns");
        election.retry_period = Duration::from_secs(9);
        let error = election.validate().unwrap_err();
        assert!(error.why.contains("1.2 × the retry period"), "{error}");
        let mut election = LeaderElection::new("l", "ns");
        election.lease_duration = Duration::from_millis(15_500);
        let error = election.validate().unwrap_err();
        assert!(error.why.contains("whole number of seconds"), "{error}");
        let mut election = LeaderElection::new("l", "ns");
        election.identity.clear();
        assert!(election.validate().is_err());
    }

    #[test]
    fn flags_read_as_mcm_writes_them() {
        let off = Program::try_parse_from(["p"]).unwrap();
        assert_eq!(off.election.election("mcm", "ns"), None);
        let on = Program::try_parse_from([
            "p",
            "--leader-elect",
            "--leader-elect-lease-duration=20s",
            "--leader-elect-renew-deadline",
            "12s",
            "--leader-elect-retry-period=3s",
            "--leader-elect-resource-name=lock",
            "--leader-elect-resource-namespace=kube-system",
            "--leader-elect-identity=pod-a",
        ])
        .unwrap();
        let election = on.election.election("mcm", "ns").unwrap();
        assert_eq!(
            election,
            LeaderElection {
                lease_name: "lock".into(),
                lease_namespace: "kube-system".into(),
                identity: "pod-a".into(),
                lease_duration: Duration::from_secs(20),
                renew_deadline: Duration::from_secs(12),
                retry_period: Duration::from_secs(3),
            }
        );
        let explicit = Program::try_parse_from(["p", "--leader-elect=true"]).unwrap();
        let election = explicit.election.election("mcm", "ns").unwrap();
        assert_eq!(
            (
                election.lease_name.as_str(),
                election.lease_namespace.as_str()
            ),
            ("mcm", "ns")
        );
        let disabled = Program::try_parse_from(["p", "--leader-elect=false"]).unwrap();
        assert_eq!(disabled.election.election("mcm", "ns"), None);
    }
}
