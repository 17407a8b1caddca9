//! The scenario matrix under `cargo nextest`: one test per scenario in `scenarios/` and backend
//! it names (`sim::auto-happy-path`, …). A test passes when the run's verdict is `passed`; its
//! failure message lists what broke and where the artifacts (report, timeline, consoles) are.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use rackproof_harness::engine::{self, Verdict, artifacts};
use rackproof_harness::load;

fn scenarios_dir() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../scenarios")
}

fn trials() -> Vec<Trial> {
    let files = match load::discover(&[scenarios_dir()]) {
        Ok(files) => files,
        Err(e) => return vec![Trial::test("scenarios::discover", move || Err(Failed::from(e.to_string())))],
    };
    let mut trials = Vec::new();
    for file in files {
        let loaded = match load::load(&file) {
            Ok(loaded) => loaded,
            Err(e) => {
                let name = format!("invalid::{}", file.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario"));
                let message = e.to_string();
                trials.push(Trial::test(name, move || Err(Failed::from(message))));
                continue;
            }
        };
        for backend in loaded.scenario.backends.clone() {
            let loaded = loaded.clone();
            let name = format!("{}::{}", backend.as_str(), loaded.name);
            trials.push(Trial::test(name, move || {
                // `rackproof` on the PATH of `run` steps and external components is this build's.
                let tools_dir = Path::new(env!("CARGO_BIN_EXE_rackproof")).parent().map(Path::to_owned);
                let options = engine::RunOptions { live: false, tools_dir };
                let result = engine::run_scenario_with(&loaded, backend, options).map_err(|e| Failed::from(e.to_string()))?;
                let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rackproof-runs").join(&loaded.name).join(backend.as_str());
                let report = artifacts::write_all(&dir, &loaded.name, backend.as_str(), &result).map_err(|e| Failed::from(e.to_string()))?;
                match result.verdict {
                    Verdict::Passed => Ok(()),
                    verdict => Err(Failed::from(format!(
                        "{} after {}:\n  - {}\nreport: {}",
                        verdict.as_str(),
                        rackproof_clock::format_duration(result.elapsed),
                        result.failures.join("\n  - "),
                        report.display()
                    ))),
                }
            }));
        }
    }
    trials
}

fn main() {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
}
