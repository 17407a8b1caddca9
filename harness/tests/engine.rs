//! The engine's own guarantees, on small simulated runs: determinism from the seed, failures
//! reported as failures, lab trouble reported as a lab failure, and backends it cannot drive
//! refused before anything starts.

use std::path::Path;

use rackproof_harness::engine::{self, RunError, Verdict};
use rackproof_harness::load::{LoadedScenario, load_str};
use rackproof_harness::scenario::Backend;
use rackproof_test_support::processes::processes_mentioning;

const BASE: &str = r#"
lab: { nodes: 3 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
pool: { strategy: AutoInPlaceUpdate, os: "1.0.0", kubernetes: "1.34.2" }
workloads:
  - pods: { name: web, perNode: 1, pdbMaxUnavailable: 1 }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutComplete, within: 1h }
"#;

fn scenario(extra: &str) -> LoadedScenario {
    load_str(Path::new("engine-test.yaml"), &format!("{BASE}{extra}"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_same_seed_gives_the_same_timeline() {
    let loaded = scenario("");
    let first = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    let second = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(first.verdict, Verdict::Passed, "{:?}", first.failures);
    let json = |r: &engine::RunResult| serde_json::to_string(&r.timeline).unwrap();
    assert_eq!(json(&first), json(&second));
    assert_eq!(first.elapsed, second.elapsed);
}

#[test]
fn an_expectation_that_does_not_hold_fails_the_run_and_says_which() {
    let loaded = scenario(
        "expect:\n  - eventually: { that: { node: { name: node-2, is: failed } }, within: 30m }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Failed);
    assert!(
        result
            .failures
            .iter()
            .any(|f| f.contains("node-2 is failed") && f.contains("not observed within 30m")),
        "{:?}",
        result.failures
    );
}

#[test]
fn a_step_that_never_comes_true_fails_the_run_with_the_step() {
    let loaded = scenario(
        "faults:\n  - when: { after: 0s }\n    do: { bootFailure: { node: node-1, version: \"1.1.0\", boot: panics } }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Failed);
    assert!(
        result
            .failures
            .iter()
            .any(|f| f.starts_with("step 2") && f.contains("rollout is complete")),
        "{:?}",
        result.failures
    );
}

#[test]
fn a_machine_that_never_powers_on_is_a_lab_failure() {
    let loaded = scenario(
        "faults:\n  - when: { after: 0s }\n    do: { bmc: { node: node-2, quirk: ignorePowerOn } }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::LabFailed);
    assert!(
        result.failures[0].contains("node-2 (not registered)"),
        "{:?}",
        result.failures
    );
    assert!(
        result
            .timeline
            .entries
            .iter()
            .any(|e| e.node.as_deref() == Some("node-2")
                && e.text.contains("stayed off after 3 power-on requests")),
        "the timeline says why"
    );
}

#[test]
fn backends_the_engine_cannot_drive_are_refused_before_anything_starts() {
    let loaded = scenario("");
    let error = engine::run_scenario(&loaded, Backend::Physical).unwrap_err();
    assert!(
        matches!(&error, RunError::Inventory { problem, .. } if problem.contains("--inventory FILE")),
        "{error}"
    );
    let dir = tempfile::tempdir().unwrap();
    let rack = dir.path().join("rack.yaml");
    std::fs::write(&rack, "harness: { address: 192.0.2.1 }\nnodes:\n  - name: node-1\n  - name: node-2\n  - name: node-33\n").unwrap();
    let options = engine::RunOptions {
        inventory: Some(rack.clone()),
        ..engine::RunOptions::default()
    };
    let error = engine::run_scenario_with(&loaded, Backend::Physical, options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("node \"node-3\" is not in inventory")
            && error.contains("did you mean \"node-33\""),
        "{error}"
    );
    std::fs::write(
        &rack,
        "nodes:\n  - name: node-1\n  - name: node-2\n  - name: node-3\n",
    )
    .unwrap();
    let options = engine::RunOptions {
        inventory: Some(rack),
        ..engine::RunOptions::default()
    };
    let error = engine::run_scenario_with(&loaded, Backend::Physical, options)
        .unwrap_err()
        .to_string();
    assert!(error.contains("no `harness` section"), "{error}");
    let partition = scenario(
        "faults:\n  - when: { after: 1m }\n    do: { partition: { node: node-1, for: 1m } }\n",
    );
    let error = engine::run_scenario(&partition, Backend::Libvirt)
        .unwrap_err()
        .to_string();
    assert!(error.contains("set_link"), "{error}");
    let text = BASE.replace(
        "  - version: \"1.0.0\"\n",
        "  - version: \"1.0.0\"\n    boot: hangs\n",
    );
    let broken_base =
        load_str(Path::new("engine-test.yaml"), &text).unwrap_or_else(|e| panic!("{e}"));
    let error = engine::run_scenario(&broken_base, Backend::Qemu)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the installed version 1.0.0 must boot"),
        "{error}"
    );
}

#[test]
fn the_artifacts_hold_the_report_timeline_and_consoles() {
    let loaded = scenario("");
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let report = engine::artifacts::write_all(dir.path(), "engine-test", "sim", &result).unwrap();
    let html = std::fs::read_to_string(report).unwrap();
    assert!(
        html.contains("node-3") && html.contains("<svg"),
        "the report draws the lanes"
    );
    let timeline: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("timeline.json")).unwrap()).unwrap();
    assert!(
        timeline["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["text"] == "updating")
    );
    let console = std::fs::read_to_string(dir.path().join("console/node-1.log")).unwrap();
    assert!(
        console.contains("systemd-boot: selected entry rackproof-1.1.0+3.conf"),
        "{console}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("result.json")).unwrap()).unwrap();
    assert_eq!(summary["verdict"], "passed");
}

#[test]
fn a_run_folder_can_be_summarized_and_its_report_written_again() {
    let loaded = scenario("");
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    let dir = tempfile::tempdir().unwrap();
    engine::artifacts::write_all(dir.path(), "engine-test", "sim", &result).unwrap();
    std::fs::remove_file(dir.path().join("report.html")).unwrap();
    let (summary, report) = engine::artifacts::rerender(dir.path()).unwrap();
    assert_eq!(summary.verdict, "passed");
    assert_eq!(summary.nodes, ["node-1", "node-2", "node-3"]);
    assert!(std::fs::read_to_string(report).unwrap().contains("node-2"));
    let missing = engine::artifacts::rerender(&dir.path().join("nowhere"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("result.json") && missing.contains("rackproof run"),
        "{missing}"
    );
}

/// A one-node scenario whose steps are `steps` (YAML list items).
fn with_steps(steps: &str) -> LoadedScenario {
    let text = format!(
        "lab: {{ nodes: 1 }}\nimages:\n  - version: \"1.0.0\"\npool: {{ strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\nsteps:\n{steps}"
    );
    load_str(Path::new("engine-test.yaml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn run_steps_get_the_cluster_and_their_exit_code_decides_the_step() {
    let loaded = with_steps(concat!(
        "  - run: { command: [sleep, \"1\"] }\n",
        "  - run: { command: [sh, -c, 'grep -q \"server: https://127.0.0.1:\" \"$KUBECONFIG\" && test \"$RACKPROOF_NAMESPACE\" = rackproof && echo checked && exit 3'], expectExit: 3 }\n",
        "  - run: { command: [sh, -c, 'echo out of luck >&2; exit 4'] }\n",
        "  - sleep: 1m\n",
    ));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Failed);
    assert!(
        result.failures.iter().any(|f| f.starts_with("step 3")
            && f.contains("exit code 4, not the expected exit code 0")
            && f.contains("out of luck")),
        "{:?}",
        result.failures
    );
    let entry = |text: &str| {
        result
            .timeline
            .entries
            .iter()
            .find(|e| e.text.starts_with(text))
            .unwrap_or_else(|| panic!("no timeline entry {text:?}"))
    };
    assert!(
        entry("`sh -c grep")
            .text
            .ends_with("exit code 3; output:\nchecked"),
        "{}",
        entry("`sh -c grep").text
    );
    assert_eq!(
        entry("step 1: run sleep 1").at_ms,
        entry("`sleep 1` ended").at_ms,
        "virtual time stands still while a command runs"
    );
    assert!(
        !result
            .timeline
            .entries
            .iter()
            .any(|e| e.text.starts_with("step 4")),
        "the steps stop at the failed one"
    );
}

#[test]
fn a_run_step_past_its_timeout_is_killed_with_its_children() {
    let loaded = with_steps(
        "  - run: { command: [sh, -c, 'sleep 31.4159 & sleep 31.4159'], timeout: 1s }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Failed);
    assert!(
        result
            .failures
            .iter()
            .any(|f| f.contains("did not finish within 1s and was killed")),
        "{:?}",
        result.failures
    );
    let survivors = processes_mentioning("sleep 31.4159");
    assert!(survivors.is_empty(), "left running: {survivors:?}");
}

#[test]
fn a_command_whose_program_is_missing_is_a_lab_failure_naming_it() {
    let loaded = with_steps("  - run: { command: [rackproof-no-such-tool, --help] }\n");
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::LabFailed);
    assert!(
        result.failures[0].contains("`rackproof-no-such-tool` is not found on PATH"),
        "{:?}",
        result.failures
    );
}

#[test]
fn kubectl_in_run_steps_drives_a_manual_update() {
    rackproof_test_support::require_kubectl();
    let file =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kubectl-manual-selection.yaml");
    let loaded = rackproof_harness::load::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    assert!(
        result
            .timeline
            .entries
            .iter()
            .any(|e| e.text.starts_with("`kubectl label node node-2")
                && e.text.contains("node/node-2 labeled"))
    );
}

/// A halt that comes 5 to 15 s after the last step: the run keeps judging for its settle period.
const HALT_AFTER_THE_LAST_STEP: &str = r#"
lab: { nodes: 3 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
    boot: hangs
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.34.2"
  machineInPlaceUpdateTimeout: 10m
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: { anyNode: { are: readyForUpdate } }, within: 10m }
  - sleep: 9m55s
expect:
  - never: rolloutHalted
"#;

#[test]
fn never_holds_through_the_settle_period_after_the_last_step() {
    let loaded = load_str(Path::new("settle.yaml"), HALT_AFTER_THE_LAST_STEP)
        .unwrap_or_else(|e| panic!("{e}"));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(
        result.verdict,
        Verdict::Failed,
        "the halt came during the settle period; timeline: {:?}",
        result.timeline
    );
    assert!(
        result
            .failures
            .iter()
            .any(|f| f.contains("halted") && f.contains("never")),
        "{:?}",
        result.failures
    );
    // Without a settle period the run ends before the halt, and the same scenario passes.
    let unsettled = load_str(
        Path::new("settle.yaml"),
        &format!("{HALT_AFTER_THE_LAST_STEP}settle: 0s\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let result = engine::run_scenario(&unsettled, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
}

#[test]
fn two_power_cuts_on_one_node_are_two_cuts() {
    let loaded = scenario(
        "faults:\n  - when: { nodeReaches: { node: node-2, state: readyForUpdate } }\n    do: { powerCut: { node: node-2, during: slotWrite, powerBackAfter: 1m } }\n  - when: { nodeReaches: { node: node-2, state: readyForUpdate } }\n    do: { powerCut: { node: node-2, during: slotWrite, powerBackAfter: 1m } }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let cuts = result.consoles["node-2"]
        .iter()
        .filter(|line| line.ends_with("firmware: power lost"))
        .count();
    assert_eq!(cuts, 2, "{:#?}", result.consoles["node-2"]);
    let back = result
        .timeline
        .entries
        .iter()
        .filter(|e| e.node.as_deref() == Some("node-2") && e.text == "power is back")
        .count();
    assert_eq!(back, 2, "the timeline reports what happened");
}

#[test]
fn a_clock_start_is_refused_on_the_wall_clock() {
    let mut loaded = scenario("clock: { start: \"2026-03-02T21:00:00Z\" }\n");
    let error = engine::run_scenario(&loaded, Backend::Qemu)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`clock.start` (2026-03-02T21:00:00Z)") && error.contains("wall clock"),
        "{error}"
    );
    loaded.scenario.cluster = rackproof_harness::scenario::Cluster::Local;
    let error = engine::run_scenario(&loaded, Backend::Sim)
        .unwrap_err()
        .to_string();
    assert!(error.contains("`clock.start`"), "{error}");
}

/// Three images, one pool of two nodes, the steps and faults given.
fn three_versions(rest: &str) -> LoadedScenario {
    let text = format!(
        "lab: {{ nodes: 2 }}\nimages:\n  - version: \"1.0.0\"\n  - version: \"1.1.0\"\n  - version: \"1.2.0\"\npool: {{ strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }}\n{rest}"
    );
    load_str(Path::new("engine-test.yaml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_boot_failure_of_one_version_leaves_the_others_booting() {
    let loaded = three_versions(concat!(
        "faults:\n",
        "  - when: { after: 0s }\n",
        "    do: { bootFailure: { node: node-1, version: \"1.1.0\", boot: panics } }\n",
        "steps:\n",
        "  - update: { os: \"1.2.0\" }\n",
        "  - waitUntil: { until: rolloutComplete, within: 1h }\n",
    ));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let console = &result.consoles["node-1"];
    assert!(
        console
            .iter()
            .any(|l| l.ends_with("rackproof-os 1.2.0: up"))
            && !console.iter().any(|l| l.contains("Kernel panic")),
        "node-1 boots 1.2.0 without a panic: {console:#?}"
    );
}

#[test]
fn a_later_fix_of_a_version_already_on_the_esp_takes_effect() {
    let loaded = three_versions(concat!(
        "faults:\n",
        "  - when: { after: 0s }\n",
        "    do: { bootFailure: { node: node-1, version: \"1.1.0\", boot: panics } }\n",
        "steps:\n",
        "  - update: { os: \"1.1.0\" }\n",
        "  - waitUntil: { until: { node: { name: node-1, is: failed } }, within: 1h }\n",
        "  - fault: { bootFailure: { node: node-1, version: \"1.1.0\", boot: ok } }\n",
        "  - clearFailed: [node-1]\n",
        "  - waitUntil: { until: rolloutComplete, within: 1h }\n",
    ));
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let console = &result.consoles["node-1"];
    let panicked = console.iter().position(|l| l.contains("Kernel panic"));
    let up = console
        .iter()
        .position(|l| l.ends_with("rackproof-os 1.1.0: up"));
    assert!(
        matches!((panicked, up), (Some(p), Some(u)) if p < u),
        "node-1's first 1.1.0 panicked, the fixed one came up: {console:#?}"
    );
    // The timeline says what the fault does, and nothing it does not.
    let said: Vec<&str> = result
        .timeline
        .entries
        .iter()
        .filter(|e| e.node.as_deref() == Some("node-1") && e.text.contains("download of 1.1.0"))
        .map(|e| e.text.as_str())
        .collect();
    assert_eq!(said.len(), 2, "{said:#?}");
    assert!(said[1].contains("boots as Ok"), "{said:#?}");
}

#[test]
fn publishing_and_boot_failures_the_node_images_lack_are_refused_before_the_run() {
    let loaded = load_str(
        Path::new("engine-test.yaml"),
        &format!(
            "{}faults:\n  - when: {{ after: 0s }}\n    do: {{ bootFailure: {{ node: node-1, version: \"1.0.0\", boot: panics }} }}\n",
            BASE.replace(
                "  - update: { os: \"1.1.0\" }\n",
                "  - update: { os: \"1.1.0\" }\n  - publish: { version: \"1.1.0\" }\n",
            )
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let error = engine::run_scenario(&loaded, Backend::Qemu)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`bootFailure` of node node-1 names version 1.0.0")
            && error.contains("update target 1.1.0 only"),
        "{error}"
    );
    assert!(
        error.contains("a `publish` step") && error.contains("on `sim`"),
        "{error}"
    );
}

/// The node-1 entries of `result`'s timeline from the first whose text contains `from` up to
/// (not including) the first after it whose text contains `to`.
fn node_1_between<'a>(
    result: &'a engine::RunResult,
    from: &str,
    to: &str,
) -> Vec<&'a rackproof_harness::engine::timeline::Entry> {
    let node_1 = result
        .timeline
        .entries
        .iter()
        .filter(|e| e.node.as_deref() == Some("node-1"));
    node_1
        .skip_while(|e| !e.text.contains(from))
        .take_while(|e| !e.text.contains(to))
        .collect()
}

/// Killing the agent leaves the kubelet running: the node stays Ready while the agent is dead
/// (nothing rebooted), and the agent's restart resumes the update from its saved plan.
#[test]
fn killing_the_agent_leaves_the_node_ready() {
    let loaded = scenario(
        "faults:\n  - when: { nodeReaches: { node: node-1, state: readyForUpdate } }\n    do: { kill: { component: agent, node: node-1, restartAfter: 3m } }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let dead = node_1_between(&result, "agent killed", "agent restarted");
    assert!(
        dead.first()
            .is_some_and(|e| e.text.contains("agent killed")),
        "the agent was killed: {:#?}",
        result.timeline.entries
    );
    let states: Vec<&str> = dead
        .iter()
        .filter(|e| e.kind == rackproof_harness::engine::timeline::EntryKind::NodeState)
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        states.is_empty(),
        "node-1 changed state while only its agent was dead: {states:?}"
    );
}

/// Killing the kubelet stops the heartbeat: the node goes NotReady, and the timeline says so
/// (`notReady`, not `rebooting`, although the node is drained for its update: its agent is
/// killed too, so nothing reboots it); the restarts heal it and the rollout completes.
#[test]
fn killing_the_kubelet_makes_the_node_not_ready_until_it_restarts() {
    let loaded = scenario(
        "faults:\n  - when: { nodeReaches: { node: node-1, state: readyForUpdate } }\n    do: { kill: { component: agent, node: node-1, restartAfter: 3m } }\n  - when: { nodeReaches: { node: node-1, state: readyForUpdate } }\n    do: { kill: { component: kubelet, node: node-1, restartAfter: 3m } }\n",
    );
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let dead = node_1_between(&result, "kubelet killed", "kubelet restarted");
    let states: Vec<&str> = dead
        .iter()
        .filter(|e| e.kind == rackproof_harness::engine::timeline::EntryKind::NodeState)
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        states.first() == Some(&"notReady") && !states.contains(&"rebooting"),
        "node-1 while its kubelet was dead: {states:?} in {:#?}",
        result.timeline.entries
    );
}

/// A run with a fault step after the rollout: node-2 powered off through its BMC.
const POWER_OFF_AFTER_THE_ROLLOUT: &str = r#"
lab: { nodes: 3 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
pool: { strategy: AutoInPlaceUpdate, os: "1.0.0", kubernetes: "1.34.2" }
workloads:
  - pods: { name: web, perNode: 1, pdbMaxUnavailable: 1 }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutComplete, within: 1h }
  - fault: { power: { node: node-2, action: "off" } }
"#;

/// Every line of a run names it; a step's lines name the step (its number in the file, its kind
/// and node); a component's lines name the component (and an agent's its node).
#[test]
fn log_lines_name_the_run_the_step_and_the_component() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let loaded = load_str(Path::new("spans.yaml"), POWER_OFF_AFTER_THE_ROLLOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    engine::run_scenario(&loaded, Backend::Sim).unwrap();
    let run = "run{scenario=spans backend=sim cluster=embedded}";
    let update = logs.line_with("step 1: update the pool");
    assert!(
        update.contains(&format!("{run}:step{{n=1 kind=update}}")),
        "{update}"
    );
    let power = logs.line_with("through the BMC");
    assert!(
        power.contains(&format!("{run}:step{{n=3 kind=power node=node-2}}")),
        "{power}"
    );
    let planned = logs.line_with("new operating system config");
    assert!(
        planned.contains("component{name=agent node=node-")
            && planned.contains("}:agent_pass{node=node-"),
        "{planned}"
    );
    let evicted = logs.line_with("evicted pod");
    assert!(
        evicted.contains(&format!(
            "{run}:component{{name=orchestrator}}:reconcile{{kind=Machine"
        )),
        "{evicted}"
    );
}

/// `rackproof run` logs to stderr (with `RUST_LOG`), each line with its spans; stdout keeps
/// the verdicts alone.
#[test]
fn rackproof_run_logs_span_qualified_lines_on_stderr_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.yaml");
    std::fs::write(&file, POWER_OFF_AFTER_THE_ROLLOUT).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rackproof"))
        .arg("run")
        .arg(&file)
        .arg("--artifacts")
        .arg(dir.path().join("runs"))
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let step = "run{scenario=spans backend=sim cluster=embedded}:step{n=3 kind=power node=node-2}";
    assert!(
        stderr
            .lines()
            .any(|line| line.contains(step) && line.contains("through the BMC")),
        "stderr:\n{stderr}"
    );
    assert!(!stdout.contains("run{scenario="), "stdout:\n{stdout}");
    assert!(stdout.contains("spans"), "stdout:\n{stdout}");
}
