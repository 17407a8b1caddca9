//! Benchmark: the 1,000-node simulated Auto rollout (`harness/benches/large-rollout.yaml`), its wall
//! time against the virtual time it covers. Run by `ci/bench`; prints one line per measure and
//! the ratio (goal: at least 100× faster than real time).

use std::path::Path;

use rackproof_clock::{Clock, format_duration};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load;
use rackproof_harness::scenario::Backend;

fn main() {
    let path = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("benches/large-rollout.yaml");
    let loaded = match load::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let wall = Clock::wall();
    let started = wall.instant();
    let result = match engine::run_scenario(&loaded, Backend::Sim) {
        Ok(result) => result,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let took = wall.since(started);
    if result.verdict != Verdict::Passed {
        eprintln!("the scenario did not pass: {:?}", result.failures);
        std::process::exit(1);
    }
    let nodes = result.nodes.len();
    let ratio = result.elapsed.as_secs_f64() / took.as_secs_f64().max(f64::EPSILON);
    println!("large rollout: {nodes} simulated nodes, virtual {} in wall {:.1}s", format_duration(result.elapsed), took.as_secs_f64());
    println!("large rollout: {ratio:.0}x faster than real time (goal: >= 100x)");
}
