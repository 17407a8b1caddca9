//! The scenario matrix under `cargo nextest`: one test per scenario in `scenarios/`, backend and
//! cluster it names (`sim::auto-happy-path` on the embedded API server,
//! `qemu-local::hang-timeout` against a local control plane, …). A test passes when the run's verdict is `passed`; its
//! failure message lists what broke and where the artifacts (report, timeline, consoles) are.
//!
//! Every run is also checked for leaked credentials: no bearer token or BMC password the run made
//! (nor the emulated rack's BMC passwords) may appear in any file of its artifacts.
//!
//! A `physical::` test runs on a rack of QEMU nodes behind BMC emulators, exactly what
//! `rackproof lab bmc-serve --machine qemu` starts: the run sees only the inventory it writes
//! (Redfish or IPMI endpoints, console files, SSH with a pinned host key, the harness address), as
//! it would of a real rack.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use rackproof_harness::engine::{self, Verdict, artifacts};
use rackproof_harness::load::{self, LoadedScenario};
use rackproof_harness::scenario::{Backend, BmcKind};
use rackproof_lab::commands::{self, ServeKind, ServeOptions};

fn scenarios_dir() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../scenarios")
}

fn trials() -> Vec<Trial> {
    let files = match load::discover(&[scenarios_dir()]) {
        Ok(files) => files,
        Err(e) => {
            return vec![Trial::test("scenarios::discover", move || {
                Err(Failed::from(e.to_string()))
            })];
        }
    };
    let mut trials = Vec::new();
    for file in files {
        let loaded = match load::load(&file) {
            Ok(loaded) => loaded,
            Err(e) => {
                let name = format!(
                    "invalid::{}",
                    file.file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or("scenario")
                );
                let message = e.to_string();
                trials.push(Trial::test(name, move || Err(Failed::from(message))));
                continue;
            }
        };
        for (backend, cluster) in loaded.scenario.runs() {
            let mut loaded = loaded.clone();
            loaded.scenario.cluster = cluster.cluster();
            let label = artifacts::run_label(backend, &loaded.scenario.cluster);
            let name = format!("{label}::{}", loaded.name);
            trials.push(Trial::test(name, move || {
                // `rackproof` on the PATH of `run` steps and external components is this build's.
                let tools_dir = Path::new(env!("CARGO_BIN_EXE_rackproof"))
                    .parent()
                    .map(Path::to_owned);
                let mut options = engine::RunOptions {
                    live: false,
                    tools_dir,
                    ..engine::RunOptions::default()
                };
                let rack = if backend == Backend::Physical {
                    Some(EmulatedRack::start(&loaded)?)
                } else {
                    None
                };
                options.inventory = rack.as_ref().map(|r| r.inventory.clone());
                let result = engine::run_scenario_with(&loaded, backend, options)
                    .map_err(|e| Failed::from(e.to_string()));
                let mut credentials = None;
                if let Some(rack) = rack {
                    credentials = Some(rack.passwords());
                    rack.stop();
                }
                let mut result = result?;
                result
                    .credentials
                    .extend(credentials.transpose()?.unwrap_or_default());
                let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rackproof-runs");
                let dir = artifacts::run_dir(&root, &loaded.name, &label)
                    .map_err(|e| Failed::from(e.to_string()))?;
                let report = artifacts::write_all(&dir, &loaded.name, &label, &result)
                    .map_err(|e| Failed::from(e.to_string()))?;
                let leaks = result
                    .credentials
                    .leaks_under(&dir)
                    .map_err(|e| Failed::from(format!("reading the artifacts: {e}")))?;
                if !leaks.is_empty() {
                    return Err(Failed::from(format!(
                        "a credential of the run ({} in all) appears in {}",
                        result.credentials.len(),
                        leaks
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
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

/// QEMU nodes `node-1` … `node-N` behind BMC emulators, on a runtime of their own (the run has
/// its own); dropping it kills the guests.
struct EmulatedRack {
    runtime: tokio::runtime::Runtime,
    server: commands::BmcServer,
    inventory: PathBuf,
    _dir: tempfile::TempDir,
}

impl EmulatedRack {
    fn start(loaded: &LoadedScenario) -> Result<Self, Failed> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Failed::from(format!("emulated rack: {what}: {e}"))
        };
        let repo = scenarios_dir().join("..");
        let images =
            rackproof_qemu::Images::build(&repo).map_err(|e| fail("build the images", &e))?;
        let host_key = commands::images_host_key(&images)
            .map_err(|e| fail("read the images' host key", &e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| fail("start a runtime", &e))?;
        let dir = tempfile::Builder::new()
            .prefix("rackproof-rack-")
            .tempdir()
            .map_err(|e| fail("make a directory", &e))?;
        let kind = match loaded.scenario.lab.bmc {
            BmcKind::Redfish => ServeKind::Redfish,
            BmcKind::Ipmi => ServeKind::Ipmi,
        };
        let options = ServeOptions {
            kind,
            bind: "127.0.0.1".parse().expect("an address"),
            dir: dir.path().to_owned(),
            username: "rackproof".to_owned(),
            ssh_host_key: Some(host_key),
        };
        let count = loaded.scenario.lab.node_names().len();
        let server = runtime.block_on(async {
            let clock = rackproof_clock::Clock::wall();
            let machines = commands::qemu_nodes(&images, count, &clock)
                .map_err(|e| fail("create the nodes", &e))?;
            commands::bmc_serve(machines, &options, clock)
                .await
                .map_err(|e| fail("serve the BMCs", &e))
        })?;
        let inventory = server
            .redfish_inventory
            .clone()
            .or_else(|| server.ipmi_inventory.clone())
            .ok_or_else(|| Failed::from("emulated rack: no inventory written"))?;
        Ok(Self {
            runtime,
            server,
            inventory,
            _dir: dir,
        })
    }

    /// The BMC passwords of the rack's nodes (each credentials file: user name, then password).
    fn passwords(&self) -> Result<Vec<String>, Failed> {
        self.server
            .nodes
            .iter()
            .map(|node| {
                let text = std::fs::read_to_string(&node.credentials_file).map_err(|e| {
                    Failed::from(format!("{}: {e}", node.credentials_file.display()))
                })?;
                Ok(text.lines().nth(1).unwrap_or_default().to_owned())
            })
            .collect()
    }

    /// Quits every guest.
    fn stop(self) {
        let Self {
            runtime, server, ..
        } = self;
        if let Err(e) = runtime.block_on(server.shutdown()) {
            eprintln!("emulated rack: stopping the guests: {e}");
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
}
