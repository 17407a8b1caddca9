//! `rackproof lab …`: power, up/down, console and BMC emulators, over `rackproof_lab::commands`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;

use rackproof_clock::Clock;
use rackproof_lab::bmc::DryRunSink;
use rackproof_lab::commands::{
    self, CommandError, LabOptions, PowerCommand, ServeKind, ServeMachine, ServeOptions,
};
use rackproof_lab::env::Env;
use rackproof_lab::physical::InventoryFile;
use rackproof_lab::sim::{Behaviour, Catalog, SimMachine};
use rackproof_qemu::Images;

use crate::engine::lab::images::workspace_root;

use super::{exit, print_error};

/// `rackproof lab`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LabCommand {
    /// Power nodes on and wait until their OS is up (seen on the console).
    Up(NodesArgs),
    /// Power nodes off.
    Down(NodesArgs),
    /// One power action or the power state of a node.
    Power {
        #[command(flatten)]
        inventory: InventoryArgs,
        /// The node.
        node: String,
        /// on, off, cycle, reset or status.
        action: PowerCommand,
    },
    /// Stream a node's console until it closes or Ctrl-C.
    Console {
        #[command(flatten)]
        inventory: InventoryArgs,
        node: String,
    },
    /// Run Redfish and/or IPMI emulators in front of simulated or QEMU nodes and print their
    /// endpoints; Ctrl-C stops them (and the QEMU guests).
    BmcServe {
        /// How many nodes.
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// sim (in-process machines) or qemu (guests booting the base image of ci/build-images,
        /// which is run from the checkout around the current directory).
        #[arg(long, default_value = "sim", value_parser = parse_machine)]
        machine: MachineKind,
        /// redfish, ipmi or both.
        #[arg(long, default_value = "both", value_parser = parse_kind)]
        kind: ServeKind,
        /// Where credentials, CA, consoles and the generated inventory go.
        #[arg(long)]
        dir: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct InventoryArgs {
    /// The inventory file (YAML) of the rack.
    #[arg(long)]
    inventory: PathBuf,
    /// Print the BMC actions instead of taking them.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct NodesArgs {
    #[command(flatten)]
    inventory: InventoryArgs,
    /// Nodes (all of the inventory when none).
    nodes: Vec<String>,
}

/// What `bmc-serve` puts behind the emulators.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MachineKind {
    Sim,
    Qemu,
}

fn parse_machine(text: &str) -> Result<MachineKind, String> {
    match text {
        "sim" => Ok(MachineKind::Sim),
        "qemu" => Ok(MachineKind::Qemu),
        other => Err(format!("unknown machine kind {other:?}; use sim or qemu")),
    }
}

fn parse_kind(text: &str) -> Result<ServeKind, String> {
    match text {
        "redfish" => Ok(ServeKind::Redfish),
        "ipmi" => Ok(ServeKind::Ipmi),
        "both" => Ok(ServeKind::Both),
        other => Err(format!(
            "unknown BMC kind {other:?}; use redfish, ipmi or both"
        )),
    }
}

fn options(args: &InventoryArgs) -> LabOptions {
    let mut options = LabOptions::new(Env::process(), Clock::wall());
    if args.dry_run {
        options.dry_run = Some(DryRunSink::Stdout);
    }
    options
}

fn load(args: &InventoryArgs) -> Result<InventoryFile, ExitCode> {
    InventoryFile::load(&args.inventory).map_err(|e| {
        print_error(&e);
        ExitCode::from(exit::USAGE)
    })
}

fn failure(error: &CommandError) -> ExitCode {
    print_error(error);
    match error {
        CommandError::UnknownNode(_) | CommandError::NoConsole { .. } => {
            ExitCode::from(exit::USAGE)
        }
        _ => ExitCode::from(exit::LAB_FAILED),
    }
}

pub(crate) async fn run(command: LabCommand) -> ExitCode {
    match command {
        LabCommand::Up(args) => {
            let inventory = match load(&args.inventory) {
                Ok(i) => i,
                Err(code) => return code,
            };
            match commands::up(&inventory, &args.nodes, &options(&args.inventory)).await {
                Ok(outcomes) => report(outcomes),
                Err(e) => failure(&e),
            }
        }
        LabCommand::Down(args) => {
            let inventory = match load(&args.inventory) {
                Ok(i) => i,
                Err(code) => return code,
            };
            match commands::down(&inventory, &args.nodes, &options(&args.inventory)).await {
                Ok(outcomes) => report(outcomes),
                Err(e) => failure(&e),
            }
        }
        LabCommand::Power {
            inventory: args,
            node,
            action,
        } => {
            let inventory = match load(&args) {
                Ok(i) => i,
                Err(code) => return code,
            };
            match commands::power(&inventory, &node, action, &options(&args)).await {
                Ok(report) => {
                    println!("{node}: {report}");
                    ExitCode::SUCCESS
                }
                Err(e) => failure(&e),
            }
        }
        LabCommand::Console {
            inventory: args,
            node,
        } => {
            let inventory = match load(&args) {
                Ok(i) => i,
                Err(code) => return code,
            };
            let mut session = match commands::console(&inventory, &node, &options(&args)).await {
                Ok(session) => session,
                Err(e) => return failure(&e),
            };
            loop {
                tokio::select! {
                    line = session.next_line() => match line {
                        Some(line) => println!("{}", line.text),
                        None => return ExitCode::SUCCESS,
                    },
                    _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
                }
            }
        }
        LabCommand::BmcServe {
            nodes,
            machine,
            kind,
            dir,
        } => {
            let clock = Clock::wall();
            let (machines, ssh_host_key) = match serve_machines(machine, nodes, &clock).await {
                Ok(served) => served,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(exit::LAB_FAILED);
                }
            };
            let options = ServeOptions {
                kind,
                bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
                dir,
                username: "admin".to_owned(),
                ssh_host_key,
            };
            let server = match commands::bmc_serve(machines, &options, clock).await {
                Ok(server) => server,
                Err(e) => {
                    print_error(&e);
                    return ExitCode::from(exit::LAB_FAILED);
                }
            };
            println!("{server}");
            let _ = tokio::signal::ctrl_c().await;
            if let Err(e) = server.shutdown().await {
                print_error(&e);
                return ExitCode::from(exit::LAB_FAILED);
            }
            ExitCode::SUCCESS
        }
    }
}

/// `nodes` machines `node-1` … `node-N` of `kind`, powered off with the base version installed,
/// and for QEMU the SSH host key they present.
async fn serve_machines(
    kind: MachineKind,
    nodes: u32,
    clock: &Clock,
) -> Result<(Vec<ServeMachine>, Option<String>), String> {
    match kind {
        MachineKind::Sim => (1..=nodes)
            .map(|i| {
                SimMachine::builder(format!("node-{i}"), clock.clone())
                    .catalog(Catalog::new().with("1.0.0", Behaviour::Boots))
                    .installed("1.0.0")
                    .build()
                    .map(ServeMachine::from)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()
            .map(|machines| (machines, None)),
        MachineKind::Qemu => {
            let cwd = std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}"))?;
            let repo = workspace_root(&cwd);
            eprintln!(
                "building the node images with {} (cached after the first run)",
                repo.join("ci/build-images").display()
            );
            let images = tokio::task::spawn_blocking(move || Images::build(&repo))
                .await
                .map_err(|e| format!("the image build stopped: {e}"))?
                .map_err(|e| e.to_string())?;
            let count = usize::try_from(nodes).map_err(|e| e.to_string())?;
            let host_key = commands::images_host_key(&images).map_err(|e| e.to_string())?;
            let machines =
                commands::qemu_nodes(&images, count, clock).map_err(|e| e.to_string())?;
            Ok((
                machines.into_iter().map(ServeMachine::from).collect(),
                Some(host_key),
            ))
        }
    }
}

fn report<T: std::fmt::Display>(outcomes: Vec<commands::NodeOutcome<T>>) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for outcome in outcomes {
        match outcome.result {
            Ok(report) => println!("{}: {report}", outcome.node),
            Err(e) => {
                eprint!("{}: ", outcome.node);
                status = failure(&e);
            }
        }
    }
    status
}
