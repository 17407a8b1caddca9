//! Each included input changes the hash; each excluded one doesn't; the encoding is pinned.

use super::*;
use crate::crd::{Cri, NodeLocalDns, SystemComponents, WorkerPoolSpec};
use crate::strategy::UpdateStrategy;
use crate::testing::{quantity, resolve, spec, spec_with, time};

type Change = (&'static str, fn(&mut WorkerPoolSpec));

/// Inputs that may not change in place: in both hashes of every pool.
const INCLUDED: &[Change] = &[
    ("machine type", |s| s.machine.type_ = "m5.xlarge".into()),
    ("image name", |s| s.machine.image.name = "suse-chost".into()),
    ("volume size", |s| {
        s.volume.as_mut().unwrap().size = "60Gi".into()
    }),
    ("volume type", |s| {
        s.volume.as_mut().unwrap().type_ = Some("hdd".into())
    }),
    ("cri", |s| {
        s.cri = Some(Cri {
            name: "cri-o".into(),
        })
    }),
    ("node-local dns", |s| {
        s.system_components = Some(SystemComponents {
            node_local_dns: Some(NodeLocalDns { enabled: true }),
        })
    }),
];

/// Inputs an in-place update may change: out of the in-place pool hash, in the machine class hash.
const EXCLUDED_FOR_IN_PLACE: &[Change] = &[
    ("kubernetes minor", |s| {
        s.kubernetes.as_mut().unwrap().version = Some("1.31.1".into())
    }),
    ("image version", |s| {
        s.machine.image.version = "1631.0.0".into()
    }),
    ("ca rotation", |s| {
        s.credentials_rotation
            .as_mut()
            .unwrap()
            .certificate_authorities
            .as_mut()
            .unwrap()
            .last_initiation_time = Some(time("2025-03-01T00:00:00Z"))
    }),
    ("sa key rotation", |s| {
        s.credentials_rotation
            .as_mut()
            .unwrap()
            .service_account_key
            .as_mut()
            .unwrap()
            .last_initiation_time = Some(time("2025-03-01T00:00:00Z"))
    }),
    ("kube reserved", |s| {
        kubelet(s).kube_reserved.as_mut().unwrap().memory = Some(quantity("2Gi"));
    }),
    ("system reserved", |s| {
        kubelet(s).system_reserved.as_mut().unwrap().cpu = Some(quantity("100m"));
    }),
    ("eviction hard", |s| {
        kubelet(s).eviction_hard.as_mut().unwrap().memory_available = Some("200Mi".into());
    }),
    ("cpu manager policy", |s| {
        kubelet(s).cpu_manager_policy = Some("static".into())
    }),
];

fn kubelet(s: &mut WorkerPoolSpec) -> &mut crate::crd::KubeletConfig {
    s.kubernetes.as_mut().unwrap().kubelet.as_mut().unwrap()
}

fn rolling(s: &mut WorkerPoolSpec) {
    s.update_strategy = Some(UpdateStrategy::AutoRollingUpdate);
}

fn hashes(spec: &WorkerPoolSpec) -> (PoolHash, PoolHash) {
    let pool = resolve(spec);
    (pool_hash(&pool), machine_class_hash(&pool))
}

#[test]
fn included_inputs_change_both_hashes_of_in_place_and_rolling_pools() {
    for base in [spec(), spec_with(rolling)] {
        let (pool, class) = hashes(&base);
        for (name, change) in INCLUDED {
            let mut changed = base.clone();
            change(&mut changed);
            let (pool2, class2) = hashes(&changed);
            assert_ne!(
                pool,
                pool2,
                "{name} must change the pool hash ({:?})",
                base.strategy()
            );
            assert_ne!(class, class2, "{name} must change the machine class hash");
        }
    }
}

#[test]
fn in_place_excluded_inputs_keep_the_pool_hash_but_change_the_machine_class_hash() {
    let (pool, class) = hashes(&spec());
    for (name, change) in EXCLUDED_FOR_IN_PLACE {
        let (pool2, class2) = hashes(&spec_with(change));
        assert_eq!(
            pool, pool2,
            "{name} must not change an in-place pool's hash"
        );
        assert_ne!(class, class2, "{name} must change the machine class hash");
    }
}

#[test]
fn rolling_pools_include_the_in_place_exclusions() {
    let (pool, _) = hashes(&spec_with(rolling));
    for (name, change) in EXCLUDED_FOR_IN_PLACE {
        let (pool2, _) = hashes(&spec_with(|s| {
            rolling(s);
            change(s);
        }));
        assert_ne!(pool, pool2, "{name} must change a rolling pool's hash");
    }
}

#[test]
fn kubernetes_patch_version_changes_no_hash() {
    for base in [spec(), spec_with(rolling)] {
        let mut patched = base.clone();
        patched.kubernetes.as_mut().unwrap().version = Some("1.30.5".into());
        assert_eq!(hashes(&base), hashes(&patched));
    }
}

#[test]
fn reservations_moved_between_kube_and_system_keep_their_sum_and_the_hash() {
    let base = spec_with(rolling);
    let moved = spec_with(|s| {
        rolling(s);
        kubelet(s).kube_reserved.as_mut().unwrap().cpu = Some(quantity("60m"));
        kubelet(s).system_reserved.as_mut().unwrap().cpu = Some(quantity("0.04"));
    });
    assert_eq!(hashes(&base), hashes(&moved));
}

#[test]
fn orchestration_settings_are_not_inputs() {
    let base = hashes(&spec());
    let manual = spec_with(|s| {
        s.update_strategy = Some(UpdateStrategy::ManualInPlaceUpdate);
        s.max_unavailable = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(3));
        s.machine_controller_manager
            .as_mut()
            .unwrap()
            .machine_drain_timeout = Some("1h".into());
    });
    assert_eq!(base, hashes(&manual));
}

#[test]
fn equal_values_written_differently_hash_alike() {
    let base = hashes(&spec());
    let respelled = spec_with(|s| {
        s.volume.as_mut().unwrap().size = "53687091200".into();
        s.machine.image.version = "1630.0".into();
    });
    assert_eq!(base, hashes(&respelled));
}

#[test]
fn encoding_is_pinned() {
    let (pool, class) = hashes(&spec());
    assert_eq!(
        pool.as_str(),
        PINNED_IN_PLACE_POOL_HASH,
        "the pool hash encoding changed"
    );
    assert_eq!(
        class.as_str(),
        PINNED_IN_PLACE_MACHINE_CLASS_HASH,
        "the machine class hash encoding changed"
    );
    assert_eq!(pool.short().len(), 16);
}

// Computed independently from the encoding in the module docs (a few lines of Python's hashlib).
const PINNED_IN_PLACE_POOL_HASH: &str =
    "c3b387ef0f5b11dfcdcc98cc68eb6232cc003671d254c17035f937e5f735e0ae";
const PINNED_IN_PLACE_MACHINE_CLASS_HASH: &str =
    "d73facb985a0a6c7f0f2a81414a847ac6d1808177f2e46f82da4abff5feea947";
