//! `rackproof run` over several scenarios: runs side by side (`--jobs`), a verdict line per run
//! naming its scenario, and scenarios that cannot run refused before any starts.

use std::path::Path;
use std::process::{Command, Output};

/// A scenario whose only step is a `run` step that marks `mine` and waits up to 10 s for
/// `theirs`: two of them pass only when they run at the same time.
fn waiting_for(mine: &str, theirs: &str) -> String {
    format!(
        r#"lab: {{ nodes: 1 }}
images:
  - version: "1.0.0"
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.34.2"
steps:
  - run:
      command: [sh, -c, 'touch {mine}; for i in $(seq 100); do [ -e {theirs} ] && exit 0; sleep 0.1; done; exit 1']
      expectExit: 0
      timeout: 1m
"#
    )
}

fn rackproof_run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rackproof"))
        .arg("run")
        .arg(dir.join("scenarios"))
        .arg("--artifacts")
        .arg(dir.join("runs"))
        .args(args)
        .output()
        .unwrap()
}

fn scenarios(dir: &Path, files: &[(&str, String)]) {
    let scenarios = dir.join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    for (name, text) in files {
        std::fs::write(scenarios.join(name), text).unwrap();
    }
}

#[test]
fn two_jobs_run_two_scenarios_at_once() {
    let dir = tempfile::tempdir().unwrap();
    scenarios(
        dir.path(),
        &[
            ("left.yaml", waiting_for("left.ready", "right.ready")),
            ("right.yaml", waiting_for("right.ready", "left.ready")),
        ],
    );
    let output = rackproof_run(dir.path(), &["--jobs", "2"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "stdout:\n{stdout}");
    for name in ["left", "right"] {
        assert!(
            stdout.contains(&format!("■ {name} on sim: passed after")),
            "stdout:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("2 scenarios: 2 passed, 0 failed, 0 lab failures"),
        "stdout:\n{stdout}"
    );
}

#[test]
fn one_job_runs_them_one_after_the_other() {
    let dir = tempfile::tempdir().unwrap();
    scenarios(
        dir.path(),
        &[
            ("left.yaml", waiting_for("left.ready", "right.ready")),
            ("right.yaml", waiting_for("right.ready", "left.ready")),
        ],
    );
    let output = rackproof_run(dir.path(), &["--jobs", "1"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The first waits for the second in vain; the second then finds the first's mark.
    assert_eq!(output.status.code(), Some(1), "stdout:\n{stdout}");
    assert!(
        stdout.contains("■ left on sim: failed after"),
        "stdout:\n{stdout}"
    );
    assert!(
        stdout.contains("■ right on sim: passed after"),
        "stdout:\n{stdout}"
    );
}

#[test]
fn a_scenario_that_cannot_run_is_refused_before_any_starts() {
    let dir = tempfile::tempdir().unwrap();
    let kind = waiting_for("b.ready", "a.ready").replace("lab:", "cluster: kind\nlab:");
    scenarios(
        dir.path(),
        &[
            ("a.yaml", waiting_for("a.ready", "a.ready")),
            ("b.yaml", kind),
        ],
    );
    let output = rackproof_run(dir.path(), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains("scenario b cannot run on backend sim") && stderr.contains("kind"),
        "stderr:\n{stderr}"
    );
    assert!(
        !dir.path().join("scenarios/a.ready").exists(),
        "scenario a ran although b was refused"
    );
    assert!(!dir.path().join("runs").exists());
}

#[test]
fn runs_on_an_existing_cluster_are_not_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    scenarios(
        dir.path(),
        &[
            ("a.yaml", waiting_for("a.ready", "a.ready")),
            ("b.yaml", waiting_for("b.ready", "b.ready")),
        ],
    );
    let kubeconfig = dir.path().join("kubeconfig");
    let cluster = format!("kubeconfig={}", kubeconfig.display());
    let output = rackproof_run(dir.path(), &["--jobs", "2", "--cluster", &cluster]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("one at a time"), "stderr:\n{stderr}");
    assert!(!dir.path().join("scenarios/a.ready").exists());
}
