//! Simulated nodes: one `rackproof_lab::sim::SimMachine` per lab node, each running the real node
//! agent and the kubelet's part (the heartbeat), as two services, in-process whenever its OS is
//! up, with the agent's simulated platform (the machine's
//! ESP, a state store that survives reboots, a reboot that resets the machine) and an in-memory
//! image server holding a signed slot (one build) for every version of the scenario, which a
//! `publish` step replaces and a node's `bootFailure` shadows for that node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ed25519_dalek::VerifyingKey;
use inplace_agent::assess::EspAssessor;
use inplace_agent::assess::booted::{FixedBooted, LoaderHint};
use inplace_agent::heartbeat::Heartbeat;
use inplace_agent::manifest::{BootSpec, SlotKeyPair, SlotManifest};
use inplace_agent::osupdate::OsUpdateEnv;
use inplace_agent::osupdate::runner::InProcessRunner;
use inplace_agent::osupdate::source::{ArtifactSource, BodyLimit, FetchError, MemorySource};
use inplace_agent::platform::files::MemoryFiles;
use inplace_agent::platform::kubelet::HeartbeatKubelet;
use inplace_agent::platform::os_version::FixedOsVersion;
use inplace_agent::platform::reboot::CallbackReboot;
use inplace_agent::store::{MemoryStore, StateStore, StoreError};
use inplace_agent::{Agent, AgentConfig, HeartbeatConfig, Platform};
use inplace_boot::MemEsp;
use rackproof_clock::Clock;
use rackproof_lab::sim::{
    Behaviour, Catalog, GuestContext, GuestOs, GuestTask, SimHandle, SlotArtifact,
};
use rackproof_std::LockExt;
use tracing::Instrument;

use crate::engine::lab::link::Link;
use crate::scenario::{BootBehaviour, ImageServerAnswer, Scenario};

pub(crate) use crate::engine::lab::provider::OscLocation;

/// The slot manifest's file name on the image server.
const MANIFEST: &str = "manifest.json";

/// The entry-name prefix the agent uses for the slots it installs.
const ENTRY_PREFIX: &str = "rackproof";

/// The agent's service (unit) on a simulated node.
pub(crate) const AGENT_SERVICE: &str = "rackproof-agent";
/// The kubelet's service on a simulated node: the heartbeat, apart from the agent.
pub(crate) const KUBELET_SERVICE: &str = "kubelet";

pub(crate) fn behaviour(boot: &BootBehaviour) -> Behaviour {
    match boot {
        BootBehaviour::Ok => Behaviour::Boots,
        BootBehaviour::Panics => Behaviour::PanicsAtBoot,
        BootBehaviour::Hangs => Behaviour::HangsAtBoot,
        BootBehaviour::NeverReports => Behaviour::AgentNeverReports,
        BootBehaviour::BootsVersion(v) => Behaviour::ReportsVersion(v.clone()),
    }
}

/// The scenario's images as a simulated catalog.
pub(crate) fn catalog(scenario: &Scenario) -> Catalog {
    scenario
        .images
        .iter()
        .fold(Catalog::new(), |catalog, image| {
            catalog.with(&image.version, behaviour(&image.boot))
        })
}

/// Why the simulated image server's slots could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SlotsError {
    /// The catalog has no artifact for a version the scenario lists.
    #[error("no simulated artifact for image {version}")]
    NoArtifact { version: String },
    /// A version's slot manifest could not be written.
    #[error("failed to describe the slot of {version}")]
    Describe {
        version: String,
        #[source]
        source: inplace_agent::manifest::ManifestError,
    },
}

/// The image server: a signed slot (kernel, initrd, manifest) for every version in `catalog`.
pub(crate) fn image_server(
    scenario: &Scenario,
    catalog: &Catalog,
    key: &SlotKeyPair,
) -> Result<MemorySource, SlotsError> {
    let source = MemorySource::new();
    for image in &scenario.images {
        let artifact = catalog
            .artifact(&image.version)
            .ok_or_else(|| SlotsError::NoArtifact {
                version: image.version.value.clone(),
            })?;
        put_slot(&source, &artifact, key)?;
    }
    Ok(source)
}

/// Puts one build's slot on `source`, signed with `key`, in place of the version's files there.
pub(crate) fn put_slot(
    source: &MemorySource,
    artifact: &SlotArtifact,
    key: &SlotKeyPair,
) -> Result<(), SlotsError> {
    let version = &artifact.version;
    let boot = BootSpec {
        linux: "vmlinuz".into(),
        initrd: Some("initrd.img".into()),
        options: "console=ttyS0 panic=10".into(),
    };
    let files = [
        ("vmlinuz".to_owned(), artifact.kernel.clone()),
        ("initrd.img".to_owned(), artifact.initrd.clone()),
    ];
    let mut manifest =
        SlotManifest::describe(version, &files, boot).map_err(|source| SlotsError::Describe {
            version: version.clone(),
            source,
        })?;
    manifest.sign(key.signing());
    source.put(version, MANIFEST, manifest.to_json());
    source.put(version, "vmlinuz", artifact.kernel.clone());
    source.put(version, "initrd.img", artifact.initrd.clone());
    Ok(())
}

/// A bad answer of the image server and how many more requests get it (`None`: all).
type ServerFault = (ImageServerAnswer, Option<u32>);

/// The image server as one node sees it: the lab's server, through the node's network link
/// (fault `partition`) and a switch that cuts the node's power in the middle of the next
/// download (fault `powerCut: {during: download}`), with the node's own builds of some versions
/// (fault `bootFailure`) in place of the lab's.
#[derive(Debug, Clone)]
pub struct NodeSource {
    inner: MemorySource,
    /// This node's own builds, served for the versions in `own_versions`.
    own: MemorySource,
    own_versions: Arc<Mutex<BTreeSet<String>>>,
    link: Link,
    cut_next_download: Arc<AtomicBool>,
    machine: Arc<Mutex<Option<SimHandle>>>,
    /// A bad answer for the next requests.
    fault: Arc<Mutex<Option<ServerFault>>>,
}

impl NodeSource {
    fn new(inner: MemorySource, link: Link) -> Self {
        Self {
            inner,
            own: MemorySource::new(),
            own_versions: Arc::default(),
            link,
            cut_next_download: Arc::default(),
            machine: Arc::default(),
            fault: Arc::default(),
        }
    }

    /// The bad answer for this request, if one is set (and counts it).
    fn take_fault(&self) -> Option<ImageServerAnswer> {
        let mut fault = self.fault.locked();
        let (answer, remaining) = (*fault)?;
        match remaining {
            Some(0) => {
                *fault = None;
                return None;
            }
            Some(n) => *fault = Some((answer, Some(n - 1))),
            None => {}
        }
        Some(answer)
    }

    /// From now on this node downloads `artifact` (signed with `key`) for its version.
    pub(crate) fn own_build(
        &self,
        artifact: &SlotArtifact,
        key: &SlotKeyPair,
    ) -> Result<(), SlotsError> {
        put_slot(&self.own, artifact, key)?;
        self.own_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(artifact.version.clone());
        Ok(())
    }

    /// This node downloads the lab's build of `version` again.
    pub(crate) fn drop_own_build(&self, version: &str) {
        self.own_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(version);
    }

    /// Where this node's downloads of `version` come from: its own build, else the lab's.
    fn serving(&self, version: &str) -> &MemorySource {
        let own = self
            .own_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(version);
        if own { &self.own } else { &self.inner }
    }
}

#[async_trait::async_trait]
impl ArtifactSource for NodeSource {
    async fn fetch(
        &self,
        base: &str,
        version: &str,
        name: &str,
        limit: BodyLimit,
    ) -> Result<Vec<u8>, FetchError> {
        if self.cut_next_download.swap(false, Ordering::SeqCst) {
            let machine = self.machine.locked().clone();
            if let Some(machine) = machine {
                machine.print(&format!("rackproof-agent: downloading {version}/{name}"));
                machine.cut_power();
            }
            std::future::pending::<()>().await;
        }
        let url = inplace_agent::osupdate::source::artifact_url(base, version, name);
        if self.link.is_down() {
            return Err(FetchError::Network {
                url,
                detail: Link::unreachable().to_string(),
            });
        }
        match self.take_fault() {
            None => {
                self.serving(version)
                    .fetch(base, version, name, limit)
                    .await
            }
            Some(ImageServerAnswer::Unreachable) => Err(FetchError::Network {
                url,
                detail: "connection refused (lab fault)".to_owned(),
            }),
            Some(ImageServerAnswer::Status(404)) => Err(FetchError::NotFound { url }),
            Some(ImageServerAnswer::Status(status @ (408 | 429 | 500..=599))) => {
                Err(FetchError::Network {
                    url,
                    detail: format!("HTTP {status}"),
                })
            }
            Some(ImageServerAnswer::Status(status)) => Err(FetchError::Refused { url, status }),
            Some(ImageServerAnswer::Corrupt) => {
                let mut bytes = self
                    .serving(version)
                    .fetch(base, version, name, limit)
                    .await?;
                // The manifest stays intact so the slot's own checksums catch the damage.
                if name != MANIFEST
                    && let Some(last) = bytes.last_mut()
                {
                    *last ^= 0xff;
                }
                Ok(bytes)
            }
        }
    }
}

/// The agent's state store on the node's disk: once the machine has lost power, nothing more is
/// written (the process is dead; in the simulation its task only stops at its next await).
#[derive(Debug, Clone)]
pub struct DiskStore {
    inner: MemoryStore,
    disk: Arc<Mutex<Option<MemEsp>>>,
}

impl DiskStore {
    async fn powered(&self) {
        let disk = self.disk.locked().clone();
        if disk.is_some_and(|esp| !esp.is_powered()) {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait::async_trait]
impl StateStore for DiskStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key).await
    }

    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.powered().await;
        self.inner.put(key, value).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.powered().await;
        self.inner.delete(key).await
    }
}

/// The agent as a simulated machine's OS payload. What lives on the node's disk (the state
/// store, the files, the kubelet's version) outlives reboots; the binding (which pool, which
/// OSC Secret) is set by the machine provider when it hands the machine to a Machine object.
pub struct AgentGuest {
    pub node: String,
    pub binding: Arc<Mutex<Option<AgentConfig>>>,
    pub client: kube::Client,
    pub kubelet: HeartbeatKubelet,
    pub store: DiskStore,
    pub files: MemoryFiles,
    pub source: NodeSource,
    pub public_key: VerifyingKey,
    /// The node's network: the agent, the kubelet and the downloads go through it.
    pub(crate) link: Link,
    /// Labels the kubelet registers the Node with, beside the pool's (the run's own on an
    /// existing cluster).
    pub(crate) node_labels: BTreeMap<String, String>,
}

impl AgentGuest {
    /// The agent of `node`, talking to the API server as that node, with the kubelet at
    /// `kubelet_version`.
    pub fn new(
        node: &str,
        client: kube::Client,
        kubelet_version: &str,
        source: MemorySource,
        public_key: VerifyingKey,
    ) -> Self {
        let link = Link::default();
        let client = link.client(client);
        Self {
            node: node.to_owned(),
            binding: Arc::default(),
            kubelet: HeartbeatKubelet::new(client.clone(), node, Some(kubelet_version.to_owned())),
            client,
            store: DiskStore {
                inner: MemoryStore::new(),
                disk: Arc::default(),
            },
            files: MemoryFiles::new(),
            source: NodeSource::new(source, link.clone()),
            public_key,
            link,
            node_labels: BTreeMap::new(),
        }
    }

    /// This guest, its kubelet registering the Node with `labels` too.
    pub(crate) fn with_node_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.node_labels = labels;
        self
    }

    /// The machine's disk, whose power state the store follows.
    pub fn attach_disk(&self, esp: MemEsp) {
        *self.store.disk.locked() = Some(esp);
    }

    /// Binds the node to a pool: the next boot's agent runs with `config`.
    pub fn bind(&self, config: Option<AgentConfig>) {
        *self.binding.locked() = config;
    }

    /// Makes the image server answer this node's next `count` requests (all, when absent) badly.
    pub fn image_server_fault(&self, answer: ImageServerAnswer, count: Option<u32>) {
        *self.source.fault.locked() = Some((answer, count));
    }

    /// Arms the download power cut.
    pub fn cut_power_at_next_download(&self) {
        self.source.cut_next_download.store(true, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for AgentGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentGuest")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl GuestOs for AgentGuest {
    fn services(&self) -> &'static [&'static str] {
        &[KUBELET_SERVICE, AGENT_SERVICE]
    }

    fn start(&self, service: &str, ctx: GuestContext) -> GuestTask {
        let Some(config) = self.binding.locked().clone() else {
            // A machine no Machine object owns: the OS is up, but nothing tells it where to go.
            ctx.machine
                .print(&format!("{service}: no node configuration; not starting"));
            return Box::pin(std::future::pending());
        };
        if service == KUBELET_SERVICE {
            return self.kubelet(&config, &ctx);
        }
        *self.source.machine.locked() = Some(ctx.machine.clone());
        let clock: Clock = ctx.clock.clone();
        let booted = FixedBooted::new(LoaderHint {
            boot_count_path: ctx.loader_boot_count_path.clone(),
            entry_selected: Some(ctx.loader_entry_selected.clone()),
        });
        let env = OsUpdateEnv {
            esp: Some(ctx.esp.clone()),
            source: Some(Arc::new(self.source.clone())),
            public_key: Some(self.public_key),
            booted: Some(Arc::new(booted.clone())),
        };
        let machine = ctx.machine.clone();
        let platform = Platform {
            store: Arc::new(self.store.clone()),
            files: Arc::new(self.files.clone()),
            kubelet: Arc::new(self.kubelet.clone()),
            reboot: Arc::new(CallbackReboot::new(move || machine.reboot())),
            os_version: Arc::new(FixedOsVersion::new(ctx.os_version.clone())),
            boot: Arc::new(EspAssessor::new(
                ctx.esp.clone(),
                Arc::new(booted),
                ENTRY_PREFIX,
            )),
            os_update: Arc::new(InProcessRunner::new(env, clock.clone())),
        };
        let agent = Agent::new(config, platform, self.client.clone(), clock);
        let span = tracing::info_span!("component", name = %"agent", node = %self.node);
        Box::pin(async move { agent.run().await }.instrument(span))
    }
}

impl AgentGuest {
    /// The kubelet's service: the heartbeat of the node, reporting the running OS version and
    /// the kubelet version the agent last applied (kept on the node's disk).
    fn kubelet(&self, config: &AgentConfig, ctx: &GuestContext) -> GuestTask {
        let heartbeat = Heartbeat::new(
            self.client.clone(),
            &config.node_name,
            &config.pool,
            HeartbeatConfig {
                labels: self.node_labels.clone(),
                ..HeartbeatConfig::default()
            },
            ctx.clock.clone(),
        );
        let os = FixedOsVersion::new(ctx.os_version.clone());
        let kubelet = self.kubelet.clone();
        Box::pin(async move { heartbeat.run(&os, &kubelet).await })
    }
}

/// The agent configuration for a simulated node.
pub(crate) fn agent_config(node: &str, pool: &str, osc: &OscLocation) -> AgentConfig {
    AgentConfig::new(node, pool, &osc.namespace, &osc.name)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::load::load_str;

    const SCENARIO: &str = "lab: { nodes: 2 }\nimages:\n  - version: \"1.0.0\"\n  - version: \"1.1.0\"\n    boot: panics\n  - version: \"1.2.0\"\n    boot: { bootsVersion: \"1.0.0\" }\npool: { strategy: AutoInPlaceUpdate, os: \"1.0.0\", kubernetes: \"1.34.2\" }\n";

    #[test]
    fn the_catalog_carries_each_image_behaviour() {
        let loaded = load_str(std::path::Path::new("s.yaml"), SCENARIO).unwrap();
        let catalog = catalog(&loaded.scenario);
        assert_eq!(catalog.image("1.0.0").unwrap().behaviour, Behaviour::Boots);
        assert_eq!(
            catalog.image("1.1.0").unwrap().behaviour,
            Behaviour::PanicsAtBoot
        );
        assert_eq!(
            catalog.image("1.2.0").unwrap().behaviour,
            Behaviour::ReportsVersion("1.0.0".into())
        );
    }

    const ANY: BodyLimit = BodyLimit::AtMost(u64::MAX);

    #[tokio::test]
    async fn the_image_server_offers_a_verifiable_signed_slot_per_version() {
        let loaded = load_str(std::path::Path::new("s.yaml"), SCENARIO).unwrap();
        let catalog = catalog(&loaded.scenario);
        let key = SlotKeyPair::from_seed([7; 32]);
        let server = image_server(&loaded.scenario, &catalog, &key).unwrap();
        for version in ["1.0.0", "1.1.0", "1.2.0"] {
            let manifest = server
                .fetch("memory://", version, "manifest.json", ANY)
                .await
                .unwrap();
            let manifest = SlotManifest::parse(&manifest).unwrap();
            manifest.verify(&key.public()).unwrap();
            let kernel = server
                .fetch("memory://", version, "vmlinuz", ANY)
                .await
                .unwrap();
            assert_eq!(kernel, catalog.artifact(version).unwrap().kernel);
            manifest
                .file("vmlinuz")
                .unwrap()
                .check(version, &kernel)
                .unwrap();
        }
        let other = SlotKeyPair::from_seed([8; 32]);
        let manifest = SlotManifest::parse(
            &server
                .fetch("memory://", "1.0.0", "manifest.json", ANY)
                .await
                .unwrap(),
        )
        .unwrap();
        assert!(
            manifest.verify(&other.public()).is_err(),
            "a slot verifies only against the lab's key"
        );
    }

    /// The kernel a node downloads for `version` through `source`, checked against the manifest.
    async fn downloaded_kernel(source: &NodeSource, key: &SlotKeyPair, version: &str) -> Vec<u8> {
        let manifest = source
            .fetch("memory://", version, MANIFEST, ANY)
            .await
            .unwrap();
        let manifest = SlotManifest::parse_verified(&manifest, &key.public()).unwrap();
        let kernel = source
            .fetch("memory://", version, "vmlinuz", ANY)
            .await
            .unwrap();
        manifest
            .file("vmlinuz")
            .unwrap()
            .check(version, &kernel)
            .unwrap();
        kernel
    }

    #[tokio::test]
    async fn a_nodes_own_build_shadows_one_version_until_a_publish_replaces_it() {
        let loaded = load_str(std::path::Path::new("s.yaml"), SCENARIO).unwrap();
        let key = SlotKeyPair::from_seed([7; 32]);
        let lab = image_server(&loaded.scenario, &catalog(&loaded.scenario), &key).unwrap();
        let node = NodeSource::new(lab.clone(), Link::default());
        let other = NodeSource::new(lab.clone(), Link::default());
        let build =
            |version: &str, behaviour: Behaviour| SlotArtifact::build(version, &behaviour).kernel;

        node.own_build(
            &SlotArtifact::build("1.0.0", &Behaviour::PanicsAtBoot),
            &key,
        )
        .unwrap();
        assert_eq!(
            downloaded_kernel(&node, &key, "1.0.0").await,
            build("1.0.0", Behaviour::PanicsAtBoot)
        );
        assert_eq!(
            downloaded_kernel(&node, &key, "1.1.0").await,
            build("1.1.0", Behaviour::PanicsAtBoot),
            "the other versions are the lab's builds"
        );
        assert_eq!(
            downloaded_kernel(&other, &key, "1.0.0").await,
            build("1.0.0", Behaviour::Boots),
            "the other nodes get the lab's build"
        );

        // A publish replaces the lab's build, and the node's own is dropped.
        put_slot(
            &lab,
            &SlotArtifact::build("1.0.0", &Behaviour::HangsAtBoot),
            &key,
        )
        .unwrap();
        node.drop_own_build("1.0.0");
        for source in [&node, &other] {
            assert_eq!(
                downloaded_kernel(source, &key, "1.0.0").await,
                build("1.0.0", Behaviour::HangsAtBoot)
            );
        }
    }
}
