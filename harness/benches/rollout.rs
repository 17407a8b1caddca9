//! Benchmark: the 1,000-node simulated Auto rollout (`scenarios/large-rollout.yaml`, which the
//! scenario matrix also runs as `sim::large-rollout`), its wall time against the virtual time it
//! covers. Run by `ci/bench`; prints one line per size and the ratio (goal: at least 100× faster
//! than real time with 1,000 nodes). The same scenario also runs with 200 nodes, side by side, to show how the
//! cost grows with the node count.
//!
//! Each size runs twice: with the simulation's boot stages (a VM's pace: 10 s from power-on to
//! the OS) and with a bare-metal server's (`lab.bootTiming`: 3 min of POST and firmware, 2 s of
//! loader, 20 s of kernel), since the time a rollout covers depends mostly on how long its
//! machines take to boot.
//!
//! `cargo bench -p rackproof-harness --bench rollout -- 1000` runs only the given sizes.

use std::path::Path;
use std::time::Duration;

use rackproof_clock::{Clock, format_duration};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::{self, LoadedScenario};
use rackproof_harness::scenario::{Backend, BootTiming, Span};

/// The allocator `rackproof` runs with (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_SIZES: [u32; 2] = [200, 1000];

/// A bare-metal server's boot: minutes of POST and firmware before the loader.
fn bare_metal() -> BootTiming {
    BootTiming {
        firmware: Some(Span(Duration::from_secs(180))),
        loader: Some(Span(Duration::from_secs(2))),
        kernel: Some(Span(Duration::from_secs(20))),
    }
}

fn run(loaded: &LoadedScenario, nodes: u32, boot_timing: Option<BootTiming>) -> Result<(), String> {
    let mut loaded = loaded.clone();
    loaded.scenario.lab.nodes = Some(nodes);
    loaded.scenario.lab.names = None;
    loaded.scenario.lab.boot_timing = boot_timing;
    let boots = if boot_timing.is_some() {
        "bare-metal boots"
    } else {
        "VM-paced boots"
    };
    let wall = Clock::wall();
    let started = wall.instant();
    let result = engine::run_scenario(&loaded, Backend::Sim).map_err(|e| format!("error: {e}"))?;
    let took = wall.since(started);
    if result.verdict != Verdict::Passed {
        return Err(format!(
            "the {nodes}-node scenario did not pass: {:?}",
            result.failures
        ));
    }
    let ratio = result.elapsed.as_secs_f64() / took.as_secs_f64().max(f64::EPSILON);
    println!(
        "rollout of {} simulated nodes, {boots}: virtual {} in wall {:.2}s: {ratio:.1}x faster than real time{}",
        result.nodes.len(),
        format_duration(result.elapsed),
        took.as_secs_f64(),
        if nodes == 1000 {
            " (goal: >= 100x)"
        } else {
            ""
        }
    );
    Ok(())
}

fn main() {
    let path =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../scenarios/large-rollout.yaml");
    let loaded = match load::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // `cargo bench` passes `--bench`; any numbers are node counts.
    let mut sizes = Vec::new();
    for arg in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        match arg.parse::<u32>() {
            Ok(n) if n > 0 => sizes.push(n),
            _ => {
                eprintln!("rollout: {arg:?} is not a node count; usage: rollout [NODES]...");
                std::process::exit(2);
            }
        }
    }
    if sizes.is_empty() {
        sizes = DEFAULT_SIZES.to_vec();
    }
    for nodes in sizes {
        for boot_timing in [None, Some(bare_metal())] {
            if let Err(e) = run(&loaded, nodes, boot_timing) {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
}
