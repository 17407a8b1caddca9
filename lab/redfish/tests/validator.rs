//! DMTF's Redfish Service Validator (PyPI `redfish-service-validator`) against the emulator over
//! HTTPS on loopback, offline (`--skipschema`: the DMTF schema files are not downloaded), with
//! session auth. The run must end with zero failures.
//!
//! Fails (does not skip) when the validator is missing, naming the install command.

#[expect(
    dead_code,
    reason = "the validator test needs only the machine and the account"
)]
mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{PASSWORD, TestMachine, USER};
use rackproof_clock::Clock;
use rackproof_driver::PowerState;

const INSTALL: &str = "pip install redfish-service-validator";

/// The counts from the validator's summary table.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    pass: u32,
    warn: u32,
    fail: u32,
    not_tested: u32,
}

/// Removes ANSI colour sequences (`ESC [ … m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the row after the `| PASS | WARN | FAIL | NOT TESTED |` header.
fn parse_summary(output: &str) -> Option<Summary> {
    let output = strip_ansi(output);
    let lines: Vec<&str> = output.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.contains("PASS") && l.contains("FAIL") && l.contains("NOT TESTED"))?;
    let row = lines[header + 1..]
        .iter()
        .find(|l| l.trim_start().starts_with('|'))?;
    let numbers: Vec<u32> = row
        .split('|')
        .map(|cell| {
            cell.chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
        })
        .filter(|digits| !digits.is_empty())
        .map(|digits| digits.parse().ok())
        .collect::<Option<_>>()?;
    match numbers[..] {
        [pass, warn, fail, not_tested] => Some(Summary {
            pass,
            warn,
            fail,
            not_tested,
        }),
        _ => None,
    }
}

#[test]
fn the_summary_parser_reads_the_validators_table() {
    let output = "+----+\n|      PASS      |      WARN      |      FAIL      |   NOT TESTED   |\n+----+\n\
                  |      \u{1b}[32m120\u{1b}[0m       |       3        |       0        |       7        |\n";
    assert_eq!(
        parse_summary(output),
        Some(Summary {
            pass: 120,
            warn: 3,
            fail: 0,
            not_tested: 7
        })
    );
    assert_eq!(parse_summary("no table"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dmtf_service_validator_reports_zero_failures() {
    let program = "rf_service_validator";
    let found = std::process::Command::new(program)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        found.is_ok_and(|s| s.success()),
        "DMTF's Redfish Service Validator (`{program}`) is not installed; install it with `{INSTALL}`"
    );

    let machine = TestMachine::new(PowerState::On);
    let emulator = common::emulator(machine, Clock::wall());
    let running = emulator
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(program)
        .args([
            "--rhost",
            &running.url(),
            "--user",
            USER,
            "--password",
            PASSWORD,
            "--authtype",
            "Session",
        ])
        .args(["--skipschema", "--timeout", "10"])
        .arg("--logdir")
        .arg(work.path().join("reports"))
        .arg("--schema_directory")
        .arg(work.path().join("schemas"))
        .current_dir(work.path())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{program}` ({e}); install it with `{INSTALL}`"));
    let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("the validator ran for more than 5 minutes")
        .expect("the validator's output is readable");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let failures: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("FAIL") || l.contains("ERROR"))
        .collect();
    let summary = parse_summary(&stdout)
        .unwrap_or_else(|| panic!("no summary in the validator's output:\n{stdout}\n{stderr}"));
    assert_eq!(
        summary.fail,
        0,
        "validator failures:\n{}\n\nfull output:\n{stdout}\n{stderr}",
        failures.join("\n")
    );
    assert!(
        output.status.success(),
        "the validator exited with {}:\n{stdout}\n{stderr}",
        output.status
    );
    // Offline, the validator has no schema files: it checks that every resource it can reach
    // answers 200 with a JSON object and a well-formed `@odata.type`, and warns once per resource
    // that it cannot find the schema. Any other warning is a defect of the emulator.
    let validated: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("Validating "))
        .collect();
    assert!(
        validated.len() >= 15,
        "the validator reached too few resources: {validated:?}"
    );
    let log = debug_log(&work.path().join("reports"));
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" - WARNING - ") || l.contains(" - ERROR - "))
        .collect();
    let unexpected: Vec<&&str> = warnings
        .iter()
        .filter(|l| !l.contains("Schema Error: Unable to locate the schema definition"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected validator warnings:\n{unexpected:#?}"
    );
    assert_eq!(warnings.len() as u32, summary.warn, "{warnings:#?}");
}

/// The validator's debug log (one per run, in a timestamped report folder).
fn debug_log(reports: &std::path::Path) -> String {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(reports)
        .expect("the validator wrote reports")
        .flatten()
    {
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file
                .file_name()
                .to_string_lossy()
                .starts_with("RedfishServiceValidatorDebug")
            {
                found
                    .push(std::fs::read_to_string(file.path()).expect("the debug log is readable"));
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "expected one debug log under {}",
        reports.display()
    );
    found.remove(0)
}
