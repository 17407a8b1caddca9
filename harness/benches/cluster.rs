//! Benchmark: the same short simulated scenario (`scenarios/kubelet-patch-no-drain.yaml`, four
//! nodes) against the embedded API server and against a local control plane (etcd,
//! kube-apiserver and kube-controller-manager v1.20.2), in turns, in one process. Prints each
//! run's wall time and the time the scenario covered, then the ratio of the medians: what a
//! verdict a real control plane has seen costs against the everyday one. Run by
//! `ci/bench cluster`, which installs the control plane first; `RACKPROOF_BENCH_RUNS` sets the
//! rounds (default 3).

use std::path::Path;
use std::time::Duration;

use rackproof_clock::{Clock, format_duration};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::{self, LoadedScenario};
use rackproof_harness::scenario::{Backend, ClusterKind};

/// The allocator `rackproof` runs with (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SCENARIO: &str = "kubelet-patch-no-drain";

/// One run against `cluster`: its wall time, and the time the scenario covered (virtual on
/// `embedded`, the wall clock on `local`).
fn run_once(loaded: &LoadedScenario, cluster: ClusterKind) -> Result<(f64, Duration), String> {
    let mut loaded = loaded.clone();
    loaded.scenario.cluster = cluster.cluster();
    let wall = Clock::wall();
    let started = wall.instant();
    let result = engine::run_scenario(&loaded, Backend::Sim)
        .map_err(|e| format!("{SCENARIO} against {}: {e}", cluster.as_str()))?;
    let took = wall.since(started).as_secs_f64();
    if result.verdict != Verdict::Passed {
        return Err(format!(
            "{SCENARIO} against {} did not pass: {}",
            cluster.as_str(),
            result.failures.join("; ")
        ));
    }
    Ok((took, result.elapsed))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn rounds() -> usize {
    match std::env::var("RACKPROOF_BENCH_RUNS") {
        Ok(text) => match text.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("RACKPROOF_BENCH_RUNS={text:?}: expected a positive number");
                std::process::exit(2);
            }
        },
        Err(_) => 3,
    }
}

fn main() {
    let rounds = rounds();
    let path =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join(format!("../scenarios/{SCENARIO}.yaml"));
    let loaded = match load::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut embedded = Vec::new();
    let mut local = Vec::new();
    for round in 0..rounds {
        // Alternate which cluster goes first, so neither always runs on a warmer machine.
        let order = if round % 2 == 0 {
            [ClusterKind::Embedded, ClusterKind::Local]
        } else {
            [ClusterKind::Local, ClusterKind::Embedded]
        };
        for cluster in order {
            let (took, covered) = match run_once(&loaded, cluster) {
                Ok(sample) => sample,
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            };
            println!(
                "round {}/{rounds}: {SCENARIO} on sim against {}: wall {took:.2}s, covering {}",
                round + 1,
                cluster.as_str(),
                format_duration(covered)
            );
            match cluster {
                ClusterKind::Embedded => embedded.push(took),
                ClusterKind::Local => local.push(took),
            }
        }
    }
    let (embedded, local) = (median(&mut embedded), median(&mut local));
    println!(
        "{SCENARIO} on sim: embedded {embedded:.2}s, local {local:.2}s (medians of {rounds}): local takes {:.1}x the embedded server's wall time",
        local / embedded.max(f64::EPSILON)
    );
}
