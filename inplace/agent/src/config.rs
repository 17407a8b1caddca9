//! The agent's configuration (which node and pool it serves, where its OSC Secret is, the
//! timeouts and retry budget of the update steps) and the heartbeat's (the kubelet's part).

use std::collections::BTreeMap;
use std::time::Duration;

/// Everything the agent needs to know besides its platform and API client.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node's name.
    pub node_name: String,
    /// The worker pool (value of `worker.gardener.cloud/pool`).
    pub pool: String,
    /// Namespace of the pool's OSC Secret.
    pub osc_secret_namespace: String,
    /// Name of the pool's OSC Secret.
    pub osc_secret_name: String,
    /// How soon a reconcile pass that failed (or a watch that failed) is retried.
    pub poll_interval: Duration,
    /// How often the agent reconciles when nothing it watches (its Node, the OSC Secret)
    /// changed: a safety net, since every change wakes it at once.
    pub resync_interval: Duration,
    /// Limit for one run of the OS-update command.
    pub os_update_timeout: Duration,
    /// Runs of the OS-update command per attempted version before a retriable failure turns
    /// non-retriable (GEP-31: "retriable error will also get classified as non-retriable error
    /// after a certain number of retries").
    pub os_update_max_attempts: u32,
    /// Delay before the second run; doubled for each further run, capped at
    /// [`AgentConfig::os_update_max_backoff`].
    pub os_update_backoff: Duration,
    /// The longest delay between runs.
    pub os_update_max_backoff: Duration,
    /// How long the kubelet may take to become healthy after a restart.
    pub kubelet_health_timeout: Duration,
    /// How often the kubelet's health is probed meanwhile.
    pub kubelet_health_interval: Duration,
    /// Service-account token Secrets copied to files on a ServiceAccount key rotation.
    pub token_secrets: Vec<TokenSecret>,
}

impl AgentConfig {
    /// Defaults for `node` of `pool` reading `namespace/secret`.
    pub fn new(node: &str, pool: &str, namespace: &str, secret: &str) -> Self {
        Self {
            node_name: node.to_owned(),
            pool: pool.to_owned(),
            osc_secret_namespace: namespace.to_owned(),
            osc_secret_name: secret.to_owned(),
            poll_interval: Duration::from_secs(5),
            resync_interval: Duration::from_secs(60),
            os_update_timeout: Duration::from_secs(10 * 60),
            os_update_max_attempts: 5,
            os_update_backoff: Duration::from_secs(30),
            os_update_max_backoff: Duration::from_secs(5 * 60),
            kubelet_health_timeout: Duration::from_secs(5 * 60),
            kubelet_health_interval: Duration::from_secs(5),
            token_secrets: Vec::new(),
        }
    }

    /// The delay before run `attempt` (2-based) of the OS-update command.
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(2).min(16);
        self.os_update_backoff
            .saturating_mul(1 << doublings)
            .min(self.os_update_max_backoff)
    }
}

/// A token Secret synced to a file (gardener-node-agent's token controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSecret {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
    /// Data key holding the token (`token`).
    pub key: String,
    /// Absolute file path.
    pub path: String,
}

/// The settings of the heartbeat, the kubelet's part on lab nodes (kubelet defaults). It runs
/// apart from the agent: `rackproof-agent kubelet`, a simulated node's `kubelet` service.
#[derive(Debug, Clone)]
pub struct HeartbeatConfig {
    /// How often the Lease is renewed (kubelet: 10 s, a quarter of the duration).
    pub renew_interval: Duration,
    /// `leaseDurationSeconds` (kubelet: 40 s).
    pub lease_duration: Duration,
    /// How often the node status is reported when nothing in it changed (kubelet's
    /// `nodeStatusReportFrequency`: 5 min); a change is reported at the next renewal.
    pub status_report_interval: Duration,
    /// Labels put on the Node when the heartbeat registers it (the pool label is always added).
    pub labels: BTreeMap<String, String>,
    /// `nodeInfo.osImage` is this prefix, a space, and the running OS version.
    pub os_image_prefix: String,
    /// How soon a failed watch (of the Node, of its pods) is retried.
    pub retry: Duration,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            renew_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            status_report_interval: Duration::from_secs(5 * 60),
            labels: BTreeMap::new(),
            os_image_prefix: "Rackproof".to_owned(),
            retry: Duration::from_secs(5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let config = AgentConfig::new("n", "p", "kube-system", "s");
        assert_eq!(config.backoff_before(2), Duration::from_secs(30));
        assert_eq!(config.backoff_before(3), Duration::from_secs(60));
        assert_eq!(config.backoff_before(4), Duration::from_secs(120));
        assert_eq!(config.backoff_before(6), Duration::from_secs(300));
        assert_eq!(config.backoff_before(60), Duration::from_secs(300));
    }
}
