//! A kubelet's node Lease decoded narrowly: its name, renew time and duration. Every kubelet
//! renews its Lease every 10 s, so whoever watches them all (the orchestrator's availability, the
//! harness's judge) decodes nothing else, managedFields least of all.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use serde::Deserialize;

/// The namespace of the kubelets' node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The duration of a node Lease that states none (the kubelet's default).
const DEFAULT_DURATION_SECONDS: i32 = 40;

/// A node Lease: its metadata (without managedFields) and what its holder renews.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeLease {
    #[serde(deserialize_with = "crate::unmanaged::metadata")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<NodeLeaseSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeLeaseSpec {
    #[serde(default)]
    renew_time: Option<MicroTime>,
    #[serde(default)]
    lease_duration_seconds: Option<i32>,
}

impl NodeLease {
    /// A Lease for node `name`, renewed at `renewed` (none: never), for tests and stand-ins.
    pub fn new(name: &str, renewed: Option<Timestamp>, duration_seconds: Option<i32>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeLeaseSpec {
                renew_time: renewed.map(MicroTime),
                lease_duration_seconds: duration_seconds,
            }),
        }
    }

    /// The node's name (the Lease's).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// When it was last renewed (`None`: never).
    pub fn renewed(&self) -> Option<Timestamp> {
        self.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
    }

    /// When it expires: renew time plus duration (40 s when unstated); a Lease never renewed
    /// expired at once (the epoch).
    pub fn expiry(&self) -> Timestamp {
        let Some(renewed) = self.renewed() else {
            return Timestamp::UNIX_EPOCH;
        };
        let seconds = self
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(DEFAULT_DURATION_SECONDS);
        renewed
            .checked_add(std::time::Duration::from_secs(
                u64::try_from(seconds).unwrap_or(0),
            ))
            .unwrap_or(Timestamp::MAX)
    }
}

impl k8s_openapi::Resource for NodeLease {
    const API_VERSION: &'static str = <Lease as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Lease as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Lease as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Lease as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Lease as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Lease as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for NodeLease {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_renewal_plus_duration_and_at_once_without_a_renewal() {
        let at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = NodeLease::new("n", Some(at), Some(15));
        assert_eq!(lease.expiry(), "2026-01-01T00:00:15Z".parse().unwrap());
        let default = NodeLease::new("n", Some(at), None);
        assert_eq!(default.expiry(), "2026-01-01T00:00:40Z".parse().unwrap());
        assert_eq!(
            NodeLease::new("n", None, None).expiry(),
            Timestamp::UNIX_EPOCH
        );
    }
}
