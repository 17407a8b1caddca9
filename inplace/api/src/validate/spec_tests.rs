//! Rules 1–7 on new pools.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Rule;
use crate::pool::field;
use crate::testing::{Env, only, quantity, rolling, set_kubernetes, spec, spec_with};

#[test]
fn fixture_pool_is_valid() {
    Env::new().create(&spec()).unwrap();
    Env::new().create(&spec_with(rolling)).unwrap();
}

#[test]
fn pool_size_must_be_ordered_and_non_negative() {
    let env = Env::new();
    let v = only(env.create(&spec_with(|s| s.minimum = -1)), Rule::PoolSize);
    assert_eq!(v[0].field, field::MINIMUM);
    let v = only(env.create(&spec_with(|s| s.maximum = 2)), Rule::PoolSize);
    assert_eq!(v[0].field, "spec.maximum");
}

#[test]
fn surge_and_unavailable_are_numbers_or_percentages() {
    let env = Env::new();
    env.create(&spec_with(|s| {
        s.max_unavailable = Some(IntOrString::String("25%".into()))
    }))
    .unwrap();
    for bad in [
        IntOrString::String("abc".into()),
        IntOrString::String("25".into()),
        IntOrString::Int(-1),
    ] {
        let v = only(
            env.create(&spec_with(|s| s.max_surge = Some(bad.clone()))),
            Rule::IntOrPercent,
        );
        assert_eq!(v[0].field, field::MAX_SURGE, "{bad:?}");
    }
}

#[test]
fn surge_and_unavailable_cannot_both_be_zero() {
    let env = Env::new();
    only(
        env.create(&spec_with(|s| {
            s.max_unavailable = Some(IntOrString::String("0%".into()))
        })),
        Rule::SurgeAndUnavailableZero,
    );
    env.create(&spec_with(|s| {
        s.max_unavailable = Some(IntOrString::Int(0));
        s.max_surge = Some(IntOrString::Int(1));
    }))
    .unwrap();
}

#[test]
fn durations_must_parse_and_be_positive() {
    let env = Env::new();
    for bad in ["2 hours", "10", "0s"] {
        let v = only(
            env.create(&spec_with(|s| {
                s.machine_controller_manager
                    .as_mut()
                    .unwrap()
                    .machine_drain_timeout = Some(bad.into())
            })),
            Rule::Malformed,
        );
        assert_eq!(
            v[0].field, "spec.machineControllerManager.machineDrainTimeout",
            "{bad}"
        );
    }
    let v = only(
        env.create(&spec_with(|s| {
            s.machine_controller_manager
                .as_mut()
                .unwrap()
                .machine_in_place_update_timeout = Some("ten minutes".into())
        })),
        Rule::Malformed,
    );
    assert!(v[0].problem.contains("ten minutes"), "{}", v[0].problem);
}

#[test]
fn max_evict_retries_is_not_negative() {
    only(
        Env::new().create(&spec_with(|s| {
            s.machine_controller_manager
                .as_mut()
                .unwrap()
                .max_evict_retries = Some(-1)
        })),
        Rule::MaxEvictRetries,
    );
}

#[test]
fn in_place_settings_are_refused_on_rolling_pools() {
    let v = only(
        Env::new().create(&spec_with(|s| {
            s.update_strategy = Some(crate::strategy::UpdateStrategy::AutoRollingUpdate)
        })),
        Rule::InPlaceOnlySetting,
    );
    let fields: Vec<_> = v.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.machineControllerManager.machineInPlaceUpdateTimeout",
            "spec.machineControllerManager.disableHealthTimeout"
        ]
    );
}

#[test]
fn malformed_versions_and_quantities_are_reported_with_their_fields() {
    let env = Env::new();
    let v = only(
        env.create(&spec_with(|s| {
            s.machine.image.version = "latest".into();
            set_kubernetes(s, Some("1.30"));
            s.volume.as_mut().unwrap().size = "50GB".into();
            s.kubernetes
                .as_mut()
                .unwrap()
                .kubelet
                .as_mut()
                .unwrap()
                .kube_reserved
                .as_mut()
                .unwrap()
                .cpu = Some(quantity("-1"));
        })),
        Rule::Malformed,
    );
    let fields: Vec<_> = v.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            field::IMAGE_VERSION,
            field::KUBERNETES_VERSION,
            field::VOLUME_SIZE,
            "spec.kubernetes.kubelet.kubeReserved.cpu"
        ]
    );
}

#[test]
fn pool_version_must_not_exceed_the_control_plane() {
    let v = only(
        Env::new().create(&spec_with(|s| set_kubernetes(s, Some("1.32.0")))),
        Rule::AboveControlPlane,
    );
    assert!(v[0].fix.contains("1.31.1"), "{}", v[0].fix);
}

#[test]
fn pool_version_is_at_most_two_minors_below_the_control_plane() {
    let env = Env::new();
    env.create(&spec_with(|s| set_kubernetes(s, Some("1.29.0"))))
        .unwrap();
    let v = only(
        env.create(&spec_with(|s| set_kubernetes(s, Some("1.28.0")))),
        Rule::ControlPlaneSkew,
    );
    assert_eq!(v[0].field, field::KUBERNETES_VERSION);
}

#[test]
fn versions_must_be_in_the_catalog() {
    let env = Env::new();
    let v = only(
        env.create(&spec_with(|s| s.machine.image.version = "9999.0.0".into())),
        Rule::UnknownVersion,
    );
    assert_eq!(v[0].field, field::IMAGE_VERSION);
    let v = only(
        env.create(&spec_with(|s| set_kubernetes(s, Some("1.30.9")))),
        Rule::UnknownVersion,
    );
    assert_eq!(v[0].field, field::KUBERNETES_VERSION);
}

#[test]
fn expired_versions_are_refused_and_expiry_is_judged_at_now() {
    let mut env = Env::new();
    let v = only(
        env.create(&spec_with(|s| set_kubernetes(s, Some("1.30.3")))),
        Rule::Expired,
    );
    assert_eq!(v[0].field, field::KUBERNETES_VERSION);
    let expired_image = spec_with(|s| s.machine.image.version = "1634.0.0".into());
    only(env.create(&expired_image), Rule::Expired);
    env.now = "2025-04-30T00:00:00Z".parse().unwrap();
    env.create(&expired_image).unwrap();
}

#[test]
fn in_place_pools_need_an_image_that_supports_in_place_updates() {
    let env = Env::new();
    for version in ["1629.0.0", "1443.7.0"] {
        let v = only(
            env.create(&spec_with(|s| s.machine.image.version = version.into())),
            Rule::InPlaceNotSupported,
        );
        assert_eq!(v[0].field, field::IMAGE_VERSION);
    }
    env.create(&spec_with(|s| {
        rolling(s);
        s.machine.image.version = "1443.7.0".into();
    }))
    .unwrap();
}

#[test]
fn gep_cloud_profile_example_admits_an_in_place_pool_before_expiry() {
    let mut env = Env::new();
    env.now = "2025-01-01T00:00:00Z".parse().unwrap();
    env.create(&spec_with(|s| s.machine.image.version = "1443.8.0".into()))
        .unwrap();
}

#[test]
fn violations_read_as_one_error() {
    let err = Env::new()
        .create(&spec_with(|s| s.minimum = -1))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("the worker pool is invalid:"), "{text}");
    assert!(
        text.contains("spec.minimum: minimum -1 is negative; set minimum to 0 or more"),
        "{text}"
    );
    assert!(err.has(Rule::PoolSize) && !err.has(Rule::Expired));
}

#[test]
fn maintenance_window_must_parse_and_last_thirty_minutes_to_six_hours() {
    use crate::crd::{Maintenance, MaintenanceTimeWindow};
    let env = Env::new();
    let window = |begin: &str, end: &str| {
        spec_with(|s| {
            s.maintenance = Some(Maintenance {
                time_window: Some(MaintenanceTimeWindow {
                    begin: begin.to_owned(),
                    end: end.to_owned(),
                }),
                ..Maintenance::default()
            })
        })
    };
    env.create(&window("230000+0100", "010000+0100")).unwrap();
    let v = only(
        env.create(&window("2300+0100", "010000+0100")),
        Rule::MaintenanceWindow,
    );
    assert_eq!(v[0].field, "spec.maintenance.timeWindow.begin");
    assert!(v[0].problem.contains("HHMMSS+ZZZZ"), "{}", v[0].problem);
    let v = only(
        env.create(&window("220000+0100", "230000+0200")),
        Rule::MaintenanceWindow,
    );
    assert_eq!(v[0].field, "spec.maintenance.timeWindow");
    assert_eq!(
        v[0].to_string(),
        "spec.maintenance.timeWindow: the window from 220000+0100 to 230000+0200 lasts 0 minutes, not 30 minutes to 6 hours; make the window 30 minutes to 6 hours long, e.g. begin 220000+0100 and end 230000+0100"
    );
    // A change is checked too.
    let v = only(
        env.update(&spec(), &window("220000+0000", "050000+0000")),
        Rule::MaintenanceWindow,
    );
    assert_eq!(v.len(), 1);
}
