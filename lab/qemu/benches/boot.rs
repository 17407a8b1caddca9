//! Benchmark: boot time of a QEMU node (TCG) to its agent's start — UEFI (OVMF) + systemd-boot +
//! kernel + init — against the same slot's kernel and initramfs booted directly (`-kernel`,
//! `-initrd`, `-append`: no UEFI firmware, no boot loader) to the same console line, measured
//! side by side in one run (alternating, so a change in the machine's load hits both), and the
//! ratio of the medians. Run by `ci/bench qemu-boot`; `RACKPROOF_BENCH_RUNS` sets the number of
//! boots of each kind (default 5).

use std::path::Path;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::{Power as _, ResetAction};
use rackproof_qemu::images::BASE_VERSION;
use rackproof_qemu::{DirectBoot, Images, QemuConfig, QemuMachine};
use regex::Regex;

/// Limit for one boot on a loaded machine.
const LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Uefi,
    Direct,
}

/// Seconds from power-on to the init's first line and to the agent's start.
#[derive(Debug, Clone, Copy)]
struct Sample {
    init: f64,
    agent: f64,
}

async fn boot_once(images: &Images, kind: Kind, run: usize) -> Result<Sample, String> {
    let clock = Clock::wall();
    let disk = images.disk(BASE_VERSION).map_err(|e| e.to_string())?;
    let config = QemuConfig::new(&format!("bench-{kind:?}-{run}").to_lowercase(), disk);
    let machine = match kind {
        Kind::Uefi => QemuMachine::create(config, clock.clone()),
        Kind::Direct => {
            let slot = images.slot(BASE_VERSION).map_err(|e| e.to_string())?;
            QemuMachine::create_direct(config, clock.clone(), DirectBoot::of_slot(&slot))
        }
    }
    .map_err(|e| e.to_string())?;
    let init = Regex::new(&format!(
        "^rackproof-os {}: init started",
        regex::escape(BASE_VERSION)
    ))
    .expect("valid pattern");
    let agent = Regex::new("^rackproof-agent: started").expect("valid pattern");
    let console = machine.console().clone();
    let mark = console.mark();
    let started = clock.instant();
    machine
        .reset(ResetAction::On)
        .await
        .map_err(|e| e.to_string())?;
    console
        .wait_for_since(&clock, mark, &init, LIMIT)
        .await
        .map_err(|e| e.to_string())?;
    let init_at = clock.since(started).as_secs_f64();
    console
        .wait_for_since(&clock, mark, &agent, LIMIT)
        .await
        .map_err(|e| e.to_string())?;
    let agent_at = clock.since(started).as_secs_f64();
    machine.shutdown().await.map_err(|e| e.to_string())?;
    Ok(Sample {
        init: init_at,
        agent: agent_at,
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn summary(name: &str, samples: &[Sample]) -> (f64, f64) {
    let mut init: Vec<f64> = samples.iter().map(|s| s.init).collect();
    let mut agent: Vec<f64> = samples.iter().map(|s| s.agent).collect();
    let (lo, hi) = agent
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let (init, agent) = (median(&mut init), median(&mut agent));
    println!(
        "{name}: agent started after {agent:.1}s (median; {lo:.1}..{hi:.1}s), init after {init:.1}s"
    );
    (init, agent)
}

#[tokio::main]
async fn main() {
    let runs: usize = match std::env::var("RACKPROOF_BENCH_RUNS") {
        Ok(text) => match text.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("RACKPROOF_BENCH_RUNS={text:?}: expected a positive number");
                std::process::exit(2);
            }
        },
        Err(_) => 5,
    };
    if let Err(e) = rackproof_qemu::Prerequisites::find() {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let repo =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../..");
    let images = match Images::build(&repo) {
        Ok(images) => images,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut uefi = Vec::new();
    let mut direct = Vec::new();
    for run in 0..runs {
        // Alternate which kind goes first.
        let order = if run % 2 == 0 {
            [Kind::Uefi, Kind::Direct]
        } else {
            [Kind::Direct, Kind::Uefi]
        };
        for kind in order {
            match boot_once(&images, kind, run).await {
                Ok(sample) => {
                    println!(
                        "run {}/{runs} {kind:?}: init {:.1}s, agent {:.1}s",
                        run + 1,
                        sample.init,
                        sample.agent
                    );
                    if kind == Kind::Uefi {
                        uefi.push(sample)
                    } else {
                        direct.push(sample)
                    }
                }
                Err(e) => {
                    eprintln!("run {} {kind:?}: {e}", run + 1);
                    std::process::exit(1);
                }
            }
        }
    }
    let (uefi_init, uefi_agent) = summary("UEFI + systemd-boot + kernel + init", &uefi);
    let (direct_init, direct_agent) = summary("bare kernel + init (-kernel/-initrd) ", &direct);
    println!(
        "qemu boot: to the agent's start {:.2}x the bare boot ({:.1}s more); to init {:.2}x ({:.1}s more); {runs} boots each, TCG",
        uefi_agent / direct_agent,
        uefi_agent - direct_agent,
        uefi_init / direct_init,
        uefi_init - direct_init,
    );
}
