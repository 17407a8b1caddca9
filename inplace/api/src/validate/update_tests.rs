//! Rules 8–14 on changes, with the examples of the reference documents.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Rule;
use crate::crd::{Cri, NodeLocalDns, SystemComponents, WorkerPoolSpec};
use crate::keys::{ANNOTATION_OPERATION, OPERATION_FORCE_IN_PLACE_UPDATE};
use crate::pool::field;
use crate::strategy::UpdateStrategy;
use crate::testing::{Env, only, rolling, set_kubernetes, spec, spec_with};
use crate::version::KubeVersion;

type Change = (&'static str, fn(&mut WorkerPoolSpec));

fn image(version: &str) -> impl Fn(&mut WorkerPoolSpec) {
    move |s| s.machine.image.version = version.to_owned()
}

#[test]
fn unchanged_pool_passes() {
    let mut env = Env::new();
    env.in_progress = true;
    env.update(&spec(), &spec()).unwrap();
}

#[test]
fn switching_between_auto_and_manual_in_place_is_allowed() {
    let env = Env::new();
    let manual = spec_with(|s| s.update_strategy = Some(UpdateStrategy::ManualInPlaceUpdate));
    env.update(&spec(), &manual).unwrap();
    env.update(&manual, &spec()).unwrap();
}

#[test]
fn switching_between_rolling_and_in_place_is_refused() {
    let env = Env::new();
    let v = only(
        env.update(&spec(), &spec_with(rolling)),
        Rule::StrategySwitch,
    );
    assert_eq!(v[0].field, field::UPDATE_STRATEGY);
    assert!(
        v[0].problem
            .contains("AutoInPlaceUpdate to AutoRollingUpdate"),
        "{}",
        v[0].problem
    );
    let to_manual = spec_with(|s| s.update_strategy = Some(UpdateStrategy::ManualInPlaceUpdate));
    only(
        env.update(&spec_with(rolling), &to_manual),
        Rule::StrategySwitch,
    );
    // An absent strategy is AutoRollingUpdate.
    let absent = spec_with(|s| {
        rolling(s);
        s.update_strategy = None;
    });
    only(env.update(&absent, &spec()), Rule::StrategySwitch);
}

#[test]
fn fields_that_need_new_machines_are_immutable_for_in_place_pools() {
    let env = Env::new();
    let cases: [Change; 6] = [
        (field::IMAGE_NAME, |s| {
            s.machine.image.name = "suse-chost".into();
            s.machine.image.version = "15.3.20220818".into();
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
        let v = only(
            env.update(&spec(), &spec_with(change)),
            Rule::ImmutableForInPlace,
        );
        assert_eq!(v.len(), 1, "{path}");
        assert_eq!(v[0].field, path);
        // Rolling pools replace machines for these, which is fine.
        let mut new = spec_with(rolling);
        change(&mut new);
        env.update(&spec_with(rolling), &new).unwrap();
    }
}

#[test]
fn kubernetes_downgrade_is_refused_for_every_pool() {
    let env = Env::new();
    let down = |s: &mut WorkerPoolSpec| set_kubernetes(s, Some("1.29.0"));
    let v = only(env.update(&spec(), &spec_with(down)), Rule::Downgrade);
    assert_eq!(v[0].field, field::KUBERNETES_VERSION);
    let mut rolled_down = spec_with(rolling);
    down(&mut rolled_down);
    only(
        env.update(&spec_with(rolling), &rolled_down),
        Rule::Downgrade,
    );
}

#[test]
fn newly_pinned_version_cannot_go_below_the_inherited_control_plane_version() {
    // "you cannot set it to 1.26.8 while .spec.kubernetes.version is already 1.27.4"
    let mut env = Env::new();
    env.control_plane = KubeVersion::parse("1.27.4").unwrap();
    let old = spec_with(|s| {
        rolling(s);
        set_kubernetes(s, None);
    });
    let new = spec_with(|s| {
        rolling(s);
        set_kubernetes(s, Some("1.26.8"));
    });
    only(env.update(&old, &new), Rule::Downgrade);
    env.update(
        &old,
        &spec_with(|s| {
            rolling(s);
            set_kubernetes(s, Some("1.27.4"));
        }),
    )
    .unwrap();
}

#[test]
fn in_place_pools_cannot_skip_a_minor_version() {
    let env = Env::new();
    let old = spec_with(|s| set_kubernetes(s, Some("1.29.0")));
    let v = only(
        env.update(&old, &spec_with(|s| set_kubernetes(s, Some("1.31.1")))),
        Rule::MinorVersionSkip,
    );
    assert!(v[0].fix.contains("1.30"), "{}", v[0].fix);
    env.update(&old, &spec_with(|s| set_kubernetes(s, Some("1.30.4"))))
        .unwrap();
    // Rolling pools build nodes from scratch and may skip.
    let mut old_rolling = old.clone();
    rolling(&mut old_rolling);
    env.update(
        &old_rolling,
        &spec_with(|s| {
            rolling(s);
            set_kubernetes(s, Some("1.31.1"));
        }),
    )
    .unwrap();
}

#[test]
fn removing_the_version_allows_only_one_minor_to_the_control_plane() {
    // "you cannot upgrade a pool from version 1.25.0 to 1.27.0 in one go"
    let mut env = Env::new();
    env.control_plane = KubeVersion::parse("1.27.0").unwrap();
    for strategy in [
        rolling as fn(&mut WorkerPoolSpec),
        |_: &mut WorkerPoolSpec| {},
    ] {
        let old = spec_with(|s| {
            strategy(s);
            set_kubernetes(s, Some("1.25.0"));
        });
        let new = spec_with(|s| {
            strategy(s);
            set_kubernetes(s, None);
        });
        let v = only(env.update(&old, &new), Rule::VersionRemovalSkew);
        assert_eq!(v.len(), 1);
        let from_one_below = spec_with(|s| {
            strategy(s);
            set_kubernetes(s, Some("1.26.8"));
        });
        env.update(&from_one_below, &new).unwrap();
    }
}

#[test]
fn in_place_pools_cannot_downgrade_the_image() {
    let env = Env::new();
    let v = only(
        env.update(&spec(), &spec_with(image("1620.0.0"))),
        Rule::Downgrade,
    );
    assert_eq!(v[0].field, field::IMAGE_VERSION);
    let mut old_rolling = spec_with(rolling);
    let mut new_rolling = spec_with(image("1620.0.0"));
    rolling(&mut new_rolling);
    env.update(&old_rolling, &new_rolling).unwrap();
    old_rolling.machine.image.version = "1630.0".into();
    env.update(&old_rolling, &spec_with(rolling)).unwrap();
}

#[test]
fn image_updates_respect_min_version_for_update() {
    let env = Env::new();
    // Documentation example: 1632.0.0 is reachable in place from 1630.0.0 on.
    env.update(&spec(), &spec_with(image("1632.0.0"))).unwrap();
    let v = only(
        env.update(&spec_with(image("1620.0.0")), &spec_with(image("1632.0.0"))),
        Rule::MinVersionForUpdate,
    );
    assert!(
        v[0].problem.contains("1630.0.0") && v[0].problem.contains("1620.0.0"),
        "{}",
        v[0].problem
    );
    // Without minVersionForUpdate, no in-place update can reach a version.
    only(
        env.update(&spec(), &spec_with(image("1633.0.0"))),
        Rule::MinVersionForUpdate,
    );
}

#[test]
fn gep_cloud_profile_example_update() {
    // 1443.8.0 (supported, minVersionForUpdate 1312.3.0) before its expiration date.
    let mut env = Env::new();
    env.now = "2025-01-01T00:00:00Z".parse().unwrap();
    let old = spec_with(|s| {
        rolling(s);
        s.update_strategy = Some(UpdateStrategy::AutoInPlaceUpdate);
        s.machine.image.version = "1312.3.0".into();
    });
    env.update(&old, &spec_with(image("1443.8.0"))).unwrap();
    env.now = "2025-03-01T00:00:00Z".parse().unwrap();
    only(
        env.update(&old, &spec_with(image("1443.8.0"))),
        Rule::Expired,
    );
}

#[test]
fn image_update_to_a_version_without_in_place_support_is_refused() {
    let env = Env::new();
    only(
        env.update(&spec_with(image("1620.0.0")), &spec_with(image("1629.0.0"))),
        Rule::InPlaceNotSupported,
    );
}

#[test]
fn expired_targets_are_refused_but_unchanged_expired_versions_are_not() {
    let env = Env::new();
    only(
        env.update(&spec(), &spec_with(image("1634.0.0"))),
        Rule::Expired,
    );
    let on_expired = spec_with(image("1634.0.0"));
    let tweaked = spec_with(|s| {
        s.machine.image.version = "1634.0.0".into();
        s.max_unavailable = Some(IntOrString::Int(2));
    });
    env.update(&on_expired, &tweaked).unwrap();
}

#[test]
fn no_new_update_while_one_is_in_progress_unless_forced() {
    let mut env = Env::new();
    env.in_progress = true;
    let new = spec_with(image("1631.0.0"));
    let v = only(env.update(&spec(), &new), Rule::UpdateInProgress);
    assert_eq!(v[0].field, field::IMAGE_VERSION);
    assert!(
        v[0].fix
            .contains("gardener.cloud/operation=force-in-place-update"),
        "{}",
        v[0].fix
    );
    // A patch version (no drain) is an update too.
    only(
        env.update(&spec(), &spec_with(|s| set_kubernetes(s, Some("1.30.5")))),
        Rule::UpdateInProgress,
    );
    // Settings that update no node are fine.
    env.update(
        &spec(),
        &spec_with(|s| s.max_unavailable = Some(IntOrString::Int(2))),
    )
    .unwrap();

    for value in [
        OPERATION_FORCE_IN_PLACE_UPDATE,
        "reconcile;force-in-place-update",
    ] {
        env.annotations
            .insert(ANNOTATION_OPERATION.to_owned(), value.to_owned());
        env.update(&spec(), &new).unwrap();
    }
    env.annotations
        .insert(ANNOTATION_OPERATION.to_owned(), "reconcile".to_owned());
    only(env.update(&spec(), &new), Rule::UpdateInProgress);

    env.in_progress = false;
    env.annotations.clear();
    env.update(&spec(), &new).unwrap();
}

#[test]
fn a_control_plane_move_is_a_change_of_the_pools_that_inherit_its_version() {
    let inheriting = spec_with(|s| set_kubernetes(s, None));
    let mut env = Env::new();
    env.previous_control_plane = Some(KubeVersion::parse("1.29.0").unwrap());
    let v = only(env.update(&inheriting, &inheriting), Rule::MinorVersionSkip);
    assert!(v[0].problem.contains("1.29.0 → 1.31.1"), "{}", v[0].problem);
    env.previous_control_plane = Some(KubeVersion::parse("1.30.4").unwrap());
    env.in_progress = true;
    only(env.update(&inheriting, &inheriting), Rule::UpdateInProgress);
    env.in_progress = false;
    env.update(&inheriting, &inheriting).unwrap();
}

#[test]
fn a_control_plane_move_checks_the_skew_of_a_pool_with_its_own_version_again() {
    let pinned = spec_with(|s| set_kubernetes(s, Some("1.28.0")));
    let mut env = Env::new();
    env.control_plane = KubeVersion::parse("1.32.0").unwrap();
    env.previous_control_plane = Some(KubeVersion::parse("1.30.4").unwrap());
    only(env.update(&pinned, &pinned), Rule::ControlPlaneSkew);
    // Without a move, an unchanged version is not judged again.
    env.previous_control_plane = None;
    env.update(&pinned, &pinned).unwrap();
}
