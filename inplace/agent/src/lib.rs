//! Node agent: the node side of GEP-31 (the in-place part of gardener-node-agent).
//!
//! The agent runs on every node: on a physical host under systemd, inside the QEMU/libvirt node
//! images, and in-process on simulated machines. It reconciles the node to its pool's
//! OperatingSystemConfig ([`agent`] documents the pass step by step), runs the OS-update command
//! ([`osupdate`], also the `rackproof-agent os-update` subcommand), assesses the boot
//! ([`assess`]). On lab nodes without a kubelet, [`heartbeat`] plays the kubelet's part (Lease,
//! Ready, pods) as a process of its own (`rackproof-agent kubelet`): the agent never heartbeats,
//! so its death leaves the node Ready, as gardener-node-agent's leaves the kubelet running.
//!
//! # Use
//!
//! ```text
//! let agent = Agent::new(config, platform, client, clock);
//! agent.run().await;          // until the future is dropped (power-off)
//! agent.run_once().await?;    // one pass (`--once`)
//! Heartbeat::new(client, node, pool, HeartbeatConfig::default(), clock)
//!     .run(&os_version, &kubelet).await;   // the kubelet's part, apart from the agent
//! ```
//!
//! # Platform
//!
//! Everything machine-specific sits behind a small trait, each with a real and a simulated
//! implementation ([`Platform`] bundles them):
//!
//! | trait | real | simulated |
//! |---|---|---|
//! | [`store::StateStore`] | [`store::DirStore`] (atomic file writes) | [`store::MemoryStore`] (outlives agent restarts) |
//! | [`platform::files::FileSink`] | [`platform::files::RootFiles`] | [`platform::files::MemoryFiles`] |
//! | [`platform::kubelet::Kubelet`] | [`platform::kubelet::SystemdKubelet`] | [`platform::kubelet::HeartbeatKubelet`] (lab nodes; a version file shared with `rackproof-agent kubelet`) |
//! | [`platform::reboot::Reboot`] | [`platform::reboot::CommandReboot`] | [`platform::reboot::CallbackReboot`] |
//! | [`platform::os_version::OsVersionSource`] | [`platform::os_version::OsRelease`] | [`platform::os_version::FixedOsVersion`] |
//! | [`assess::BootAssessor`] | [`assess::EspAssessor`] on `inplace_boot::DirEsp` + efivarfs/cmdline | [`assess::EspAssessor`] on `inplace_boot::MemEsp` + [`assess::booted::FixedBooted`] |
//! | [`osupdate::runner::OsUpdateRunner`] | [`osupdate::runner::SubprocessRunner`] | [`osupdate::runner::InProcessRunner`] |
//! | [`osupdate::source::ArtifactSource`] | [`osupdate::source::HttpSource`] | [`osupdate::source::MemorySource`] |
//!
//! # Choices (where GEP-31 is vague, following gardener-node-agent where it says something)
//!
//! - Keys: the attempted version is the Node annotation `node-agent.gardener.cloud/updating-os-version`,
//!   the applied OSC checksum `checksum/cloud-config-data` (gardener-node-agent's keys, from
//!   `inplace_api::keys`); results are MCM's `update-result` label and `update-failed-reason`.
//! - The drain gate is the `InPlaceUpdate` condition's reason `ReadyForUpdate` (what
//!   gardener-node-agent checks); the GEP's `ready-for-update` label is not used.
//! - Rollback detection as gardener-node-agent does it, made exact with local state: a running
//!   version other than the attempted one after the agent itself requested the reboot.
//! - Exit codes, not output patterns, classify the OS-update command (the contract in
//!   ARCHITECTURE.md); a timeout counts as retriable. gardener-node-agent retries every 30 s for
//!   up to 5 min; here the budget is a number of runs (default 5) with a doubling backoff from
//!   30 s capped at 5 min, so "retriable turns non-retriable after N" is explicit.
//! - The agent reboots itself after a successful OS-update command (the command only installs).
//! - Pods are deleted (not evicted) after a successful update, all of them, as
//!   gardener-node-agent's `deleteRemainingPods` does.
//! - The OS version: `/etc/os-release` `IMAGE_VERSION`, else `VERSION_ID`.
//! - The heartbeat's node annotation [`heartbeat::ANNOTATION_OS_VERSION`] and `nodeInfo.osImage`
//!   (`Rackproof {version}`) carry the running version.
//! - Slot manifests: [`manifest`] (JSON, SHA-256 per file, ed25519 over a canonical encoding).

pub mod agent;
pub mod assess;
pub mod config;
mod follow;
pub mod heartbeat;
mod http;
pub mod manifest;
pub mod node;
pub mod osupdate;
pub mod plan;
pub mod platform;
pub mod state;
pub mod store;
mod together;

pub use agent::{Agent, AgentError, Outcome, Platform};
pub use config::{AgentConfig, HeartbeatConfig, TokenSecret};
