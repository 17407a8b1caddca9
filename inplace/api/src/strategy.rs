//! Update strategies of a worker pool and how they map onto the MachineDeployment.
//!
//! | pool `updateStrategy` | MachineDeployment `strategy.type` | `inPlaceUpdate.orchestrationType` |
//! |---|---|---|
//! | `AutoRollingUpdate` (the default) | `RollingUpdate` | — |
//! | `AutoInPlaceUpdate` | `InPlaceUpdate` | `Auto` |
//! | `ManualInPlaceUpdate` | `InPlaceUpdate` | `Manual` |
//!
//! Switching between rolling and in-place is refused by validation; switching between the two
//! in-place strategies is allowed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a worker pool's nodes receive updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum UpdateStrategy {
    /// Replace machines (MCM's rolling update). The default.
    #[default]
    AutoRollingUpdate,
    /// Update machines in place; the orchestrator selects nodes within `maxUnavailable`.
    AutoInPlaceUpdate,
    /// Update machines in place; a person selects nodes by labelling them `selected-for-update`.
    ManualInPlaceUpdate,
}

impl UpdateStrategy {
    /// Whether machines are kept and updated where they stand.
    pub fn is_in_place(self) -> bool {
        matches!(self, Self::AutoInPlaceUpdate | Self::ManualInPlaceUpdate)
    }

    /// The MachineDeployment orchestration type, for in-place strategies.
    pub fn orchestration_type(self) -> Option<OrchestrationType> {
        match self {
            Self::AutoRollingUpdate => None,
            Self::AutoInPlaceUpdate => Some(OrchestrationType::Auto),
            Self::ManualInPlaceUpdate => Some(OrchestrationType::Manual),
        }
    }

    /// Whether a pool may change from `self` to `to`: only within the same family.
    pub fn may_switch_to(self, to: UpdateStrategy) -> bool {
        self.is_in_place() == to.is_in_place()
    }

    /// The name as written in the pool spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AutoRollingUpdate => "AutoRollingUpdate",
            Self::AutoInPlaceUpdate => "AutoInPlaceUpdate",
            Self::ManualInPlaceUpdate => "ManualInPlaceUpdate",
        }
    }
}

impl std::fmt::Display for UpdateStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// MCM's `strategy.inPlaceUpdate.orchestrationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum OrchestrationType {
    /// MCM selects machines within `maxUnavailable`.
    Auto,
    /// A person selects machines.
    Manual,
}

impl OrchestrationType {
    /// The pool strategy that produces this orchestration type.
    pub fn update_strategy(self) -> UpdateStrategy {
        match self {
            Self::Auto => UpdateStrategy::AutoInPlaceUpdate,
            Self::Manual => UpdateStrategy::ManualInPlaceUpdate,
        }
    }
}

/// Resolves `maxSurge` / `maxUnavailable` against `total` machines, as MCM does: a number is
/// taken as is, a percentage is scaled and rounded up (`round_up`, for `maxSurge`) or down (for
/// `maxUnavailable`). `None` when the value is negative or not a percentage like `25%`.
pub fn scaled_int_or_percent(
    value: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    total: i32,
    round_up: bool,
) -> Option<i32> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match value {
        IntOrString::Int(n) => (*n >= 0).then_some(*n),
        IntOrString::String(text) => {
            let percent: i64 = parse_percent(text)?;
            let scaled = i64::from(total.max(0)) * percent;
            let result = if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            };
            i32::try_from(result).ok()
        }
    }
}

/// The number in `N%`, if `text` is one.
pub(crate) fn parse_percent(text: &str) -> Option<i64> {
    let digits = text.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    #[test]
    fn percentages_scale_with_mcm_rounding() {
        let pct = |s: &str| IntOrString::String(s.to_owned());
        assert_eq!(scaled_int_or_percent(&pct("30%"), 5, false), Some(1));
        assert_eq!(scaled_int_or_percent(&pct("30%"), 5, true), Some(2));
        assert_eq!(
            scaled_int_or_percent(&IntOrString::Int(2), 5, false),
            Some(2)
        );
        assert_eq!(scaled_int_or_percent(&pct("100%"), 3, false), Some(3));
        assert_eq!(scaled_int_or_percent(&IntOrString::Int(-1), 5, false), None);
        for bad in ["%", "30", "3.5%", "-1%", "x%"] {
            assert_eq!(scaled_int_or_percent(&pct(bad), 5, false), None, "{bad}");
        }
    }

    #[test]
    fn strategy_serde_names_are_gardener_names() {
        for (strategy, wire) in [
            (UpdateStrategy::AutoRollingUpdate, "\"AutoRollingUpdate\""),
            (UpdateStrategy::AutoInPlaceUpdate, "\"AutoInPlaceUpdate\""),
            (
                UpdateStrategy::ManualInPlaceUpdate,
                "\"ManualInPlaceUpdate\"",
            ),
        ] {
            assert_eq!(serde_json::to_string(&strategy).unwrap(), wire);
            assert_eq!(
                serde_json::from_str::<UpdateStrategy>(wire).unwrap(),
                strategy
            );
            assert_eq!(format!("\"{strategy}\""), wire);
        }
        assert!(serde_json::from_str::<UpdateStrategy>("\"InPlace\"").is_err());
        assert_eq!(UpdateStrategy::default(), UpdateStrategy::AutoRollingUpdate);
    }

    #[test]
    fn only_in_place_strategies_are_in_place() {
        assert!(!UpdateStrategy::AutoRollingUpdate.is_in_place());
        assert!(UpdateStrategy::AutoInPlaceUpdate.is_in_place());
        assert!(UpdateStrategy::ManualInPlaceUpdate.is_in_place());
    }

    #[test]
    fn orchestration_type_maps_both_ways() {
        assert_eq!(UpdateStrategy::AutoRollingUpdate.orchestration_type(), None);
        assert_eq!(
            UpdateStrategy::AutoInPlaceUpdate.orchestration_type(),
            Some(OrchestrationType::Auto)
        );
        assert_eq!(
            UpdateStrategy::ManualInPlaceUpdate.orchestration_type(),
            Some(OrchestrationType::Manual)
        );
        assert_eq!(
            OrchestrationType::Manual.update_strategy(),
            UpdateStrategy::ManualInPlaceUpdate
        );
        assert_eq!(
            OrchestrationType::Auto.update_strategy(),
            UpdateStrategy::AutoInPlaceUpdate
        );
        assert_eq!(
            serde_json::to_string(&OrchestrationType::Manual).unwrap(),
            "\"Manual\""
        );
    }

    #[test]
    fn switching_is_allowed_only_within_a_family() {
        use UpdateStrategy::*;
        assert!(AutoInPlaceUpdate.may_switch_to(ManualInPlaceUpdate));
        assert!(ManualInPlaceUpdate.may_switch_to(AutoInPlaceUpdate));
        assert!(!AutoRollingUpdate.may_switch_to(AutoInPlaceUpdate));
        assert!(!ManualInPlaceUpdate.may_switch_to(AutoRollingUpdate));
    }
}
