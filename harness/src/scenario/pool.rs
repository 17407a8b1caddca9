//! Worker pools as a scenario writes them: `pool:` (one) or `pools:` (several), each with its
//! strategy, size, versions and timeouts, and how the lab's nodes are shared out among them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Located, Maintenance, Span, Workload};

/// The worker pool under test (the Shoot worker with its machine-controller-manager settings).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    /// The pool's name.
    #[serde(default = "default_pool_name")]
    pub name: String,
    /// `AutoInPlaceUpdate`, `ManualInPlaceUpdate` or `AutoRollingUpdate`.
    pub strategy: Located<Strategy>,
    /// Nodes that may be unavailable at once (updating plus failed). An integer or a percentage.
    #[serde(default = "default_one")]
    pub max_unavailable: Located<IntOrPercent>,
    /// New machines added during the update. An integer or a percentage. Each needs a spare lab
    /// node (see `size`).
    #[serde(default = "default_zero")]
    pub max_surge: Located<IntOrPercent>,
    /// Nodes in the pool; defaults to every lab node. Lab nodes beyond it are spares the
    /// machine provider hands out for `maxSurge` and replacements.
    #[serde(default)]
    pub size: Option<u32>,
    /// The OS version the nodes run at the start (must be one of `images`).
    pub os: Located<String>,
    /// The Kubernetes (kubelet) version at the start.
    pub kubernetes: Located<String>,
    /// The control plane's Kubernetes version; defaults to the pool's.
    #[serde(default)]
    pub control_plane: Option<Located<String>>,
    /// How long a drain may take before pods are deleted without eviction.
    #[serde(default = "default_drain_timeout")]
    pub machine_drain_timeout: Span,
    /// How long a node may take to report its update result before it is marked failed.
    #[serde(default = "default_update_timeout")]
    pub machine_in_place_update_timeout: Span,
    /// Evictions refused per pod (a disruption budget blocks them) before the drain deletes the pod.
    #[serde(default = "default_evict_retries")]
    pub max_evict_retries: u32,
    /// The daily maintenance window and what may happen in it; without it, no maintenance runs.
    #[serde(default)]
    pub maintenance: Option<Maintenance>,
    /// Pods placed on this pool's nodes alone before the steps start (besides the scenario's
    /// `workloads`, which go on every pool's nodes).
    #[serde(default)]
    pub workloads: Vec<Workload>,
}

fn default_pool_name() -> String {
    "workers".to_owned()
}

fn default_one() -> Located<IntOrPercent> {
    Located::new(IntOrPercent::Int(1))
}

fn default_zero() -> Located<IntOrPercent> {
    Located::new(IntOrPercent::Int(0))
}

fn default_drain_timeout() -> Span {
    Span(std::time::Duration::from_secs(2 * 3600))
}

fn default_update_timeout() -> Span {
    Span(std::time::Duration::from_secs(600))
}

fn default_evict_retries() -> u32 {
    10
}

/// A pool's update strategy (GEP-31).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Strategy {
    AutoRollingUpdate,
    AutoInPlaceUpdate,
    ManualInPlaceUpdate,
}

/// An absolute count or a percentage of the pool (`1`, `"25%"`), as Kubernetes' IntOrString.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    /// The absolute number for a pool of `total` nodes. Percentages round down, as
    /// `maxUnavailable` does in Kubernetes, except that the result is at least 1 when `at_least_one`.
    pub fn resolve(self, total: u32, at_least_one: bool) -> u32 {
        let n = match self {
            Self::Int(n) => n,
            Self::Percent(p) => total * p / 100,
        };
        if at_least_one { n.max(1) } else { n }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a non-negative integer or a percentage like \"25%\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                u32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom("the number is too large"))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                u32::try_from(v).map(IntOrPercent::Int).map_err(|_| {
                    E::custom("expected a non-negative integer or a percentage like \"25%\"")
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                let digits = v.strip_suffix('%').ok_or_else(|| {
                    E::custom(format!(
                        "{v:?} is neither an integer nor a percentage like \"25%\""
                    ))
                })?;
                let p: u32 = digits
                    .parse()
                    .map_err(|_| E::custom(format!("{v:?} is not a percentage like \"25%\"")))?;
                if p > 100 {
                    return Err(E::custom(format!("{v:?} is more than 100%")));
                }
                Ok(IntOrPercent::Percent(p))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Int(n) => serializer.serialize_u32(*n),
            Self::Percent(p) => serializer.serialize_str(&format!("{p}%")),
        }
    }
}

impl JsonSchema for IntOrPercent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IntOrPercent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "oneOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^[0-9]+%$" }
            ],
            "description": "A count, or a percentage of the pool like \"25%\"."
        })
    }
}
