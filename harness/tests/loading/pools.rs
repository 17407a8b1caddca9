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
