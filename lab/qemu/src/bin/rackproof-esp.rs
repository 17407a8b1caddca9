//! `rackproof-esp`: boot entries on the ESP inside a disk image (mtools, no mounts), formatted by
//! inplace-boot exactly as the agent's os-update writes them. Used by `images/build-disk`.
//!
//! ```text
//! rackproof-esp --image disk.raw install --slot DIR --version V [--tries N | --blessed] [--corrupt]
//! rackproof-esp --image disk.raw entries
//! ```

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use inplace_boot::{Esp as _, LOADER_CONF_PATH, LoaderConf, Timeout};
use rackproof_qemu::{MtoolsEsp, Slot};

#[derive(Debug, Parser)]
#[command(
    name = "rackproof-esp",
    about = "Boot entries on a disk image's ESP (mtools)"
)]
struct Cli {
    /// The disk image (GPT, ESP at 1 MiB, as images/build-disk makes it).
    #[arg(long)]
    image: PathBuf,
    /// Byte offset of the ESP in the image.
    #[arg(long, default_value_t = rackproof_qemu::mtools::ESP_OFFSET)]
    offset: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install a slot as a boot entry; writes loader.conf (`timeout 0`, no `default`) if absent.
    Install {
        /// The slot directory (images/build-slot output).
        #[arg(long)]
        slot: PathBuf,
        /// The version the slot must carry (checked against its manifest).
        #[arg(long)]
        version: String,
        /// Boot counter of the new entry.
        #[arg(long, conflicts_with = "blessed")]
        tries: Option<u32>,
        /// Install without a counter (a known-good entry).
        #[arg(long)]
        blessed: bool,
        /// Write garbage instead of the initrd (an entry that always fails).
        #[arg(long)]
        corrupt: bool,
    },
    /// Print the entry file names.
    Entries,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let esp = MtoolsEsp::at_offset(&cli.image, cli.offset);
    match cli.command {
        Command::Install {
            slot,
            version,
            tries,
            blessed,
            corrupt,
        } => {
            let slot = Slot::open(&slot)?;
            if slot.version != version {
                bail!(
                    "slot {} is version {}, not {version}",
                    slot.dir.display(),
                    slot.version
                );
            }
            if !esp
                .exists(LOADER_CONF_PATH)
                .context("failed to inspect the ESP")?
            {
                let conf = LoaderConf {
                    timeout: Some(Timeout::Seconds(0)),
                    ..LoaderConf::default()
                };
                inplace_boot::write_loader_conf(&esp, &conf)
                    .context("failed to write loader.conf")?;
            }
            let tries = if blessed {
                None
            } else {
                Some(tries.unwrap_or(inplace_boot::DEFAULT_TRIES))
            };
            let name = slot.install(&esp, tries, corrupt)?;
            println!("{}", name.file_name());
        }
        Command::Entries => {
            for (name, _) in inplace_boot::entry_files(&esp).context("failed to list entries")? {
                println!("{}", name.file_name());
            }
        }
    }
    Ok(())
}
