//! Loading scenario files: includes, precise errors with file:line:column, "did you mean".

use std::path::Path;

use rackproof_harness::load::{LoadError, load};
use rackproof_harness::scenario::{BootBehaviour, Step};

mod maintenance;
mod pools;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

const LAB: &str = "backend: sim\nnodes: 3\n";
const BODY: &str = "images:\n  - version: \"1.0.0\"\n  - version: \"1.1.0\"\n    boot: panics\npool:\n  strategy: AutoInPlaceUpdate\n  os: \"1.0.0\"\n  kubernetes: \"1.34.2\"\n";

fn errors(result: Result<rackproof_harness::load::LoadedScenario, LoadError>) -> String {
    match result {
        Ok(_) => panic!("the scenario should have been refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn includes_resolve_relative_to_the_including_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "parts/lab.yaml", LAB);
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: !include parts/lab.yaml\n{BODY}steps:\n  - update: {{ os: \"1.1.0\" }}\n"),
    );
    let loaded = load(&file).unwrap();
    assert_eq!(loaded.name, "s");
    assert_eq!(
        loaded.scenario.lab.node_names(),
        ["node-1", "node-2", "node-3"]
    );
    assert_eq!(loaded.scenario.images[1].boot, BootBehaviour::Panics);
    assert!(
        matches!(&loaded.scenario.steps[0], Step::Update(u) if u.os.as_ref().unwrap().value == "1.1.0")
    );
    assert_eq!(
        loaded
            .scenario
            .first_pool()
            .machine_in_place_update_timeout
            .to_string(),
        "10m"
    );
}

#[test]
fn merge_key_includes_can_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "pool.yaml",
        "strategy: AutoInPlaceUpdate\nos: \"1.0.0\"\nkubernetes: \"1.34.2\"\nmaxUnavailable: 1\n",
    );
    let file = write(
        dir.path(),
        "s.yaml",
        "lab: { nodes: 4 }\nimages: [ { version: \"1.0.0\" } ]\npool:\n  <<: !include pool.yaml\n  maxUnavailable: 2\n",
    );
    let loaded = load(&file).unwrap();
    assert_eq!(
        loaded
            .scenario
            .first_pool()
            .max_unavailable
            .resolve(4, false),
        2
    );
}

#[test]
fn a_typo_in_an_included_file_points_into_that_file_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "parts/lab.yaml", "backend: sim\nnodez: 3\n");
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: !include parts/lab.yaml\n{BODY}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("parts/lab.yaml:2:1: unknown field `nodez`"),
        "{text}"
    );
    assert!(text.contains("did you mean `nodes`?"), "{text}");
}

#[test]
fn an_unknown_step_names_the_allowed_steps() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2 }}\n{BODY}steps:\n  - updte: {{ os: \"1.1.0\" }}\n"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:11:5: unknown value `updte`"),
        "{text}"
    );
    assert!(text.contains("did you mean `update`?"), "{text}");
    assert!(text.contains("`waitUntil`"), "{text}");
}

#[test]
fn unknown_nodes_and_versions_point_at_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - update: {{ os: \"1.2.0\" }}\n  - clearFailed: [node-9]\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:11:19: the update's OS version \"1.2.0\" is not among `images`"),
        "{text}"
    );
    assert!(text.contains("did you mean \"1.1.0\"?"), "{text}");
    assert!(
        text.contains("s.yaml:12:19: no node named \"node-9\" in the lab"),
        "{text}"
    );
}

/// A node's agent and kubelet are killed one node at a time: `kill` without `node` is refused
/// where the component is written.
#[test]
fn killing_a_nodes_kubelet_or_agent_needs_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}faults:\n  - when: {{ after: 1m }}\n    do: {{ kill: {{ component: kubelet }} }}\n  - when: {{ after: 2m }}\n    do: {{ kill: {{ component: agent, restartAfter: 1m }} }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:12:30: `kill` of the kubelet needs `node`"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:14:30: `kill` of the agent needs `node`"),
        "{text}"
    );
    assert!(text.contains("`node: node-2`"), "{text}");
}

#[test]
fn durations_need_units_and_bad_values_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2 }}\n{BODY}  machineDrainTimeout: 7200\n"),
    );
    let text = errors(load(&file));
    assert!(text.contains("s.yaml:10:24"), "{text}");
    assert!(text.contains("has no unit"), "{text}");
}

#[test]
fn boot_timing_overrides_only_the_stages_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2, bootTiming: {{ firmware: 3m, kernel: 20s }} }}\n{BODY}"),
    );
    let loaded = load(&file).unwrap();
    let timing = rackproof_harness::engine::boot_timing(&loaded.scenario);
    assert_eq!(timing.firmware, std::time::Duration::from_secs(180));
    assert_eq!(timing.kernel, std::time::Duration::from_secs(20));
    assert_eq!(
        timing.loader,
        rackproof_lab::sim::BootTiming::default().loader
    );
}

#[test]
fn boot_timing_refuses_instant_stages_and_other_backends() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2, bootTiming: {{ loader: 0s }} }}\n{BODY}"),
    );
    let text = errors(load(&file));
    assert!(text.contains("`lab.bootTiming.loader` is 0s"), "{text}");
    let file = write(
        dir.path(),
        "q.yaml",
        &format!("lab: {{ backend: qemu, nodes: 2, bootTiming: {{ firmware: 3m }} }}\n{BODY}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("`lab.bootTiming` is for simulated machines, but the backend is `qemu`"),
        "{text}"
    );
    let file = write(
        dir.path(),
        "t.yaml",
        &format!("lab: {{ nodes: 2, bootTiming: {{ firmwre: 3m }} }}\n{BODY}"),
    );
    let text = errors(load(&file));
    assert!(text.contains("did you mean `firmware`?"), "{text}");
}

#[test]
fn select_is_refused_for_auto_pools() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2 }}\n{BODY}steps:\n  - select: [node-1]\n"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("apply to pools with strategy `ManualInPlaceUpdate`"),
        "{text}"
    );
}

#[test]
fn max_unavailable_and_max_surge_both_zero_is_refused_by_the_pool_rules() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 3 }}\n{BODY}  maxUnavailable: 0\n  maxSurge: 0\n"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:10:19: the worker pool rules refuse this (SurgeAndUnavailableZero): maxSurge and maxUnavailable are both zero"),
        "{text}"
    );
    assert!(text.contains("help: set maxUnavailable"), "{text}");
}

#[test]
fn an_update_that_skips_a_kubernetes_minor_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - update: {{ os: \"1.1.0\" }}\n  - update: {{ kubernetes: \"1.36.0\" }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:12:27: the worker pool rules refuse this (MinorVersionSkip): kubernetes version 1.34.2 → 1.36.0 skips a minor version"),
        "{text}"
    );
    assert!(text.contains("help: update to 1.35.x first"), "{text}");
}

#[test]
fn a_control_plane_too_far_ahead_of_the_pool_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 3 }}\n{BODY}steps:\n  - update: {{ controlPlane: \"1.37.0\" }}\n"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:11:29: the worker pool rules refuse this (ControlPlaneSkew): version 1.34.2 is more than two minor versions below the control plane's 1.37.0"),
        "{text}"
    );
}

#[test]
fn refused_steps_that_expect_it_leave_the_pool_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - update: {{ kubernetes: \"1.36.0\", expectRefused: MinorVersionSkip }}\n  - update: {{ kubernetes: \"1.35.0\" }}\n"
        ),
    );
    load(&file).unwrap();
}

#[test]
fn a_rolling_pool_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let body = BODY.replace("AutoInPlaceUpdate", "AutoRollingUpdate");
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 3 }}\n{body}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:7:13: strategy `AutoRollingUpdate` replaces machines, and rackproof tests only the in-place update path"),
        "{text}"
    );
    assert_eq!(text.matches("error:").count(), 1, "only the reason: {text}");
}

#[test]
fn validate_exits_2_on_what_the_pool_rules_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 3 }}\n{BODY}  maxUnavailable: 0\n  maxSurge: 0\n"),
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rackproof"))
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("s.yaml:10:19:"), "{stderr}");
    assert!(stderr.contains("SurgeAndUnavailableZero"), "{stderr}");
}

#[test]
fn every_shipped_scenario_loads() {
    let root =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../scenarios");
    let files = rackproof_harness::load::discover(&[root]).unwrap();
    assert!(!files.is_empty());
    for file in files {
        if let Err(e) = load(&file) {
            panic!("{} does not load:\n{e}", file.display());
        }
    }
}

#[test]
fn the_committed_schema_matches_the_model() {
    let committed = std::fs::read_to_string(
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("scenario.schema.json"),
    )
    .unwrap();
    assert_eq!(
        committed.trim_end(),
        rackproof_harness::schema::scenario_schema(),
        "harness/scenario.schema.json is stale: regenerate it with `cargo run -p rackproof-harness -- schema > harness/scenario.schema.json`"
    );
}

/// Runs `rackproof validate` on one file: its exit code and what it printed on stderr.
fn validate_with_the_binary(file: &Path) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rackproof"))
        .arg("validate")
        .arg(file)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The file's path as the binary prints it, followed by `:line:column:`.
fn located_in(stderr: &str, file: &Path, line: u64, column: u64) -> bool {
    stderr.contains(&format!("{}:{line}:{column}: ", file.display()))
}

#[test]
fn durations_too_long_to_represent_are_refused_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "timeout.yaml",
            format!(
                "lab: {{ nodes: 2 }}\n{BODY}  machineInPlaceUpdateTimeout: 99999999999999999999h\n"
            ),
            10,
            32,
        ),
        (
            "sleep.yaml",
            format!("lab: {{ nodes: 2 }}\n{BODY}steps:\n  - sleep: 99999999999999999999999ms\n"),
            11,
            12,
        ),
        (
            "within.yaml",
            format!(
                "lab: {{ nodes: 2 }}\n{BODY}steps:\n  - waitUntil: {{ until: rolloutComplete, within: 10000000000000000000s10000000000000000000s }}\n"
            ),
            11,
            50,
        ),
        (
            "century.yaml",
            format!("timeout: 40000d\nlab: {{ nodes: 2 }}\n{BODY}"),
            1,
            10,
        ),
    ];
    for (name, text, line, column) in cases {
        let file = write(dir.path(), name, &text);
        let (code, stderr) = validate_with_the_binary(&file);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(located_in(&stderr, &file, line, column), "{name}: {stderr}");
        assert!(stderr.contains("too long"), "{name}: {stderr}");
    }
}

#[test]
fn unknown_yaml_tags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("description: !frobnicate hello\nlab: {{ nodes: 2 }}\n{BODY}"),
    );
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 1, 26), "{stderr}");
    assert!(stderr.contains("`!frobnicate`"), "{stderr}");
    assert!(stderr.contains("!include"), "{stderr}");
}

#[test]
fn an_empty_file_is_refused_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "s.yaml", "");
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 1, 1), "{stderr}");
    assert!(stderr.contains("empty"), "{stderr}");
}

#[test]
fn bytes_that_are_not_utf8_are_refused_where_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let mut bytes = format!("lab: {{ nodes: 2 }}\n{BODY}description: \"ab").into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b"\"\n");
    std::fs::write(&file, bytes).unwrap();
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 10, 17), "{stderr}");
    assert!(stderr.contains("UTF-8"), "{stderr}");
}

#[test]
fn a_non_finite_fraction_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: {{ nodes: 2 }}\n{BODY}watchdog:\n  nodeLeaseFailureFraction: .nan\n"),
    );
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 11, 29), "{stderr}");
    assert!(stderr.contains("between 0 and 1"), "{stderr}");
}

#[test]
fn a_missing_include_names_the_file_on_one_line_where_it_is_included() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("lab: !include parts/missing.yaml\n{BODY}"),
    );
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 1, 15), "{stderr}");
    assert!(stderr.contains("parts/missing.yaml"), "{stderr}");
    assert!(!stderr.contains("\\n"), "{stderr}");
    assert!(!stderr.contains("<input>"), "{stderr}");
}

#[test]
fn a_key_given_twice_is_explained_for_a_scenario_author() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("description: one\nlab: {{ nodes: 2 }}\n{BODY}description: two\n"),
    );
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 11, 1), "{stderr}");
    assert!(stderr.contains("`description` is given twice"), "{stderr}");
    assert!(!stderr.contains("DuplicateKeyPolicy"), "{stderr}");
    assert!(!stderr.contains("Options"), "{stderr}");
}

#[test]
fn replicas_and_leaders_are_refused_where_they_are_written_with_the_instances_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "none.yaml",
        &format!("lab: {{ nodes: 3 }}\ncomponents: {{ replicas: 0 }}\n{BODY}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("none.yaml:2:25: `components.replicas` is 0"),
        "{text}"
    );
    assert!(text.contains("set it to `off`"), "{text}");

    let leader = "expect:\n  - eventually: { that: { leader: { of: watchdog, is: watchdog-3 } }, within: 1m }\n";
    let file = write(
        dir.path(),
        "leader.yaml",
        &format!("lab: {{ nodes: 3 }}\ncomponents: {{ replicas: 2 }}\n{BODY}{leader}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("leader.yaml:12:55: \"watchdog-3\" is not an instance of the watchdog"),
        "{text}"
    );
    assert!(text.contains("watchdog-1, watchdog-2"), "{text}");

    let file = write(
        dir.path(),
        "single.yaml",
        &format!("lab: {{ nodes: 3 }}\n{BODY}{leader}"),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("`leader` needs several instances, but `components.replicas` is 1"),
        "{text}"
    );
}

#[test]
fn boot_failures_and_published_builds_name_a_version_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - fault: {{ bootFailure: {{ node: node-2, version: \"1.1.0\", boot: ok }} }}\n  - publish: {{ version: \"1.1.0\" }}\n  - publish: {{ version: \"1.0.0\", boot: hangs }}\n"
        ),
    );
    let loaded = load(&file).unwrap_or_else(|e| panic!("{e}"));
    let steps = serde_json::to_value(&loaded.scenario.steps).unwrap();
    assert_eq!(
        steps,
        serde_json::json!([
            { "fault": { "bootFailure": { "node": "node-2", "version": "1.1.0", "boot": "ok" } } },
            { "publish": { "version": "1.1.0", "boot": "ok" } },
            { "publish": { "version": "1.0.0", "boot": "hangs" } },
        ]),
        "a published build boots `ok` unless it says otherwise"
    );
}

#[test]
fn boot_failures_and_published_builds_are_refused_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - fault: {{ bootFailure: {{ node: node-2, version: \"1.2.0\", boot: panics }} }}\n  - publish: {{ version: \"1.1\" }}\n"
        ),
    );
    let text = errors(load(&file));
    assert!(
        text.contains("s.yaml:11:52: the boot failure's version \"1.2.0\" is not among `images`"),
        "{text}"
    );
    assert!(
        text.contains("s.yaml:12:25: the published version \"1.1\" is not among `images`"),
        "{text}"
    );
    assert!(text.contains("did you mean \"1.1.0\"?"), "{text}");

    let missing = write(
        dir.path(),
        "missing.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}faults:\n  - when: {{ after: 0s }}\n    do: {{ bootFailure: {{ node: node-2, boot: panics }} }}\n"
        ),
    );
    let text = errors(load(&missing));
    assert!(
        text.contains("missing.yaml:12:40: missing field `version`"),
        "{text}"
    );

    let bad_boot = write(
        dir.path(),
        "bad-boot.yaml",
        &format!(
            "lab: {{ nodes: 3 }}\n{BODY}steps:\n  - publish: {{ version: \"1.1.0\", boot: explodes }}\n"
        ),
    );
    let text = errors(load(&bad_boot));
    assert!(text.contains("bad-boot.yaml:11:40:"), "{text}");
    assert!(text.contains("`panics`"), "{text}");
}
