//! The HTML report of a real run, opened by headless Chromium (Debian's
//! `chromium-headless-shell`): it parses into one swimlane per node with its phases, the
//! unavailable chart against `maxUnavailable`, and the verdict; and it renders to a screenshot.

use std::path::Path;
use std::process::Command;

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

    let shot = dir.path().join("report.png");
    let screenshot = format!("--screenshot={}", shot.display());
    let out = run_chromium(&[&screenshot, "--window-size=1200,900"], &report);
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
