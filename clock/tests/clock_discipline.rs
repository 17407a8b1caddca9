//! Fails when any crate in the workspace reads time around `rackproof_clock::Clock`.
//!
//! Clippy's `disallowed-methods` (see `clippy.toml`) catches the same calls in editors; this test
//! runs under `cargo nextest` so CI enforces the rule without a separate clippy pass.

use std::path::{Path, PathBuf};

/// Calls that read the time directly. The clock crate's own `src/lib.rs` is the one exception.
const FORBIDDEN: &[&str] = &[
    "SystemTime::now",
    "Instant::now",
    "Utc::now",
    "Local::now",
    "Timestamp::now",
    "Zoned::now",
    "OffsetDateTime::now",
];

/// Returns `(line number, forbidden call)` for every direct time read in `source`, ignoring
/// comments.
fn violations(source: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (index, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for pattern in FORBIDDEN {
            if code.contains(pattern) {
                found.push((index + 1, *pattern));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name == "target" || name.starts_with('.') {
                continue;
            }
            rust_files(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_crate_reads_time_around_the_clock() {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let workspace = manifest_dir
        .parent()
        .expect("clock crate sits in the workspace");
    let allowed = workspace.join("clock/src/lib.rs");
    let this_file = workspace.join("clock/tests/clock_discipline.rs");
    let mut files = Vec::new();
    rust_files(workspace, &mut files);
    assert!(
        files.len() > 1,
        "found no Rust files under {}",
        workspace.display()
    );
    let mut report = Vec::new();
    for file in files.iter().filter(|f| **f != allowed && **f != this_file) {
        let source = std::fs::read_to_string(file).unwrap_or_default();
        for (line, call) in violations(&source) {
            report.push(format!(
                "{}:{line}: reads time with `{call}`",
                file.strip_prefix(workspace).unwrap_or(file).display()
            ));
        }
    }
    assert!(
        report.is_empty(),
        "read time through rackproof_clock::Clock (ARCHITECTURE.md, \"Time\"), not directly:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_scanner_catches_a_deliberate_system_time_read() {
    let source = "fn f() {\n    let t = std::time::SystemTime::now();\n}\n";
    assert_eq!(violations(source), vec![(2, "SystemTime::now")]);
    let source =
        "let t = jiff::Timestamp::now(); // why not\n// Instant::now() in a comment is fine\n";
    assert_eq!(violations(source), vec![(1, "Timestamp::now")]);
}
