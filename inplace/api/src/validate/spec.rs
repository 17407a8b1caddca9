//! Rules 1–3 and 15: pool size, surge and unavailability, MCM settings, the maintenance window.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Rule, Violation};
use crate::crd::WorkerPoolSpec;
use crate::pool::field;
use crate::strategy::parse_percent;

pub(super) fn check(spec: &WorkerPoolSpec, out: &mut Vec<Violation>) {
    if spec.minimum < 0 {
        out.push(Violation::new(
            Rule::PoolSize,
            field::MINIMUM,
            format!("minimum {} is negative", spec.minimum),
            "set minimum to 0 or more",
        ));
    }
    if spec.maximum < spec.minimum {
        out.push(Violation::new(
            Rule::PoolSize,
            "spec.maximum",
            format!("maximum {} is below minimum {}", spec.maximum, spec.minimum),
            "set maximum to at least minimum",
        ));
    }
    let surge = int_or_percent(spec.max_surge.as_ref(), field::MAX_SURGE, out);
    let unavailable = int_or_percent(spec.max_unavailable.as_ref(), field::MAX_UNAVAILABLE, out);
    if surge == Some(0) && unavailable == Some(0) {
        out.push(Violation::new(
            Rule::SurgeAndUnavailableZero,
            field::MAX_UNAVAILABLE,
            "maxSurge and maxUnavailable are both zero, so no node could ever be updated",
            "set maxUnavailable (in-place pools) or maxSurge to at least 1",
        ));
    }
    mcm_settings(spec, out);
    maintenance_window(spec, out);
}

/// Rule 15: the window parses and lasts 30 minutes to 6 hours.
fn maintenance_window(spec: &WorkerPoolSpec, out: &mut Vec<Violation>) {
    use crate::maintenance::TimeWindowError;
    let Some(Err(error)) = spec.maintenance.as_ref().and_then(|m| m.window()) else {
        return;
    };
    let (path, fix) = match &error {
        TimeWindowError::Malformed { field: "begin", .. } => (
            "spec.maintenance.timeWindow.begin",
            "write the time like 220000+0100",
        ),
        TimeWindowError::Malformed { .. } => (
            "spec.maintenance.timeWindow.end",
            "write the time like 230000+0100",
        ),
        TimeWindowError::Length { .. } => (
            "spec.maintenance.timeWindow",
            "make the window 30 minutes to 6 hours long, e.g. begin 220000+0100 and end 230000+0100",
        ),
    };
    out.push(Violation::new(
        Rule::MaintenanceWindow,
        path,
        error.to_string(),
        fix,
    ));
}

/// The value as a number or percentage, `None` when absent or invalid (invalid is reported).
fn int_or_percent(
    value: Option<&IntOrString>,
    path: &str,
    out: &mut Vec<Violation>,
) -> Option<i64> {
    let valid = match value? {
        IntOrString::Int(n) => (*n >= 0).then_some(i64::from(*n)),
        IntOrString::String(text) => parse_percent(text),
    };
    if valid.is_none() {
        out.push(Violation::new(
            Rule::IntOrPercent,
            path,
            format!("{value:?} is neither a non-negative number nor a percentage"),
            "write a number like 1 or a percentage like 25%",
        ));
    }
    valid
}

fn mcm_settings(spec: &WorkerPoolSpec, out: &mut Vec<Violation>) {
    let Some(mcm) = &spec.machine_controller_manager else {
        return;
    };
    for (name, value) in [
        ("machineDrainTimeout", &mcm.machine_drain_timeout),
        ("machineHealthTimeout", &mcm.machine_health_timeout),
        ("machineCreationTimeout", &mcm.machine_creation_timeout),
        (
            "machineInPlaceUpdateTimeout",
            &mcm.machine_in_place_update_timeout,
        ),
    ] {
        let Some(text) = value else { continue };
        let path = format!("{}.{name}", field::MCM);
        match rackproof_clock::parse_duration(text) {
            Ok(duration) if duration.is_zero() => out.push(Violation::new(
                Rule::Malformed,
                &path,
                "the timeout is zero",
                "give a positive duration like 10m",
            )),
            Ok(_) => {}
            Err(err) => out.push(Violation::new(
                Rule::Malformed,
                &path,
                err.to_string(),
                "give a duration like 2h, 10m or 90s",
            )),
        }
    }
    if let Some(retries) = mcm.max_evict_retries
        && retries < 0
    {
        out.push(Violation::new(
            Rule::MaxEvictRetries,
            &format!("{}.maxEvictRetries", field::MCM),
            format!("maxEvictRetries {retries} is negative"),
            "set it to 0 or more (default 10)",
        ));
    }
    if !spec.strategy().is_in_place() {
        for (name, set) in [
            (
                "machineInPlaceUpdateTimeout",
                mcm.machine_in_place_update_timeout.is_some(),
            ),
            ("disableHealthTimeout", mcm.disable_health_timeout.is_some()),
        ] {
            if set {
                out.push(Violation::new(
                    Rule::InPlaceOnlySetting,
                    &format!("{}.{name}", field::MCM),
                    format!(
                        "{name} only applies to in-place update strategies, and this pool uses {}",
                        spec.strategy()
                    ),
                    format!("remove {name}"),
                ));
            }
        }
    }
}
