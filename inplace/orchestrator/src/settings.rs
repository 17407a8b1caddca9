//! The MCM settings of a machine template (`drainTimeout`, `healthTimeout`, `creationTimeout`,
//! `inPlaceUpdateTimeout`, `disableHealthTimeout`, `maxEvictRetries`, `nodeConditions`).
//!
//! As in MCM, they are not part of a template's identity: [`crate::deployment::template_hash`]
//! leaves them out, so changing a timeout starts no rollout. Instead they are copied down — from
//! the MachineDeployment into each of its MachineSets' templates, and from a MachineSet's template
//! into each of its Machines — where the Machine controller reads them.

use inplace_api::crd::MachineSpec;
use serde_json::{Value, json};

/// `spec` with the settings cleared (for hashing).
pub(crate) fn without(spec: &MachineSpec) -> MachineSpec {
    MachineSpec {
        drain_timeout: None,
        health_timeout: None,
        creation_timeout: None,
        in_place_update_timeout: None,
        disable_health_timeout: None,
        max_evict_retries: None,
        node_conditions: None,
        ..spec.clone()
    }
}

/// Whether `a` and `b` carry the same settings.
pub(crate) fn same(a: &MachineSpec, b: &MachineSpec) -> bool {
    a.drain_timeout == b.drain_timeout
        && a.health_timeout == b.health_timeout
        && a.creation_timeout == b.creation_timeout
        && a.in_place_update_timeout == b.in_place_update_timeout
        && a.disable_health_timeout == b.disable_health_timeout
        && a.max_evict_retries == b.max_evict_retries
        && a.node_conditions == b.node_conditions
}

/// Copies the settings of `from` into `to`.
pub(crate) fn copy(from: &MachineSpec, to: &mut MachineSpec) {
    to.drain_timeout = from.drain_timeout.clone();
    to.health_timeout = from.health_timeout.clone();
    to.creation_timeout = from.creation_timeout.clone();
    to.in_place_update_timeout = from.in_place_update_timeout.clone();
    to.disable_health_timeout = from.disable_health_timeout;
    to.max_evict_retries = from.max_evict_retries;
    to.node_conditions = from.node_conditions.clone();
}

/// A JSON merge patch that gives a Machine the settings of `from` (absent ones removed).
pub(crate) fn merge_patch(from: &MachineSpec) -> Value {
    json!({ "spec": {
        "drainTimeout": from.drain_timeout,
        "healthTimeout": from.health_timeout,
        "creationTimeout": from.creation_timeout,
        "inPlaceUpdateTimeout": from.in_place_update_timeout,
        "disableHealthTimeout": from.disable_health_timeout,
        "maxEvictRetries": from.max_evict_retries,
        "nodeConditions": from.node_conditions,
    } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_compared_copied_and_cleared() {
        let a = MachineSpec {
            drain_timeout: Some("2h".into()),
            max_evict_retries: Some(3),
            ..MachineSpec::default()
        };
        let mut b = MachineSpec {
            drain_timeout: Some("1h".into()),
            provider_id: Some("p".into()),
            ..MachineSpec::default()
        };
        assert!(!same(&a, &b));
        copy(&a, &mut b);
        assert!(same(&a, &b));
        assert_eq!(b.provider_id.as_deref(), Some("p"), "other fields are kept");
        assert_eq!(
            without(&b),
            MachineSpec {
                provider_id: Some("p".into()),
                ..MachineSpec::default()
            }
        );
        let patch = merge_patch(&a);
        assert_eq!(patch["spec"]["drainTimeout"], "2h");
        assert!(
            patch["spec"]["healthTimeout"].is_null(),
            "absent settings are removed"
        );
    }
}
