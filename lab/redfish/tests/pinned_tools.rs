//! The CI scripts install every tool the tests run at a pinned version: a new upstream release
//! (such as a stricter redfish-service-validator) must not change what the tests check.

use std::path::Path;

/// The CI scripts that install tools.
const SCRIPTS: [&str; 2] = ["ci/setup", "ci/start-libvirtd"];

fn script(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"))
}

/// The package arguments of each `pip install` and `cargo install` line of `text`.
fn installs(text: &str) -> Vec<(usize, String, Vec<String>)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.windows(2).position(|w| w[1] == "install") else {
            continue;
        };
        let tool = words[at].trim_matches('"');
        if !(tool.ends_with("pip") || tool == "cargo") {
            continue;
        }
        let packages = words[at + 2..]
            .iter()
            .filter(|w| !w.starts_with('-') && !w.starts_with('#'))
            .map(|w| (*w).to_owned())
            .collect();
        found.push((index + 1, line.trim().to_owned(), packages));
    }
    found
}

#[test]
fn every_tool_the_ci_scripts_install_has_a_pinned_version() {
    let mut checked = 0;
    for name in SCRIPTS {
        for (line_number, line, packages) in installs(&script(name)) {
            checked += 1;
            if line.starts_with("cargo ") {
                assert!(
                    line.contains("--version ") && line.contains("--locked"),
                    "{name}:{line_number}: `{line}` installs an unpinned crate: add --locked --version X"
                );
                continue;
            }
            for package in packages {
                assert!(
                    package.contains("=="),
                    "{name}:{line_number}: `{line}` installs {package} unpinned: write {package}==VERSION"
                );
            }
        }
    }
    assert!(
        checked >= 3,
        "the scripts' install lines were not found ({checked})"
    );
}
