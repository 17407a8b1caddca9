//! Benchmark: one in-place update cycle of a QEMU node against a bare boot of the same image
//! (`harness/benches/qemu-update.yaml`), both measured from one run's timeline:
//!
//! - bare boot: the BMC's power-on at bring-up until the OS reports up (UEFI, systemd-boot,
//!   kernel, init);
//! - update cycle: the `update` step until the node is back in service on the new version (the
//!   orchestrator's drain, the agent's download and slot write, the reboot into the new entry,
//!   the agent's blessing and report, the uncordon).
//!
//! Run by `ci/bench qemu-update`; needs QEMU and the images (`ci/build-images`, run on demand).

use std::path::Path;
use std::time::Duration;

use rackproof_clock::{Clock, format_duration};
use rackproof_harness::engine::timeline::{Entry, EntryKind};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load;
use rackproof_harness::scenario::Backend;

fn at(entries: &[Entry], from: usize, what: impl Fn(&Entry) -> bool) -> Option<(usize, Duration)> {
    entries
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| what(e))
        .map(|(i, e)| (i, Duration::from_millis(e.at_ms)))
}

fn main() {
    let path =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("benches/qemu-update.yaml");
    let loaded = load::load(&path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let wall = Clock::wall();
    let started = wall.instant();
    let result = engine::run_scenario(&loaded, Backend::Qemu).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    if result.verdict != Verdict::Passed {
        eprintln!("the scenario did not pass: {:?}", result.failures);
        std::process::exit(1);
    }
    let entries = &result.timeline.entries;
    let node = |e: &Entry| e.node.as_deref() == Some("node-1");
    let measured = (|| {
        let (i, power_on) = at(entries, 0, |e| {
            node(e) && e.kind == EntryKind::Bmc && e.text.contains("ResetType: On")
        })?;
        let (_, up) = at(entries, i, |e| {
            node(e)
                && e.kind == EntryKind::Lab
                && e.text.starts_with("OS ")
                && e.text.ends_with(" is up")
        })?;
        let (i, update) = at(entries, 0, |e| {
            e.kind == EntryKind::Step && e.text.contains("update the pool")
        })?;
        let (i, _) = at(entries, i, |e| {
            node(e) && e.kind == EntryKind::NodeState && e.text == "updating"
        })?;
        let (_, back) = at(entries, i, |e| {
            node(e) && e.kind == EntryKind::NodeState && e.text == "ready"
        })?;
        Some((up.saturating_sub(power_on), back.saturating_sub(update)))
    })();
    let Some((boot, cycle)) = measured else {
        eprintln!(
            "the timeline lacks the power-on, OS-up, update or back-in-service entries of node-1"
        );
        std::process::exit(1);
    };
    println!(
        "qemu update: bare boot (power-on to OS up)        {:>8}",
        format_duration(boot)
    );
    println!(
        "qemu update: in-place update cycle (step to ready) {:>8}",
        format_duration(cycle)
    );
    println!(
        "qemu update: the update cycle takes {:.1}x a bare boot (run took {:.0}s)",
        cycle.as_secs_f64() / boot.as_secs_f64().max(f64::EPSILON),
        wall.since(started).as_secs_f64()
    );
}
