//! One test per classification rule, with the examples of the reference documents.

use super::*;
use crate::crd::{Cri, NodeLocalDns, SystemComponents, WorkerPoolSpec};
use crate::pool::field;
use crate::strategy::UpdateStrategy;
use crate::testing::{quantity, resolve, spec, spec_with, time};
use crate::version::KubeVersion;

type Change = (&'static str, fn(&mut WorkerPoolSpec));

fn classify_specs(old: &WorkerPoolSpec, new: &WorkerPoolSpec) -> UpdateClass {
    classify(&resolve(old), &resolve(new))
}

fn kubelet(s: &mut WorkerPoolSpec) -> &mut crate::crd::KubeletConfig {
    s.kubernetes.as_mut().unwrap().kubelet.as_mut().unwrap()
}

fn v(text: &str) -> KubeVersion {
    KubeVersion::parse(text).unwrap()
}

fn drain_changes(class: UpdateClass) -> Vec<InPlaceChange> {
    match class {
        UpdateClass::InPlaceWithDrain { changes } => changes,
        other => panic!("expected an in-place update with drain, got {other:?}"),
    }
}

#[test]
fn orchestration_settings_trigger_nothing() {
    let new = spec_with(|s| {
        s.update_strategy = Some(UpdateStrategy::ManualInPlaceUpdate);
        s.max_unavailable =
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("50%".into()));
        s.minimum = 2;
        s.machine_controller_manager
            .as_mut()
            .unwrap()
            .machine_in_place_update_timeout = Some("30m".into());
    });
    assert_eq!(classify_specs(&spec(), &new), UpdateClass::None);
    assert!(!UpdateClass::None.is_update());
}

#[test]
fn reservations_with_unchanged_sum_trigger_nothing() {
    // kubeReserved.cpu 80m → 60m while systemReserved.cpu 20m → 40m: the sum stays 100m.
    let new = spec_with(|s| {
        kubelet(s).kube_reserved.as_mut().unwrap().cpu = Some(quantity("60m"));
        kubelet(s).system_reserved.as_mut().unwrap().cpu = Some(quantity("40m"));
    });
    assert_eq!(classify_specs(&spec(), &new), UpdateClass::None);
    let rolling =
        |s: &mut WorkerPoolSpec| s.update_strategy = Some(UpdateStrategy::AutoRollingUpdate);
    let mut rolled = new.clone();
    rolling(&mut rolled);
    assert_eq!(
        classify_specs(&spec_with(rolling), &rolled),
        UpdateClass::None
    );
}

#[test]
fn reservations_with_changed_sum_update_with_drain() {
    let new = spec_with(|s| {
        kubelet(s).system_reserved.as_mut().unwrap().memory = Some(quantity("512Mi"))
    });
    assert_eq!(
        drain_changes(classify_specs(&spec(), &new)),
        [InPlaceChange::KubeletConfig {
            parts: vec![KubeletConfigPart::Reservations]
        }]
    );
}

#[test]
fn kubernetes_patch_version_updates_without_drain() {
    let new = spec_with(|s| s.kubernetes.as_mut().unwrap().version = Some("1.30.5".into()));
    let expected = UpdateClass::InPlaceWithoutDrain {
        changes: vec![InPlaceChange::KubeletPatchVersion {
            from: v("1.30.4"),
            to: v("1.30.5"),
        }],
    };
    assert_eq!(classify_specs(&spec(), &new), expected);
    assert!(
        !InPlaceChange::KubeletPatchVersion {
            from: v("1.30.4"),
            to: v("1.30.5")
        }
        .needs_drain()
    );

    let rolling =
        |s: &mut WorkerPoolSpec| s.update_strategy = Some(UpdateStrategy::AutoRollingUpdate);
    let mut new_rolling = new.clone();
    rolling(&mut new_rolling);
    assert_eq!(
        classify_specs(&spec_with(rolling), &new_rolling),
        expected,
        "rolling pools patch in place too"
    );
}

#[test]
fn os_version_updates_with_drain() {
    let new = spec_with(|s| s.machine.image.version = "1631.0.0".into());
    assert_eq!(
        drain_changes(classify_specs(&spec(), &new)),
        [InPlaceChange::OperatingSystemVersion {
            from: "1630.0.0".into(),
            to: "1631.0.0".into()
        }]
    );
}

#[test]
fn kubelet_minor_version_updates_with_drain() {
    let new = spec_with(|s| s.kubernetes.as_mut().unwrap().version = Some("1.31.1".into()));
    assert_eq!(
        drain_changes(classify_specs(&spec(), &new)),
        [InPlaceChange::KubeletMinorVersion {
            from: v("1.30.4"),
            to: v("1.31.1")
        }]
    );
}

#[test]
fn inherited_version_follows_the_control_plane() {
    let pool = spec_with(|s| s.kubernetes.as_mut().unwrap().version = None);
    let old = ResolvedPool::resolve(&pool, &v("1.30.4")).unwrap();
    let new = ResolvedPool::resolve(&pool, &v("1.31.1")).unwrap();
    assert_eq!(
        drain_changes(classify(&old, &new)),
        [InPlaceChange::KubeletMinorVersion {
            from: v("1.30.4"),
            to: v("1.31.1")
        }]
    );
}

#[test]
fn eviction_and_cpu_manager_policy_update_with_drain() {
    let new = spec_with(|s| {
        kubelet(s)
            .eviction_hard
            .as_mut()
            .unwrap()
            .image_fs_available = Some("10%".into());
        kubelet(s).cpu_manager_policy = Some("static".into());
    });
    let changes = drain_changes(classify_specs(&spec(), &new));
    assert_eq!(
        changes,
        [InPlaceChange::KubeletConfig {
            parts: vec![
                KubeletConfigPart::EvictionHard,
                KubeletConfigPart::CpuManagerPolicy
            ]
        }]
    );
    assert_eq!(changes[0].field(), field::EVICTION_HARD);
}

#[test]
fn credentials_rotations_update_with_drain() {
    let new = spec_with(|s| {
        let rotation = s.credentials_rotation.as_mut().unwrap();
        rotation
            .certificate_authorities
            .as_mut()
            .unwrap()
            .last_initiation_time = Some(time("2025-03-01T00:00:00Z"));
        rotation
            .service_account_key
            .as_mut()
            .unwrap()
            .last_initiation_time = Some(time("2025-03-02T00:00:00Z"));
    });
    assert_eq!(
        drain_changes(classify_specs(&spec(), &new)),
        [
            InPlaceChange::CertificateAuthoritiesRotation,
            InPlaceChange::ServiceAccountKeyRotation
        ]
    );
}

#[test]
fn patch_riding_along_a_drain_change_is_listed_and_drains() {
    let new = spec_with(|s| {
        s.machine.image.version = "1631.0.0".into();
        s.kubernetes.as_mut().unwrap().version = Some("1.30.5".into());
    });
    let changes = drain_changes(classify_specs(&spec(), &new));
    assert_eq!(changes.len(), 2);
    assert!(changes.contains(&InPlaceChange::KubeletPatchVersion {
        from: v("1.30.4"),
        to: v("1.30.5")
    }));
}

#[test]
fn fields_that_cannot_change_in_place_need_replacement() {
    let cases: [Change; 6] = [
        (field::IMAGE_NAME, |s| {
            s.machine.image.name = "suse-chost".into()
        }),
        (field::MACHINE_TYPE, |s| {
            s.machine.type_ = "m5.xlarge".into()
        }),
        (field::VOLUME_TYPE, |s| {
            s.volume.as_mut().unwrap().type_ = Some("hdd".into())
        }),
        (field::VOLUME_SIZE, |s| {
            s.volume.as_mut().unwrap().size = "60Gi".into()
        }),
        (field::CRI_NAME, |s| {
            s.cri = Some(Cri {
                name: "cri-o".into(),
            })
        }),
        (field::NODE_LOCAL_DNS, |s| {
            s.system_components = Some(SystemComponents {
                node_local_dns: Some(NodeLocalDns { enabled: true }),
            })
        }),
    ];
    for (path, change) in cases {
        // Together with an in-place change, replacement still wins.
        let new = spec_with(|s| {
            change(s);
            s.machine.image.version = "1631.0.0".into();
        });
        assert_eq!(
            classify_specs(&spec(), &new),
            UpdateClass::NeedsReplacement { fields: vec![path] },
            "{path}"
        );
    }
}

#[test]
fn volume_size_written_differently_is_no_change() {
    let new = spec_with(|s| s.volume.as_mut().unwrap().size = "51200Mi".into());
    assert_eq!(classify_specs(&spec(), &new), UpdateClass::None);
}

#[test]
fn rolling_pools_replace_machines_for_every_drain_trigger() {
    let rolling =
        |s: &mut WorkerPoolSpec| s.update_strategy = Some(UpdateStrategy::AutoRollingUpdate);
    let new = spec_with(|s| {
        rolling(s);
        s.machine.image.version = "1631.0.0".into();
        s.credentials_rotation
            .as_mut()
            .unwrap()
            .certificate_authorities = None;
    });
    let class = classify_specs(&spec_with(rolling), &new);
    assert_eq!(
        class,
        UpdateClass::NeedsReplacement {
            fields: vec![field::IMAGE_VERSION, field::CA_ROTATION]
        }
    );
    assert_eq!(class.fields(), [field::IMAGE_VERSION, field::CA_ROTATION]);
}

#[test]
fn agent_side_comparison_reads_osc_inputs() {
    let old_spec = spec();
    let new_spec = spec_with(|s| s.machine.image.version = "1631.0".into());
    let osc = |s: &WorkerPoolSpec| crate::osc::InPlaceUpdates::for_pool(s, &v("1.30.4"));
    let old = UpdateInputs::from_osc(&osc(&old_spec)).unwrap();
    let new = UpdateInputs::from_osc(&osc(&new_spec)).unwrap();
    assert_eq!(
        in_place_changes(&old, &new),
        [InPlaceChange::OperatingSystemVersion {
            from: "1630.0.0".into(),
            to: "1631.0".into()
        }]
    );
    assert!(in_place_changes(&old, &old).is_empty());
    let mut broken = osc(&old_spec);
    broken.kubelet.version = "1.30".into();
    let err = UpdateInputs::from_osc(&broken).unwrap_err();
    assert_eq!(err.0[0].field, "spec.inPlaceUpdates.kubelet.version");
}
