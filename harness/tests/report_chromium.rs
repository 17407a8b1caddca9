//! The HTML report opened by headless Chromium (Debian's `chromium-headless-shell`): a real
//! run's report parses into one swimlane per node with its phases, the unavailable chart against
//! `maxUnavailable`, and the verdict; a 1,000-node report into a few lanes, a phase chart and
//! links from its marks to the timeline; both render to screenshots, kept in the tests'
//! artifacts (`$CARGO_TARGET_TMPDIR/report-screenshots/`).

use std::path::Path;
use std::process::Command;

use rackproof_harness::engine::timeline::{EntryKind, Timeline};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::load_str;
use rackproof_harness::scenario::Backend;

const SCENARIO: &str = r#"
lab: { nodes: 3 }
images:
  - version: "1.0.0"
  - version: "1.1.0"
    boot: panics
pool: { strategy: AutoInPlaceUpdate, maxUnavailable: 1, os: "1.0.0", kubernetes: "1.34.2" }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutHalted, within: 1h }
"#;

fn chromium() -> &'static str {
    for candidate in ["chromium-headless-shell", "chromium"] {
        if Command::new(candidate)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return candidate;
        }
    }
    panic!(
        "headless Chromium is missing: install it with `apt-get install -y chromium-headless-shell` (ci/setup does)"
    );
}

fn run_chromium(args: &[&str], report: &Path) -> std::process::Output {
    let url = format!("file://{}", report.display());
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            report.parent().unwrap().join("chromium-profile").display()
        ))
        .args(args)
        .arg(&url)
        .output()
        .expect("chromium runs")
}

#[test]
fn chromium_renders_the_report_of_a_halted_rollout() {
    let loaded = load_str(Path::new("report.yaml"), SCENARIO).unwrap();
    let result = engine::run_scenario(&loaded, Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures);
    let dir = tempfile::tempdir().unwrap();
    let report = engine::artifacts::write_all(dir.path(), "report", "sim", &result).unwrap();

    let dom = run_chromium(&["--dump-dom"], &report);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).unwrap();
    assert!(dom.contains("<svg"), "the chart is in the parsed document");
    for node in ["node-1", "node-2", "node-3"] {
        assert!(
            dom.contains(&format!(">{node}</text>")),
            "a lane for {node}"
        );
    }
    assert!(
        dom.contains(r#"data-phase="failed""#),
        "node-1's failure is drawn"
    );
    assert!(
        dom.contains(r#"data-phase="candidate""#),
        "the waiting candidates are drawn"
    );
    assert!(dom.contains(r#"id="verdict""#) && dom.contains("passed"));

    screenshot(&report, "small.png", "1300,900");
}

/// Renders `report` to `$CARGO_TARGET_TMPDIR/report-screenshots/NAME` and checks it is a PNG with
/// content.
fn screenshot(report: &Path, name: &str, size: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let shot = dir.join(name);
    let _ = std::fs::remove_file(&shot);
    let out = run_chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={size}"),
        ],
        report,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert!(
        png.len() > 20_000,
        "a screenshot with content, not a blank page ({} bytes)",
        png.len()
    );
}

#[test]
fn chromium_renders_a_thousand_node_report_as_waves_with_linked_marks() {
    let nodes: Vec<String> = (1..=1000).map(|i| format!("node-{i}")).collect();
    let mut timeline = Timeline::default();
    let s = std::time::Duration::from_secs;
    timeline.push(s(0), None, EntryKind::Step, "update to 1.1.0");
    for (i, node) in (0u64..).zip(&nodes) {
        timeline.push(s(0), Some(node), EntryKind::NodeState, "ready");
        let start = 60 + i * 3;
        for (offset, phase) in [
            (0, "draining"),
            (20, "drained"),
            (25, "updating"),
            (40, "rebooting"),
            (70, "ready"),
        ] {
            timeline.push(s(start + offset), Some(node), EntryKind::NodeState, phase);
        }
    }
    timeline.push(
        s(800),
        Some("node-77"),
        EntryKind::Fault,
        "power cut during the slot write",
    );
    timeline.canonicalize();
    let html = rackproof_harness::report::render(&rackproof_harness::report::ReportInput {
        scenario: "a thousand nodes",
        backend: "sim",
        verdict: "passed",
        nodes: &nodes,
        max_unavailable: 10,
        duration_ms: 3_200_000,
        failures: &[],
        timeline: &timeline,
    });
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    std::fs::write(&report, &html).unwrap();

    let dom = run_chromium(&["--dump-dom"], &report);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).unwrap();
    assert!(html.len() < 400_000, "{} bytes", html.len());
    assert!(
        dom.contains(">node-77</text>"),
        "the faulted node has a lane of its own"
    );
    assert!(!dom.contains(">node-78</text>"), "the others are grouped");
    assert!(dom.matches(r#"class="group""#).count() >= 2, "wave lanes");
    assert!(
        dom.contains(r#"class="state-area" data-phase="updating""#),
        "the phase chart"
    );
    let fault = dom
        .split(r##"<a href="#entry-"##)
        .find(|a| a.contains(r#"class="fault""#))
        .expect("a linked fault mark");
    let target = fault.split('"').next().unwrap();
    assert!(
        dom.contains(&format!(r#"<tr id="entry-{target}" class="Fault">"#)),
        "the mark's row"
    );
    screenshot(&report, "thousand-nodes.png", "1300,1400");
}
