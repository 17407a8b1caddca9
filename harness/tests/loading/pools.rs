//! Loading several pools: `pools` beside `pool`, pool names, sizes, and what must name a pool.

use rackproof_harness::load::load;
use rackproof_harness::scenario::Step;

use super::{errors, write};

const IMAGES: &str = "images:\n  - version: \"1.0.0\"\n  - version: \"1.1.0\"\n";
const POOLS: &str = "pools:\n  - { name: big, strategy: AutoInPlaceUpdate, size: 3, os: \"1.0.0\", kubernetes: \"1.34.2\" }\n  - { name: small, strategy: ManualInPlaceUpdate, size: 2, os: \"1.0.0\", kubernetes: \"1.34.2\", maxUnavailable: 2 }\n";

#[test]
fn several_pools_load_with_their_own_settings_and_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 6 }}\n{IMAGES}{POOLS}steps:\n  - update: {{ pool: small, os: \"1.1.0\" }}\n  - waitUntil: {{ until: {{ pool: {{ name: small, that: rolloutComplete }} }}, within: 1h }}\n"
        ),
    );
    let scenario = load(&file).unwrap_or_else(|e| panic!("{e}")).scenario;
    let names: Vec<&str> = scenario.pools().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["big", "small"]);
    assert_eq!(
        scenario.pool_members(),
        [
            (
                "big".to_owned(),
                vec![
                    "node-1".to_owned(),
                    "node-2".to_owned(),
                    "node-3".to_owned()
                ]
            ),
            (
                "small".to_owned(),
                vec!["node-4".to_owned(), "node-5".to_owned()]
            ),
        ],
        "node-6 is a spare"
    );
    assert_eq!(
        scenario
            .pool_named("small")
            .unwrap()
            .max_unavailable
            .resolve(2, false),
        2
    );
    assert!(
        matches!(&scenario.steps[0], Step::Update(u) if u.pool.as_ref().unwrap().value == "small")
    );
}

#[test]
fn pool_and_pools_together_or_neither_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let both = write(
        dir.path(),
        "both.yaml",
        &format!(
            "lab: {{ nodes: 5 }}\n{IMAGES}pool: {{ strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\n{POOLS}"
        ),
    );
    let text = errors(load(&both));
    assert!(
        text.contains("both.yaml:7:3: the scenario gives both `pool` and `pools`"),
        "{text}"
    );
    assert!(text.contains("help: give one pool as `pool:`"), "{text}");
    let neither = write(
        dir.path(),
        "neither.yaml",
        &format!("lab: {{ nodes: 5 }}\n{IMAGES}"),
    );
    let text = errors(load(&neither));
    assert!(text.contains("the scenario gives no `pool`"), "{text}");
}

#[test]
fn pools_are_named_sized_and_fit_in_the_lab() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 4 }}\n{IMAGES}pools:\n  - {{ name: big, strategy: AutoInPlaceUpdate, size: 3, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\n  - {{ name: big, strategy: AutoInPlaceUpdate, size: 2, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\n  - {{ name: No_Good, strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\", controlPlane: \"1.34.2\" }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:7:5: pool \"big\" is listed twice"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:8:5: pool name \"No_Good\" is not a valid Kubernetes name"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:8:5: pool \"No_Good\" gives no `size`"),
        "{text}"
    );
    assert!(
        text.contains(
            "s.yaml:8:100: pool \"No_Good\" gives `controlPlane`, which the cluster's pools share"
        ),
        "{text}"
    );
    assert!(
        text.contains("the pools take 5 nodes (big 3, big 2, No_Good 0) but the lab has 4"),
        "{text}"
    );
}

#[test]
fn what_means_one_pool_of_several_must_name_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 5 }}\n{IMAGES}{POOLS}steps:\n  - update: {{ os: \"1.1.0\" }}\n  - waitUntil: {{ until: rolloutHalted, within: 1h }}\n  - update: {{ pool: smal, os: \"1.1.0\" }}\nexpect:\n  - never: {{ pool: {{ name: big, that: {{ node: {{ name: node-1, is: failed }} }} }} }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains(
            "s.yaml:9:19: `update` does not say which pool, and the scenario has several"
        ),
        "{text}"
    );
    assert!(text.contains("help: name one of big, small"), "{text}");
    assert!(
        text.contains(
            "s.yaml:10:25: `rolloutHalted` does not say which pool, and the scenario has several"
        ),
        "{text}"
    );
    assert!(
        text.contains("help: write `pool: { name: big, that: rolloutHalted }`"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:11:21: no pool named \"smal\""),
        "{text}"
    );
    assert!(text.contains("did you mean \"small\"?"), "{text}");
    assert!(
        text.contains("s.yaml:13:39: `pool.that` is not a condition about a pool"),
        "{text}"
    );
}

#[test]
fn several_pools_run_on_sim_only_and_select_needs_a_manual_pool() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "backends: [sim, qemu]\nlab: {{ nodes: 5 }}\n{IMAGES}{POOLS}steps:\n  - select: [node-1]\n  - select: [node-4]\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:7:3: several pools run on `sim` only for now, but the scenario names backend `qemu`"),
        "{text}"
    );
    assert!(
        text.contains(
            "s.yaml:10:14: `select`/`unselect` apply to pools with strategy `ManualInPlaceUpdate`"
        ),
        "{text}"
    );
    assert!(
        !text.contains("s.yaml:11:14"),
        "node-4 is in the Manual pool: {text}"
    );
}

#[test]
fn a_workload_name_is_used_once_across_the_scenario_and_its_pools() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 4 }}\n{IMAGES}workloads: [ {{ pods: {{ name: web }} }} ]\npools:\n  - {{ name: big, strategy: AutoInPlaceUpdate, size: 2, os: \"1.0.0\", kubernetes: \"1.34.2\", workloads: [ {{ daemonSet: {{ name: web }} }} ] }}\n  - {{ name: small, strategy: AutoInPlaceUpdate, size: 2, os: \"1.0.0\", kubernetes: \"1.34.2\", workloads: [ {{ pods: {{ name: cache }} }} ] }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains(
            "s.yaml:7:5: pool \"big\" has a workload named \"web\", a name already taken"
        ),
        "{text}"
    );
    assert!(!text.contains("cache"), "{text}");
}

#[test]
fn scale_and_maintenance_operation_name_their_pool_in_the_long_form() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 6 }}\n{IMAGES}{POOLS}steps:\n  - scale: {{ pool: small, nodes: 3 }}\n  - maintenanceOperation: {{ pool: big, operation: rotate-credentials-start }}\n"
        ),
    );
    let scenario = load(&file).unwrap_or_else(|e| panic!("{e}")).scenario;
    match &scenario.steps[0] {
        Step::Scale(scale) => {
            assert_eq!(scale.pool.as_ref().unwrap().value, "small");
            assert_eq!(*scale.nodes, 3);
        }
        other => panic!("{other:?}"),
    }
    match &scenario.steps[1] {
        Step::MaintenanceOperation(op) => {
            assert_eq!(op.pool.as_ref().unwrap().value, "big");
            assert_eq!(op.operation.value, "rotate-credentials-start");
            assert_eq!((op.operation.at.line, op.operation.at.column), (10, 51));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_short_forms_still_load_with_one_pool() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{IMAGES}pool: {{ strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\nsteps:\n  - scale: 2\n  - maintenanceOperation: rotate-ca-start\n"
        ),
    );
    let scenario = load(&file).unwrap_or_else(|e| panic!("{e}")).scenario;
    assert!(matches!(&scenario.steps[0], Step::Scale(s) if s.pool.is_none() && *s.nodes == 2));
    match &scenario.steps[1] {
        Step::MaintenanceOperation(op) => {
            assert!(op.pool.is_none());
            assert_eq!(op.operation.value, "rotate-ca-start");
            assert_eq!((op.operation.at.line, op.operation.at.column), (8, 27));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn scale_and_maintenance_operation_without_a_known_pool_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 6 }}\n{IMAGES}{POOLS}steps:\n  - scale: 4\n  - maintenanceOperation: rotate-ca-start\n  - scale: {{ pool: smal, nodes: 1 }}\n  - maintenanceOperation: {{ pool: bigg, operation: rotate-ca-start }}\n  - scale: {{ nodes: 2 }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:9:12: `scale` does not say which pool, and the scenario has several"),
        "{text}"
    );
    assert!(
        text.contains("help: write `scale: { pool: big, nodes: 4 }`"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:10:27: `maintenanceOperation` does not say which pool, and the scenario has several"),
        "{text}"
    );
    assert!(
        text.contains(
            "help: write `maintenanceOperation: { pool: big, operation: rotate-ca-start }`"
        ),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:11:20: no pool named \"smal\""),
        "{text}"
    );
    assert!(text.contains("did you mean \"small\"?"), "{text}");
    assert!(
        text.contains("s.yaml:12:35: no pool named \"bigg\""),
        "{text}"
    );
    assert!(text.contains("did you mean \"big\"?"), "{text}");
    assert!(
        text.contains("s.yaml:13:21: `scale` does not say which pool"),
        "{text}"
    );
    assert!(!text.contains("is for a scenario with one pool"), "{text}");
}

#[test]
fn a_malformed_scale_or_maintenance_operation_is_refused_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    for (step, wanted) in [
        ("scale: { pool: small, count: 4 }", "unknown field `count`"),
        ("scale: { pool: small }", "missing field `nodes`"),
        ("scale: -1", "a node count"),
        ("scale: [4]", "a node count"),
        (
            "maintenanceOperation: { pool: small, op: rotate-ca-start }",
            "unknown field `op`",
        ),
        ("maintenanceOperation: [rotate-ca-start]", "an operation"),
    ] {
        let file = write(
            dir.path(),
            "s.yaml",
            &format!("lab: {{ nodes: 6 }}\n{IMAGES}{POOLS}steps:\n  - {step}\n"),
        );
        let text = errors(load(&file));
        assert!(text.contains("s.yaml:9:"), "{step}: {text}");
        assert!(text.contains(wanted), "{step}: {text}");
    }
}
