//! A lab node as a libvirt domain, driven through the `virt` crate (feature `libvirt`).
//!
//! Lifecycle, each step idempotent where the action allows it:
//! 1. [`LibvirtMachine::define`] connects to the URI, removes a leftover domain of the same name
//!    (the name prefix is ours), gives the node a fresh OVMF variable store copy and serial log,
//!    and defines the domain (powered off).
//! 2. [`Power`]: `On` = create (start), `ForceOff` = destroy, `GracefulShutdown` = ACPI shutdown,
//!    `GracefulRestart` = ACPI reboot, `ForceRestart` = reset, `PowerCycle` = destroy + create,
//!    `Nmi` = QMP `inject-nmi` through libvirt-qemu's monitor passthrough (libvirt then marks the
//!    domain tainted, which is harmless here).
//! 3. [`BootControl`]: the override becomes the boot order of the persistent definition, so it
//!    applies at the next start (`On`, `PowerCycle`), not at a reset, as with a real BMC whose
//!    firmware reads the order at power-on. `Once` reverts to the disk right after that start.
//! 4. [`LibvirtMachine::teardown`] (or drop) destroys and undefines the domain with its NVRAM and
//!    removes the node directory. [`teardown_prefix`] cleans up whatever a crashed run left by
//!    name; [`sweep_orphans`], which `define` runs once per URI and process, by owner: each
//!    domain's metadata names the process that defined it, and a domain whose owner is gone (a
//!    run killed outright runs no drop) is removed with its directory.
//!
//! The `virt` calls block, so every one runs on tokio's blocking pool. With a remote URI the node
//! directory and disk must already exist on that host; libvirt creates the NVRAM from its template
//! there, and the serial console tail only sees the log if the directory is shared.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_std::LockExt;
use virt::connect::Connect;
use virt::domain::{Domain, DomainState};
use virt::sys;

use crate::console::SerialConsole;
use crate::spec::{BootOrder, MachineConfig, SpecError};
use crate::xml::{DIR_ATTRIBUTE, METADATA_NAMESPACE, OWNER_ATTRIBUTE, domain_xml};

/// How often state is polled while waiting for a power state.
const STATE_POLL: Duration = Duration::from_millis(100);

/// Errors of the libvirt backend. Messages read well after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("connect to libvirt at {uri} (is libvirtd running? start it with `ci/start-libvirtd`)")]
    Connect {
        uri: String,
        #[source]
        source: virt::error::Error,
    },
    #[error("{action} domain {domain}")]
    Libvirt {
        domain: String,
        action: &'static str,
        #[source]
        source: virt::error::Error,
    },
    #[error("prepare {path} for domain {domain}")]
    Io {
        domain: String,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("refuse to tear down by an empty name prefix (it would match every domain)")]
    EmptyPrefix,
    #[error("domain {domain}: libvirt call {action} did not return (blocking task failed)")]
    Join {
        domain: String,
        action: &'static str,
    },
}

/// A libvirt domain as a lab machine. Dropping it tears the domain down.
pub struct LibvirtMachine {
    config: MachineConfig,
    name: String,
    uuid: String,
    local: bool,
    conn: Connect,
    domain: Domain,
    boot: Mutex<BootOverride>,
    /// Serializes power actions so "check state, then act" steps don't interleave.
    action: tokio::sync::Mutex<()>,
    console: SerialConsole,
    clock: Clock,
    torn_down: AtomicBool,
}

impl std::fmt::Debug for LibvirtMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibvirtMachine")
            .field("domain", &self.name)
            .field("uri", &self.config.uri)
            .field("uuid", &self.uuid)
            .finish_non_exhaustive()
    }
}

/// Whether `uri` names the local host (`qemu:///system`), so the node's files are ours to make.
pub fn is_local_uri(uri: &str) -> bool {
    uri.split_once("://")
        .is_some_and(|(scheme, rest)| !scheme.contains('+') && rest.starts_with('/'))
}

async fn blocking<T: Send + 'static>(
    domain: &str,
    action: &'static str,
    f: impl FnOnce() -> Result<T, MachineError> + Send + 'static,
) -> Result<T, MachineError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| MachineError::Join {
            domain: domain.to_owned(),
            action,
        })?
}

fn io_err(domain: &str, path: &Path) -> impl FnOnce(std::io::Error) -> MachineError {
    let (domain, path) = (domain.to_owned(), path.to_owned());
    move |source| MachineError::Io {
        domain,
        path,
        source,
    }
}

impl LibvirtMachine {
    /// Defines the node's domain (powered off), replacing a leftover domain of the same name.
    pub async fn define(config: MachineConfig, clock: Clock) -> Result<Self, MachineError> {
        let name = config.domain_name()?;
        let first = config.domain_spec(None, BootOrder::DiskFirst)?;
        let uri = config.uri.clone();
        // libvirt prints every error to stderr by default; ours are returned as values instead.
        virt::error::clear_error_callback();
        let conn = {
            let uri = uri.clone();
            blocking(&name, "connect", move || {
                Connect::open(Some(&uri)).map_err(|source| MachineError::Connect { uri, source })
            })
            .await?
        };
        {
            let (conn, name) = (conn.clone(), name.clone());
            blocking(&name.clone(), "remove leftover", move || {
                remove_domain(&conn, &name).map(|_| ())
            })
            .await?;
        }
        sweep_orphans_once(&uri).await;
        let local = is_local_uri(&uri);
        if local {
            prepare_dir(&config, &name).await?;
        }
        let xml = domain_xml(&first);
        let domain = {
            let (conn, name2) = (conn.clone(), name.clone());
            blocking(&name, "define", move || {
                conn.define_domain_xml(&xml)
                    .map_err(|source| MachineError::Libvirt {
                        domain: name2,
                        action: "define",
                        source,
                    })
            })
            .await?
        };
        let uuid = {
            let (domain, name2) = (domain.clone(), name.clone());
            blocking(&name, "read uuid of", move || {
                domain
                    .uuid_string()
                    .map_err(|source| MachineError::Libvirt {
                        domain: name2,
                        action: "read uuid of",
                        source,
                    })
            })
            .await?
        };
        tracing::info!(domain = %name, %uri, %uuid, "defined libvirt domain");
        let console = SerialConsole::tail(config.serial_log_path(), clock.clone());
        Ok(Self {
            config,
            name,
            uuid,
            local,
            conn,
            domain,
            boot: Mutex::new(BootOverride::default()),
            action: tokio::sync::Mutex::new(()),
            console,
            clock,
            torn_down: AtomicBool::new(false),
        })
    }

    /// The libvirt domain name (prefix + node).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The domain's UUID (what sushy-tools calls the system's identity).
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// The libvirt URI the domain lives at.
    pub fn uri(&self) -> &str {
        &self.config.uri
    }

    /// The configuration the domain was defined from.
    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    /// The serial console (port 0), tailed from its log file.
    pub fn console(&self) -> &SerialConsole {
        &self.console
    }

    /// The domain XML libvirt holds for the next start (inactive definition).
    pub async fn defined_xml(&self) -> Result<String, MachineError> {
        self.call("read definition of", |d| {
            d.xml_desc(sys::VIR_DOMAIN_XML_INACTIVE)
        })
        .await
    }

    /// Waits until the domain reports `state` (polling), or fails after `timeout`.
    pub async fn wait_for_state(
        &self,
        state: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let poll = async {
            loop {
                match self.state().await {
                    Ok(now) if now == state => return Ok(()),
                    Ok(_) => self.clock.sleep(STATE_POLL).await,
                    Err(e) => return Err(e),
                }
            }
        };
        match self.clock.timeout(timeout, poll).await {
            Ok(result) => result.map_err(|e| self.driver_error(e)),
            Err(_) => Err(DriverError::Timeout {
                target: self.name.clone(),
                what: format!("power state {state}"),
                after: timeout,
            }),
        }
    }

    /// Destroys and undefines the domain (with its NVRAM) and removes the node directory.
    pub async fn teardown(&self) -> Result<(), MachineError> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let (conn, name) = (self.conn.clone(), self.name.clone());
        blocking(&self.name, "tear down", move || {
            remove_domain(&conn, &name).map(|_| ())
        })
        .await?;
        if self.local {
            remove_dir(&self.config.dir)
                .await
                .map_err(io_err(&self.name, &self.config.dir))?;
        }
        tracing::info!(domain = %self.name, "tore down libvirt domain");
        Ok(())
    }

    async fn state(&self) -> Result<PowerState, MachineError> {
        let (state, _) = self.call("read state of", |d| d.state()).await?;
        Ok(match state.unwrap_or(DomainState::NoState) {
            DomainState::Running
            | DomainState::Blocked
            | DomainState::Paused
            | DomainState::PMSuspended => PowerState::On,
            DomainState::Shutdown => PowerState::PoweringOff,
            DomainState::Shutoff | DomainState::Crashed | DomainState::NoState => PowerState::Off,
        })
    }

    async fn call<T: Send + 'static>(
        &self,
        action: &'static str,
        f: impl FnOnce(&Domain) -> Result<T, virt::error::Error> + Send + 'static,
    ) -> Result<T, MachineError> {
        let (domain, name) = (self.domain.clone(), self.name.clone());
        blocking(&self.name, action, move || {
            f(&domain).map_err(|source| MachineError::Libvirt {
                domain: name,
                action,
                source,
            })
        })
        .await
    }

    /// Writes the persistent definition with `order` (applies at the next start).
    async fn redefine(&self, order: BootOrder) -> Result<(), MachineError> {
        let xml = domain_xml(&self.config.domain_spec(Some(&self.uuid), order)?);
        let (conn, name) = (self.conn.clone(), self.name.clone());
        blocking(&self.name, "redefine", move || {
            conn.define_domain_xml(&xml)
                .map(|_| ())
                .map_err(|source| MachineError::Libvirt {
                    domain: name,
                    action: "redefine",
                    source,
                })
        })
        .await
    }

    async fn is_active(&self) -> Result<bool, MachineError> {
        self.call("query", |d| d.is_active()).await
    }

    /// Starts the domain with the boot override in force; a `Once` override is cleared after.
    async fn start(&self) -> Result<(), MachineError> {
        let setting = *self.boot.locked();
        let order = boot_order(setting);
        self.redefine(order).await?;
        self.call("start", |d| d.create()).await?;
        if setting.mode == BootOverrideMode::Once {
            *self.boot.locked() = BootOverride::default();
            self.redefine(BootOrder::DiskFirst).await?;
        }
        Ok(())
    }

    async fn act(&self, action: ResetAction) -> Result<(), DriverError> {
        let _serial = self.action.lock().await;
        let active = self.is_active().await.map_err(|e| self.driver_error(e))?;
        let refused = |reason: &str| DriverError::Refused {
            action: action.to_string(),
            target: self.name.clone(),
            reason: reason.to_owned(),
        };
        let result = match (action, active) {
            (ResetAction::On, true)
            | (ResetAction::ForceOff | ResetAction::GracefulShutdown, false) => Ok(()),
            (
                ResetAction::GracefulRestart | ResetAction::ForceRestart | ResetAction::Nmi,
                false,
            ) => return Err(refused("the domain is off")),
            (ResetAction::On, false) => self.start().await,
            (ResetAction::ForceOff, true) => self.call("destroy", |d| d.destroy()).await,
            (ResetAction::GracefulShutdown, true) => self.call("shut down", |d| d.shutdown()).await,
            (ResetAction::GracefulRestart, true) => {
                self.call("reboot", |d| {
                    d.reboot(sys::VIR_DOMAIN_REBOOT_ACPI_POWER_BTN)
                })
                .await
            }
            (ResetAction::ForceRestart, true) => self.call("reset", |d| d.reset()).await,
            (ResetAction::Nmi, true) => {
                self.call("inject nmi into", |d| {
                    d.qemu_monitor_command(r#"{"execute":"inject-nmi"}"#, 0)
                        .map(|_| ())
                })
                .await
            }
            (ResetAction::PowerCycle, true) => match self.call("destroy", |d| d.destroy()).await {
                Ok(()) => self.start().await,
                Err(e) => Err(e),
            },
            (ResetAction::PowerCycle, false) => self.start().await,
        };
        result.map_err(|error| match error {
            // The guest powered itself off between the state check and the action.
            MachineError::Libvirt { source, .. }
                if source.code().is(virt::error::ErrorNumber::OperationInvalid) =>
            {
                refused(source.message())
            }
            other => self.driver_error(other),
        })
    }

    fn driver_error(&self, error: MachineError) -> DriverError {
        DriverError::Failed {
            target: self.name.clone(),
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }
}

fn boot_order(setting: BootOverride) -> BootOrder {
    match (setting.mode, setting.target) {
        (BootOverrideMode::Once | BootOverrideMode::Continuous, BootTarget::Pxe) => {
            BootOrder::NetworkFirst
        }
        _ => BootOrder::DiskFirst,
    }
}

#[async_trait]
impl Power for LibvirtMachine {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        self.state().await.map_err(|e| self.driver_error(e))
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        tracing::info!(domain = %self.name, %action, "libvirt power action");
        self.act(action).await
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        ResetAction::ALL.to_vec()
    }
}

#[async_trait]
impl BootControl for LibvirtMachine {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        Ok(*self.boot.locked())
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        if setting.mode != BootOverrideMode::Disabled
            && matches!(setting.target, BootTarget::Cd | BootTarget::UefiHttp)
        {
            return Err(DriverError::Unsupported {
                action: format!("boot override to {}", setting.target.as_str()),
                target: self.name.clone(),
            });
        }
        let _serial = self.action.lock().await;
        self.redefine(boot_order(setting))
            .await
            .map_err(|e| self.driver_error(e))?;
        *self.boot.locked() = setting;
        Ok(())
    }
}

impl Drop for LibvirtMachine {
    fn drop(&mut self) {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return;
        }
        // No runtime to await on here: these are short libvirt calls and a directory removal.
        if let Err(error) = remove_domain(&self.conn, &self.name) {
            tracing::warn!(domain = %self.name, error = %error, "failed to tear down libvirt domain on drop");
        }
        if self.local {
            match std::fs::remove_dir_all(&self.config.dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %self.config.dir.display(), error = %e, "failed to remove node directory")
                }
            }
        }
    }
}

/// Destroys (if running) and undefines (with NVRAM) the domain called `name`; `Ok(false)` if
/// there was none. Blocking.
fn remove_domain(conn: &Connect, name: &str) -> Result<bool, MachineError> {
    let lib_err = |action: &'static str| {
        let domain = name.to_owned();
        move |source| MachineError::Libvirt {
            domain,
            action,
            source,
        }
    };
    let domain = match conn.lookup_domain_by_name(name) {
        Ok(d) => d,
        Err(e) if e.code().is(virt::error::ErrorNumber::NoDomain) => return Ok(false),
        Err(e) => return Err(lib_err("look up")(e)),
    };
    if domain.is_active().map_err(lib_err("query"))? {
        match domain.destroy() {
            Ok(()) => {}
            Err(e) if e.code().is(virt::error::ErrorNumber::OperationInvalid) => {}
            Err(e) => return Err(lib_err("destroy")(e)),
        }
    }
    match domain.undefine_flags(sys::VIR_DOMAIN_UNDEFINE_NVRAM) {
        Ok(()) => Ok(true),
        Err(e) if e.code().is(virt::error::ErrorNumber::NoDomain) => Ok(true),
        Err(e) => Err(lib_err("undefine")(e)),
    }
}

/// Removes every domain at `uri` whose name starts with `prefix` (leftovers of a crashed run);
/// returns their names. Node directories are the caller's to remove.
pub async fn teardown_prefix(uri: &str, prefix: &str) -> Result<Vec<String>, MachineError> {
    if prefix.is_empty() {
        return Err(MachineError::EmptyPrefix);
    }
    let (uri, prefix) = (uri.to_owned(), prefix.to_owned());
    blocking(&prefix.clone(), "tear down by prefix", move || {
        let conn = Connect::open(Some(&uri)).map_err(|source| MachineError::Connect {
            uri: uri.clone(),
            source,
        })?;
        let domains = conn
            .list_all_domains(0)
            .map_err(|source| MachineError::Libvirt {
                domain: format!("{prefix}*"),
                action: "list",
                source,
            })?;
        let mut removed = Vec::new();
        for domain in domains {
            let Ok(name) = domain.name() else { continue };
            if name.starts_with(&prefix) && remove_domain(&conn, &name)? {
                removed.push(name);
            }
        }
        Ok(removed)
    })
    .await
}

/// Removes every domain at `uri` that a process now gone defined (the owner in Rackproof's
/// metadata element), with its node directory when the URI is local; returns their names.
/// Domains of live processes, and domains without Rackproof's metadata, are left alone.
pub async fn sweep_orphans(uri: &str) -> Result<Vec<String>, MachineError> {
    let uri = uri.to_owned();
    blocking("*", "sweep orphaned domains", move || {
        let conn = Connect::open(Some(&uri)).map_err(|source| MachineError::Connect {
            uri: uri.clone(),
            source,
        })?;
        let domains = conn
            .list_all_domains(0)
            .map_err(|source| MachineError::Libvirt {
                domain: "*".to_owned(),
                action: "list",
                source,
            })?;
        let mut removed = Vec::new();
        for domain in domains {
            let (Ok(name), Ok(element)) = (
                domain.name(),
                domain.metadata(
                    sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
                    Some(METADATA_NAMESPACE),
                    sys::VIR_DOMAIN_AFFECT_CONFIG,
                ),
            ) else {
                continue;
            };
            let Some(owner) = attribute(&element, OWNER_ATTRIBUTE) else {
                continue;
            };
            if !rackproof_reap::owner_gone(&owner) || !remove_domain(&conn, &name)? {
                continue;
            }
            tracing::info!(domain = %name, %owner, "removed a libvirt domain whose run is gone");
            if is_local_uri(&uri)
                && let Some(dir) = attribute(&element, DIR_ATTRIBUTE)
                && let Err(error) = std::fs::remove_dir_all(&dir)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %dir, %error, "failed to remove a swept domain's directory");
            }
            removed.push(name);
        }
        Ok(removed)
    })
    .await
}

/// [`sweep_orphans`] the first time this process defines a domain at `uri`; a failure is logged
/// (defining the domain reports what is wrong with the connection).
async fn sweep_orphans_once(uri: &str) {
    static SWEPT: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if !SWEPT.locked().insert(uri.to_owned()) {
        return;
    }
    if let Err(error) = sweep_orphans(uri).await {
        tracing::warn!(%uri, %error, "failed to sweep domains left by killed runs");
    }
}

/// The value of attribute `name` in the XML element `element` (either quote; the five predefined
/// entities decoded).
fn attribute(element: &str, name: &str) -> Option<String> {
    let start = element.find(&format!(" {name}="))? + name.len() + 2;
    let quote = element[start..]
        .chars()
        .next()
        .filter(|q| matches!(q, '\'' | '"'))?;
    let value = &element[start + 1..];
    let value = &value[..value.find(quote)?];
    Some(
        value
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&apos;", "'")
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
}

/// Gives the node a fresh directory (traversable by libvirt's QEMU user), NVRAM copy and log.
async fn prepare_dir(config: &MachineConfig, name: &str) -> Result<(), MachineError> {
    let dir = &config.dir;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(io_err(name, dir))?;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .await
        .map_err(io_err(name, dir))?;
    let nvram = config.nvram_path();
    tokio::fs::copy(&config.firmware.vars_template, &nvram)
        .await
        .map_err(io_err(name, &config.firmware.vars_template))?;
    let log = config.serial_log_path();
    match tokio::fs::remove_file(&log).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(name, &log)(e)),
    }
}

async fn remove_dir(dir: &Path) -> std::io::Result<()> {
    match tokio::fs::remove_dir_all(dir).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_from_the_metadata_element_as_libvirt_returns_it() {
        let element = "<rackproof:node xmlns:rackproof=\"https://rackproof.dev/libvirt/1\" owner=\"812 99031\" dir=\"/tmp/a&amp;b\"/>";
        assert_eq!(attribute(element, "owner").as_deref(), Some("812 99031"));
        assert_eq!(attribute(element, "dir").as_deref(), Some("/tmp/a&b"));
        assert_eq!(
            attribute("<node owner='1 2'/>", "owner").as_deref(),
            Some("1 2")
        );
        assert_eq!(attribute("<node xowner='1 2'/>", "owner"), None);
        assert_eq!(attribute("<node owner=1/>", "owner"), None);
    }

    #[test]
    fn local_uris_are_told_from_remote_ones() {
        assert!(is_local_uri("qemu:///system"));
        assert!(is_local_uri("qemu:///session"));
        assert!(!is_local_uri("qemu+ssh://lab2/system"));
        assert!(!is_local_uri("qemu+tcp://10.0.0.2/system"));
        assert!(!is_local_uri("garbage"));
    }

    #[test]
    fn only_a_pxe_override_changes_the_boot_order() {
        let pxe = |mode| BootOverride {
            mode,
            target: BootTarget::Pxe,
        };
        assert_eq!(
            boot_order(pxe(BootOverrideMode::Once)),
            BootOrder::NetworkFirst
        );
        assert_eq!(
            boot_order(pxe(BootOverrideMode::Continuous)),
            BootOrder::NetworkFirst
        );
        assert_eq!(
            boot_order(pxe(BootOverrideMode::Disabled)),
            BootOrder::DiskFirst
        );
        assert_eq!(
            boot_order(BootOverride {
                mode: BootOverrideMode::Once,
                target: BootTarget::Hdd
            }),
            BootOrder::DiskFirst
        );
    }
}
