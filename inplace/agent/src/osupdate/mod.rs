//! The OS-update command (`rackproof-agent os-update`, in the role of Garden Linux's
//! `gardenlinux-update`): installs the slot for one OS version as a new systemd-boot entry.
//!
//! ```text
//! rackproof-agent os-update --version 1.2.0 --image-server http://10.0.2.2:8080/slots \
//!     [--public-key /etc/rackproof/slot-signing.pub] [--esp /efi] [--entry-prefix rackproof] \
//!     [--tries 3] [--timeout 10m] [--efivars /sys/firmware/efi/efivars] [--cmdline /proc/cmdline]
//! ```
//!
//! Steps, and what each failure exits with (the GEP-31 contract, [`OsUpdateExit`]):
//!
//! 1. Parse the arguments. Unknown flags, a malformed version or URL → 1 (invalid arguments).
//! 2. Load the trusted public key and open the ESP → 2 (system failure) when either is missing.
//! 3. Fetch `{image-server}/{version}/manifest.json` (at most [`MANIFEST_LIMIT`] bytes: reading
//!    stops there), check its signature before anything else in it is looked at, then its
//!    structure and that it names the requested version. Network failure (connection, reset,
//!    timeout, HTTP 5xx/408/429) → 3; not found, refused, too long, unparsable, bad signature,
//!    invalid, other version → 2.
//! 4. Download every file into memory, reading exactly the size the signed manifest states
//!    (reading stops one chunk past it: a longer body, or a shorter one, → 2), and check its
//!    SHA-256 → 3 for network, 2 for mismatch. Nothing on the ESP has changed up to here, so a
//!    failed download leaves the ESP exactly as it was.
//! 5. Make room (`inplace_boot::make_room`: garbage, then bad, on-trial and old good entries,
//!    never the booted entry nor the last good one) and install the entry
//!    `{prefix}-{version}+{tries}.conf` (`inplace_boot::install_entry`: payload first, entry file
//!    last, each written to a temporary name, flushed and renamed) → 2 on any ESP error.
//!    The entry's options get `rackproof.entry={prefix}-{version}` appended so the booted entry
//!    is known even without efivarfs; it carries `sort-key {prefix}` and `version {version}`.
//!    It logs `installing the slot on the ESP` just before the first write (the lab's power-cut
//!    faults wait for that line).
//! 6. Exit 0. Installing the version that is booted right now is a no-op success.
//!
//! Messages on stderr contain "invalid arguments", "system failure" or "network problems", the
//! phrases gardener-node-agent matches on when it classifies an update command's output, so the
//! command also works under a node agent that looks at output instead of exit codes.

pub mod runner;
pub mod source;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ed25519_dalek::VerifyingKey;
use inplace_api::keys::OsUpdateExit;
use inplace_boot::{DirEsp, EntryConf, Esp, NewEntry};
use rackproof_std::error_chain;

use crate::assess::booted::{BootedEntrySource, Efivars, FirstOf, KernelCmdline, LoaderHint};
use crate::manifest::{SlotManifest, public_key_from_pem, validate_version};
use source::{ArtifactSource, BodyLimit, FetchError, HttpSource};

/// The manifest's file name on the image server.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The most bytes of a manifest the command reads (a real one is well under 1 KiB).
pub const MANIFEST_LIMIT: u64 = 64 * 1024;
/// The default path of the trusted slot-signing public key on a node.
pub const DEFAULT_PUBLIC_KEY: &str = "/etc/rackproof/slot-signing.pub";

/// The arguments of `os-update`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "os-update",
    about = "Install the boot slot for an OS version (exit 0 ok, 1 invalid arguments, 2 system failure, 3 network problem)"
)]
pub struct OsUpdateArgs {
    /// The OS version to install.
    #[arg(long)]
    pub version: String,
    /// Base URL of the image server (`{url}/{version}/manifest.json`).
    #[arg(long)]
    pub image_server: String,
    /// The trusted ed25519 public key (SubjectPublicKeyInfo PEM).
    #[arg(long, default_value = DEFAULT_PUBLIC_KEY)]
    pub public_key: PathBuf,
    /// The mounted EFI system partition.
    #[arg(long, default_value = "/efi")]
    pub esp: PathBuf,
    /// Entry names are `{prefix}-{version}`.
    #[arg(long, default_value = "rackproof")]
    pub entry_prefix: String,
    /// Boot attempts before systemd-boot falls back.
    #[arg(long, default_value_t = inplace_boot::DEFAULT_TRIES, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub tries: u32,
    /// Limit for each download (`90s`, `10m`).
    #[arg(long, default_value = "10m", value_parser = parse_duration_arg)]
    pub timeout: Duration,
    /// efivarfs, for the booted entry.
    #[arg(long, default_value = "/sys/firmware/efi/efivars")]
    pub efivars: PathBuf,
    /// The kernel command line, for the booted entry when efivarfs says nothing.
    #[arg(long, default_value = "/proc/cmdline")]
    pub cmdline: PathBuf,
    /// The node this runs on, sent to the image server as `X-Rackproof-Node` (the agent sets
    /// `RACKPROOF_NODE`); lets a lab image server log and fault requests per node.
    #[arg(long, env = "RACKPROOF_NODE")]
    pub node: Option<String>,
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    rackproof_clock::parse_duration(text).map_err(|e| e.to_string())
}

/// What the command runs against. `None` fields come from the arguments (the real node); the
/// simulation supplies its in-memory ESP, artifact source, key and loader hint instead, and runs
/// exactly the same steps.
#[derive(Debug, Clone, Default)]
pub struct OsUpdateEnv {
    /// The ESP; default: [`DirEsp`] at `--esp`.
    pub esp: Option<Arc<dyn Esp>>,
    /// Where slots come from; default: HTTP.
    pub source: Option<Arc<dyn ArtifactSource>>,
    /// The trusted key; default: read from `--public-key`.
    pub public_key: Option<VerifyingKey>,
    /// The booted entry; default: efivarfs at `--efivars`, then `--cmdline`.
    pub booted: Option<Arc<dyn BootedEntrySource>>,
}

/// A failure of the command, with its exit-code class.
#[derive(Debug, thiserror::Error)]
pub enum OsUpdateError {
    /// Exit 1.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// Exit 2.
    #[error("system failure: {0}")]
    System(String),
    /// Exit 3.
    #[error("network problems: {0}")]
    Network(String),
}

impl OsUpdateError {
    /// The exit code class.
    pub fn exit(&self) -> OsUpdateExit {
        match self {
            Self::InvalidArguments(_) => OsUpdateExit::InvalidArguments,
            Self::System(_) => OsUpdateExit::SystemFailure,
            Self::Network(_) => OsUpdateExit::NetworkProblem,
        }
    }
}

fn fetch_error(error: FetchError) -> OsUpdateError {
    match error {
        FetchError::Network { .. } => OsUpdateError::Network(error.to_string()),
        FetchError::NotFound { .. }
        | FetchError::Refused { .. }
        | FetchError::TooLong { .. }
        | FetchError::TooShort { .. } => OsUpdateError::System(error.to_string()),
    }
}

/// What a successful run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The entry file name now on the ESP (`rackproof-1.2.0+3.conf`).
    pub entry: String,
    /// Entries removed to make room.
    pub removed: Vec<String>,
    /// Whether the version was already booted (nothing done).
    pub already_booted: bool,
}

/// Runs the command with `argv` (without the program and subcommand names) and returns the exit
/// code; messages go to `out` (the binary passes stderr).
pub async fn run(
    argv: &[String],
    env: &OsUpdateEnv,
    out: &mut (dyn std::io::Write + Send),
) -> OsUpdateExit {
    let parsed = OsUpdateArgs::try_parse_from(
        std::iter::once("os-update".to_owned()).chain(argv.iter().cloned()),
    );
    let args = match parsed {
        Ok(args) => args,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            let _ = write!(out, "{e}");
            return OsUpdateExit::Success;
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "os-update: invalid arguments: {}",
                e.to_string().trim_end()
            );
            return OsUpdateExit::InvalidArguments;
        }
    };
    match install(&args, env).await {
        Ok(installed) => {
            let _ = if installed.already_booted {
                writeln!(
                    out,
                    "os-update: version {} is the booted entry already; nothing to do",
                    args.version
                )
            } else {
                writeln!(
                    out,
                    "os-update: installed {} (removed to make room: {:?})",
                    installed.entry, installed.removed
                )
            };
            OsUpdateExit::Success
        }
        Err(e) => {
            let _ = writeln!(out, "os-update: {e}");
            e.exit()
        }
    }
}

/// Steps 1–5 of the module docs with parsed arguments.
pub async fn install(args: &OsUpdateArgs, env: &OsUpdateEnv) -> Result<Installed, OsUpdateError> {
    validate_version(&args.version).map_err(|p| {
        OsUpdateError::InvalidArguments(format!("--version {:?}: {p}", args.version))
    })?;
    validate_version(&args.entry_prefix).map_err(|p| {
        OsUpdateError::InvalidArguments(format!("--entry-prefix {:?}: {p}", args.entry_prefix))
    })?;
    let base = args.image_server.trim();
    if !(base.starts_with("http://") || base.starts_with("https://"))
        || base.len() <= "https://".len()
    {
        return Err(OsUpdateError::InvalidArguments(format!(
            "--image-server {base:?} is not an http(s) URL"
        )));
    }
    let stem = format!("{}-{}", args.entry_prefix, args.version);

    let key = match env.public_key {
        Some(key) => key,
        None => {
            let pem = std::fs::read_to_string(&args.public_key).map_err(|e| {
                OsUpdateError::System(format!(
                    "failed to read trusted key {}: {e}",
                    args.public_key.display()
                ))
            })?;
            public_key_from_pem(&pem)
                .map_err(|e| OsUpdateError::System(format!("{}: {e}", args.public_key.display())))?
        }
    };
    let esp: Arc<dyn Esp> = match &env.esp {
        Some(esp) => esp.clone(),
        None => {
            Arc::new(DirEsp::new(&args.esp).map_err(|e| OsUpdateError::System(error_chain(&e)))?)
        }
    };
    let booted_source: Arc<dyn BootedEntrySource> = match &env.booted {
        Some(b) => b.clone(),
        None => Arc::new(FirstOf::new(
            Efivars::new(&args.efivars),
            KernelCmdline::new(&args.cmdline),
        )),
    };
    let hint = booted_source.hint().unwrap_or_else(|e| {
        tracing::warn!(error = %error_chain(&e), "booted entry unknown; treating no entry as booted");
        LoaderHint::default()
    });
    let booted = inplace_boot::booted_entry(
        esp.as_ref(),
        hint.boot_count_path.as_deref(),
        hint.entry_selected.as_deref(),
    )
    .map_err(|e| OsUpdateError::System(error_chain(&e)))?;
    if booted
        .as_ref()
        .is_some_and(|b| b.stem().eq_ignore_ascii_case(&stem))
    {
        return Ok(Installed {
            entry: booted.map(|b| b.file_name().to_owned()).unwrap_or_default(),
            removed: vec![],
            already_booted: true,
        });
    }

    let source: Arc<dyn ArtifactSource> = match &env.source {
        Some(source) => source.clone(),
        None => Arc::new(HttpSource::new(args.timeout, args.node.as_deref())),
    };
    let manifest_bytes = source
        .fetch(
            base,
            &args.version,
            MANIFEST_NAME,
            BodyLimit::AtMost(MANIFEST_LIMIT),
        )
        .await
        .map_err(fetch_error)?;
    let manifest = SlotManifest::parse_verified(&manifest_bytes, &key)
        .map_err(|e| OsUpdateError::System(error_chain(&e)))?;
    if manifest.version != args.version {
        return Err(OsUpdateError::System(format!(
            "the manifest for {:?} describes version {:?}",
            args.version, manifest.version
        )));
    }
    let mut kernel = None;
    let mut initrd = None;
    for file in &manifest.files {
        let data = source
            .fetch(
                base,
                &args.version,
                &file.name,
                BodyLimit::Exactly(file.size),
            )
            .await
            .map_err(fetch_error)?;
        file.check(&args.version, &data)
            .map_err(|e| OsUpdateError::System(error_chain(&e)))?;
        if file.name == manifest.boot.linux {
            kernel = Some(data);
        } else if manifest.boot.initrd.as_deref() == Some(file.name.as_str()) {
            initrd = Some(data);
        }
    }
    let kernel = kernel
        .ok_or_else(|| OsUpdateError::System("the manifest's kernel was not downloaded".into()))?;

    let mut options = manifest.boot.options.trim().to_owned();
    if !options.is_empty() {
        options.push(' ');
    }
    options.push_str(&format!(
        "{}={stem}",
        crate::assess::booted::CMDLINE_PARAMETER
    ));
    let conf = EntryConf {
        title: Some(format!("Rackproof {}", args.version)),
        version: Some(args.version.clone()),
        sort_key: Some(args.entry_prefix.clone()),
        options: vec![options],
        ..Default::default()
    };
    let new = NewEntry {
        stem: &stem,
        conf,
        kernel: &kernel,
        initrd: initrd.as_deref(),
        tries: args.tries,
    };
    let needed = inplace_boot::update::install_size(&new);
    tracing::info!(entry = %stem, bytes = needed, "installing the slot on the ESP");
    let removed = inplace_boot::make_room(esp.as_ref(), needed, booted.as_ref())
        .map_err(|e| OsUpdateError::System(error_chain(&e)))?;
    let name = inplace_boot::install_entry(esp.as_ref(), &new, booted.as_ref())
        .map_err(|e| OsUpdateError::System(error_chain(&e)))?;
    Ok(Installed {
        entry: name.file_name().to_owned(),
        removed: removed.iter().map(|n| n.file_name().to_owned()).collect(),
        already_booted: false,
    })
}
