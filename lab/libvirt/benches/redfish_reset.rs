//! Benchmark: Redfish reset latency of Rackproof's BMC emulator against sushy-tools 2.2.0, both in
//! front of the same libvirt domain, in one run.
//!
//! Run it with `ci/bench redfish` (starts libvirtd and the sushy-tools venv with
//! `ci/start-libvirtd` first), or `cargo bench -p rackproof-libvirt --features libvirt --bench
//! redfish_reset`. `RACKPROOF_BENCH_RESETS` sets the rounds (default 10).
//!
//! One domain of type `qemu` (TCG, OVMF, an empty disk) is defined; sushy-tools serves it by
//! UUID, and `rackproof_redfish::Emulator` serves it over plain HTTP (as sushy does) through
//! `LibvirtMachine`. Each round, for each BMC in turn: `POST ComputerSystem.Reset` `On`, wait
//! until libvirt reports the domain running, `POST` `ForceOff`, wait until it is shut off. The
//! latency of a reset is the time from sending the `POST` to its answer (both BMCs answer once
//! libvirt has done the action). Printed: the median and range of each reset type per BMC, and
//! sushy-tools' median over the emulator's. Wall time is read only through
//! `rackproof_clock::Clock`.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::PowerState;
use rackproof_libvirt::bmc::{BmcTools, SushyEmulator};
use rackproof_libvirt::{LibvirtMachine, MachineConfig};
use rackproof_redfish::{Emulator, EmulatorConfig};
use serde_json::json;

type BoxError = Box<dyn Error + Send + Sync>;

const URI: &str = "qemu:///system";
const STATE_TIMEOUT: Duration = Duration::from_secs(60);
/// The emulator's lab account (the password goes only into the Authorization header).
const USER: &str = "bench";
const PASSWORD: &str = "bench-password";

/// A BMC under measurement.
struct Bmc {
    name: &'static str,
    reset_url: String,
    basic_auth: bool,
    on: Vec<Duration>,
    off: Vec<Duration>,
}

impl Bmc {
    async fn reset(
        &self,
        http: &reqwest::Client,
        clock: &Clock,
        reset: &str,
    ) -> Result<Duration, BoxError> {
        let mut request = http
            .post(&self.reset_url)
            .json(&json!({ "ResetType": reset }));
        if self.basic_auth {
            request = request.basic_auth(USER, Some(PASSWORD));
        }
        let start = clock.instant();
        let response = request.send().await?;
        let took = clock.since(start);
        let status = response.status();
        if !status.is_success() {
            return Err(format!(
                "{} answered Reset {reset} with {status}: {}",
                self.name,
                response.text().await.unwrap_or_default()
            )
            .into());
        }
        Ok(took)
    }
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn range(samples: &[Duration]) -> String {
    let min = samples.iter().min().copied().unwrap_or_default();
    let max = samples.iter().max().copied().unwrap_or_default();
    format!("{}–{}", ms(min), ms(max))
}

fn ratio(slow: Duration, fast: Duration) -> String {
    if fast.is_zero() {
        "n/a".to_owned()
    } else {
        format!("{:.1}×", slow.as_secs_f64() / fast.as_secs_f64())
    }
}

async fn run(rounds: usize) -> Result<(), BoxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clock = Clock::wall();
    let dir = tempfile::Builder::new()
        .prefix("rackproof-bench-redfish-")
        .tempdir()?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let node_dir = dir.path().join("n1");
    std::fs::create_dir_all(&node_dir)?;
    let disk = node_dir.join("disk.qcow2");
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&disk)
        .arg("64M")
        .output()
        .map_err(|e| {
            format!("qemu-img is missing ({e}); install it with: apt-get install -y qemu-utils")
        })?;
    if !out.status.success() {
        return Err(format!(
            "qemu-img create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let mut config = MachineConfig::new("n1", &node_dir, disk);
    config.uri = URI.to_owned();
    config.name_prefix = format!("rackproof-bench{}-", std::process::id());
    let machine = Arc::new(
        LibvirtMachine::define(config, clock.clone())
            .await
            .map_err(|e| format!("{e}: start libvirtd with `ci/start-libvirtd`"))?,
    );
    let tools = BmcTools::find()?;
    let sushy = SushyEmulator::start(
        &tools,
        URI,
        machine.uuid(),
        &dir.path().join("sushy"),
        &clock,
    )
    .await?;
    let emulator = Emulator::new(EmulatorConfig::single(
        machine.clone(),
        USER,
        PASSWORD,
        clock.clone(),
    ))?;
    let served = emulator
        .serve_http(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await?;

    let mut bmcs = [
        Bmc {
            name: "rackproof emulator",
            reset_url: format!(
                "{}/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                served.url()
            ),
            basic_auth: true,
            on: Vec::new(),
            off: Vec::new(),
        },
        Bmc {
            name: "sushy-tools 2.2.0",
            reset_url: format!("{}/Actions/ComputerSystem.Reset", sushy.system_url()),
            basic_auth: false,
            on: Vec::new(),
            off: Vec::new(),
        },
    ];
    let http = reqwest::Client::builder().timeout(STATE_TIMEOUT).build()?;
    println!(
        "Redfish ComputerSystem.Reset latency, {rounds} rounds, one libvirt domain (type qemu, TCG) behind both BMCs"
    );
    for round in 0..=rounds {
        for bmc in &mut bmcs {
            let on = bmc.reset(&http, &clock, "On").await?;
            machine
                .wait_for_state(PowerState::On, STATE_TIMEOUT)
                .await?;
            let off = bmc.reset(&http, &clock, "ForceOff").await?;
            machine
                .wait_for_state(PowerState::Off, STATE_TIMEOUT)
                .await?;
            // Round 0 warms up both (connections, libvirt's caches) and is not counted.
            if round > 0 {
                bmc.on.push(on);
                bmc.off.push(off);
            }
        }
    }
    println!();
    println!(
        "{:<20} {:>12} {:>22} {:>14} {:>22}",
        "BMC", "On median", "On range", "ForceOff med.", "ForceOff range"
    );
    for bmc in &bmcs {
        println!(
            "{:<20} {:>12} {:>22} {:>14} {:>22}",
            bmc.name,
            ms(median(&bmc.on)),
            range(&bmc.on),
            ms(median(&bmc.off)),
            range(&bmc.off)
        );
    }
    let [ours, sushy_bmc] = &bmcs;
    println!(
        "sushy-tools / emulator (medians): On {}, ForceOff {}",
        ratio(median(&sushy_bmc.on), median(&ours.on)),
        ratio(median(&sushy_bmc.off), median(&ours.off))
    );

    served.shutdown();
    sushy.stop().await;
    machine.teardown().await?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let rounds = match std::env::var("RACKPROOF_BENCH_RESETS") {
        Ok(text) => match text.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("RACKPROOF_BENCH_RESETS must be a positive number, not {text:?}");
                return std::process::ExitCode::from(2);
            }
        },
        Err(_) => 10,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(rounds)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redfish reset benchmark failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
