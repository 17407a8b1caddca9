//! Verdict parity of the embedded API server with a real control plane: every scenario in
//! `scenarios/` meant for both `embedded` and `local` runs on `sim` against each, and the two
//! runs must agree on the verdict and on each node's sequence of states (timings aside: one run
//! is in virtual time, the other on the wall clock). A difference fails the test with both
//! sequences; it is fixed in the embedded server or written down in docs/engine.md as deliberate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use rackproof_harness::engine::timeline::{EntryKind, Timeline};
use rackproof_harness::engine::{self, RunResult};
use rackproof_harness::load::{self, LoadedScenario};
use rackproof_harness::scenario::{Backend, ClusterKind};

fn scenarios_dir() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../scenarios")
}

/// Each node's states in order, a state repeated back to back kept once.
fn node_states(timeline: &Timeline) -> BTreeMap<String, Vec<String>> {
    let mut states: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in timeline.of(EntryKind::NodeState) {
        let Some(node) = &entry.node else { continue };
        let sequence = states.entry(node.clone()).or_default();
        if sequence.last() != Some(&entry.text) {
            sequence.push(entry.text.clone());
        }
    }
    states
}

fn run(loaded: &LoadedScenario, cluster: ClusterKind) -> Result<RunResult, Failed> {
    let mut loaded = loaded.clone();
    loaded.scenario.cluster = cluster.cluster();
    engine::run_scenario_with(&loaded, Backend::Sim, engine::RunOptions::default())
        .map_err(|e| Failed::from(format!("{} run: {e}", cluster.as_str())))
}

fn compare(loaded: &LoadedScenario) -> Result<(), Failed> {
    let embedded = run(loaded, ClusterKind::Embedded)?;
    let local = run(loaded, ClusterKind::Local)?;
    let mut differences = Vec::new();
    if embedded.verdict != local.verdict {
        differences.push(format!(
            "verdict: embedded {} ({}), local {} ({})",
            embedded.verdict.as_str(),
            embedded.failures.join("; "),
            local.verdict.as_str(),
            local.failures.join("; ")
        ));
    }
    let (on_embedded, on_local) = (
        node_states(&embedded.timeline),
        node_states(&local.timeline),
    );
    for node in on_embedded
        .keys()
        .chain(on_local.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (a, b) = (on_embedded.get(node), on_local.get(node));
        if a != b {
            differences.push(format!(
                "{node}: embedded {}; local {}",
                a.map_or("-".to_owned(), |s| s.join(" → ")),
                b.map_or("-".to_owned(), |s| s.join(" → "))
            ));
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(Failed::from(differences.join("\n")))
    }
}

fn trials() -> Vec<Trial> {
    let files = match load::discover(&[scenarios_dir()]) {
        Ok(files) => files,
        Err(e) => {
            return vec![Trial::test("parity::discover", move || {
                Err(Failed::from(e.to_string()))
            })];
        }
    };
    let mut trials = Vec::new();
    for file in files {
        let Ok(loaded) = load::load(&file) else {
            // The scenario matrix reports files that do not load.
            continue;
        };
        let runs = loaded.scenario.runs();
        let on_both = [ClusterKind::Embedded, ClusterKind::Local]
            .iter()
            .all(|c| runs.contains(&(Backend::Sim, *c)));
        if on_both {
            let name = format!("parity::{}", loaded.name);
            trials.push(Trial::test(name, move || compare(&loaded)));
        }
    }
    trials
}

fn main() {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
}
