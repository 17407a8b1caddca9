//! A simulated machine and the orchestrator's part, for the agent's integration tests.
//!
//! The machine has an in-memory ESP (`inplace_boot::MemEsp`) booted by `inplace_boot::boot` (the
//! systemd-boot 252 rules), an in-memory state store that outlives agent restarts, and a reboot
//! that aborts the agent task, boots the ESP again and starts a new agent. Slots whose version is
//! in `broken` "panic" at boot: the loader's counter goes down and the machine boots again, until
//! systemd-boot falls back. The harness plays the orchestrator: it sets `ReadyForUpdate`.

#![expect(
    unreachable_pub,
    reason = "test support module: items are public to the test binary"
)]

mod recording;
use recording::recording;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_agent::assess::EspAssessor;
use inplace_agent::assess::booted::{FixedBooted, LoaderHint};
use inplace_agent::heartbeat::Heartbeat;
use inplace_agent::manifest::{BootSpec, SlotKeyPair, SlotManifest};
use inplace_agent::osupdate::OsUpdateEnv;
use inplace_agent::osupdate::runner::{
    InProcessRunner, OsUpdateInvocation, OsUpdateOutcome, OsUpdateRunner, RunError,
};
use inplace_agent::osupdate::source::MemorySource;
use inplace_agent::platform::files::MemoryFiles;
use inplace_agent::platform::kubelet::HeartbeatKubelet;
use inplace_agent::platform::os_version::FixedOsVersion;
use inplace_agent::platform::reboot::CallbackReboot;
use inplace_agent::store::{MemoryStore, StateStore, StoreError};
use inplace_agent::{Agent, AgentConfig, HeartbeatConfig, Platform, TokenSecret};
use inplace_api::keys;
use inplace_api::keys::OsUpdateExit;
use inplace_api::osc::secret::encode_secret;
use inplace_api::osc::{
    InPlaceUpdates, OperatingSystemConfig, OsUpdate, OscKubelet, OscSpec, OscStatus,
};
use inplace_boot::{EntryConf, LoaderVars, MemEsp, NewEntry};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::json;
use tokio::sync::mpsc;

pub const NODE: &str = "worker-1";
pub const POOL: &str = "pool-a";
pub const SECRET: &str = "gardener-node-agent-pool-a-0123456789abcdef";
pub const IMAGE_SERVER: &str = "http://images.lab/slots";
pub const AGENT: &str = "/opt/rackproof/bin/rackproof-agent";

/// A store that "crashes" the agent right after its `n`-th write.
#[derive(Debug, Clone)]
pub struct CrashingStore {
    inner: MemoryStore,
    writes: Arc<AtomicU64>,
    crash_after: Arc<Mutex<Option<u64>>>,
    saved: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The crash tears the write it interrupts: only the first half of the document lands.
    tear: bool,
    crashed: mpsc::UnboundedSender<Event>,
}

#[async_trait::async_trait]
impl StateStore for CrashingStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key).await
    }
    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.inner.put(key, value).await?;
        if key == inplace_agent::state::STATE_KEY {
            self.saved.lock().unwrap().push(value.to_vec());
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let crash = {
            let mut at = self.crash_after.lock().unwrap();
            if *at == Some(n) {
                *at = None;
                true
            } else {
                false
            }
        };
        if crash {
            if self.tear {
                self.inner.put(key, &value[..value.len() / 2]).await?;
            }
            let _ = self.crashed.send(Event::Crash);
            std::future::pending::<()>().await;
        }
        Ok(())
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
}

/// Counts runs and lets a script decide exit codes (0 runs the real command in-process).
#[derive(Debug)]
pub struct CountingRunner {
    real: InProcessRunner,
    pub script: Mutex<VecDeque<i32>>,
    pub attempts: Mutex<Vec<u32>>,
}

#[async_trait::async_trait]
impl OsUpdateRunner for CountingRunner {
    async fn run(&self, invocation: &OsUpdateInvocation) -> Result<OsUpdateOutcome, RunError> {
        self.attempts.lock().unwrap().push(invocation.attempt);
        let scripted = self.script.lock().unwrap().pop_front();
        match scripted {
            Some(code) if code != 0 => Ok(OsUpdateOutcome {
                exit: OsUpdateExit::from_code(code),
                output: format!("scripted exit {code}"),
            }),
            _ => self.real.run(invocation).await,
        }
    }
}

#[derive(Debug)]
pub enum Event {
    Reboot,
    Crash,
}

pub struct Sim {
    pub server: ApiServer,
    pub client: kube::Client,
    pub clock: Clock,
    pub esp: MemEsp,
    pub store: MemoryStore,
    pub files: MemoryFiles,
    pub os: FixedOsVersion,
    pub booted: FixedBooted,
    pub vars: LoaderVars,
    pub source: MemorySource,
    pub key: SlotKeyPair,
    pub kubelet: HeartbeatKubelet,
    pub runner: Arc<CountingRunner>,
    pub broken: BTreeSet<String>,
    pub boots: Vec<String>,
    pub reboots: u32,
    pub restarts: u32,
    pub crash_after: Arc<Mutex<Option<u64>>>,
    /// The crash at `crash_after` leaves that state write torn (half written).
    pub tear_on_crash: bool,
    pub writes: Arc<AtomicU64>,
    /// Every state document the agent wrote, in order.
    pub saved: Arc<Mutex<Vec<Vec<u8>>>>,
    pub boot_id: Arc<AtomicU64>,
    pub config: AgentConfig,
    /// Every request the agent sent, as "METHOD path?query".
    pub requests: Arc<Mutex<Vec<String>>>,
    events_tx: mpsc::UnboundedSender<Event>,
    events: mpsc::UnboundedReceiver<Event>,
    /// The agent's task.
    task: Option<tokio::task::JoinHandle<()>>,
    /// The kubelet's task (the heartbeat), apart from the agent's.
    kubelet_task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        for task in [self.task.take(), self.kubelet_task.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}

pub fn epoch() -> jiff::Timestamp {
    "2025-01-01T00:00:00Z".parse().unwrap()
}

pub fn osc(os: &str, kubelet: &str, ca: Option<&str>, sa: Option<&str>) -> OperatingSystemConfig {
    let time = |t: Option<&str>| {
        t.map(|t| inplace_api::crd::RotationTimes {
            last_initiation_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                t.parse().unwrap(),
            )),
        })
    };
    let rotation = inplace_api::crd::CredentialsRotation {
        certificate_authorities: time(ca),
        service_account_key: time(sa),
    };
    OperatingSystemConfig::new(
        OscSpec {
            pool: POOL.into(),
            in_place_updates: Some(InPlaceUpdates {
                operating_system_version: os.into(),
                kubelet: OscKubelet {
                    version: kubelet.into(),
                    cpu_manager_policy: None,
                    eviction_hard: None,
                    kube_reserved: None,
                    system_reserved: None,
                },
                credentials_rotation: Some(rotation),
            }),
            files: vec![inplace_api::osc::File::inline(
                "/etc/motd",
                Some(0o644),
                format!("os {os}\n").as_bytes(),
            )],
        },
        Some(OscStatus {
            in_place_updates: Some(inplace_api::osc::InPlaceUpdatesStatus {
                os_update: Some(OsUpdate {
                    command: AGENT.into(),
                    args: vec![
                        "os-update".into(),
                        "--version".into(),
                        os.into(),
                        "--image-server".into(),
                        IMAGE_SERVER.into(),
                    ],
                }),
            }),
        }),
    )
}

pub fn slot_files(version: &str) -> (Vec<u8>, Vec<u8>) {
    (
        format!("kernel {version}").into_bytes(),
        format!("initrd {version}").into_bytes(),
    )
}

impl Sim {
    /// A node running `1.0.0` (blessed entry) with kubelet 1.30.4, OSC at the same versions.
    pub async fn new() -> Self {
        let clock = Clock::simulated(epoch());
        let server = ApiServer::new(clock.clone());
        let client = server.admin_client();
        let esp = MemEsp::new(64 << 20);
        inplace_boot::write_loader_conf(&esp, &inplace_boot::LoaderConf::default()).unwrap();
        let (kernel, initrd) = slot_files("1.0.0");
        let conf = EntryConf {
            title: Some("Rackproof 1.0.0".into()),
            version: Some("1.0.0".into()),
            ..Default::default()
        };
        let name = inplace_boot::install_entry(
            &esp,
            &NewEntry {
                stem: "rackproof-1.0.0",
                conf,
                kernel: &kernel,
                initrd: Some(&initrd),
                tries: 3,
            },
            None,
        )
        .unwrap();
        inplace_boot::bless(&esp, &name).unwrap();
        let (events_tx, events) = mpsc::unbounded_channel();
        let source = MemorySource::new();
        let key = SlotKeyPair::from_seed([42; 32]);
        let booted = FixedBooted::default();
        let os = FixedOsVersion::new("unbooted");
        let env = OsUpdateEnv {
            esp: Some(Arc::new(esp.clone())),
            source: Some(Arc::new(source.clone())),
            public_key: Some(key.public()),
            booted: Some(Arc::new(booted.clone())),
        };
        let runner = Arc::new(CountingRunner {
            real: InProcessRunner::new(env, clock.clone()),
            script: Mutex::new(VecDeque::new()),
            attempts: Mutex::new(Vec::new()),
        });
        let mut config = AgentConfig::new(NODE, POOL, "kube-system", SECRET);
        config.token_secrets = vec![TokenSecret {
            namespace: "kube-system".into(),
            name: "node-token".into(),
            key: "token".into(),
            path: "/var/lib/rackproof/token".into(),
        }];
        let kubelet = HeartbeatKubelet::new(client.clone(), NODE, Some("1.30.4".into()));
        let sim = Self {
            server,
            client,
            clock,
            esp,
            store: MemoryStore::new(),
            files: MemoryFiles::new(),
            os,
            booted,
            vars: LoaderVars::default(),
            source,
            key,
            kubelet,
            runner,
            broken: BTreeSet::new(),
            boots: Vec::new(),
            reboots: 0,
            restarts: 0,
            crash_after: Arc::new(Mutex::new(None)),
            tear_on_crash: false,
            writes: Arc::new(AtomicU64::new(0)),
            saved: Arc::default(),
            boot_id: Arc::new(AtomicU64::new(0)),
            config,
            requests: Arc::default(),
            events_tx,
            events,
            task: None,
            kubelet_task: None,
        };
        for version in ["1.0.0", "2.0.0"] {
            sim.publish(version);
        }
        let secrets: Api<Secret> = Api::namespaced(sim.client.clone(), "kube-system");
        let token = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("node-token".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "token".to_owned(),
                ByteString(b"token-1".to_vec()),
            )])),
            ..Default::default()
        };
        secrets
            .create(&PostParams::default(), &token)
            .await
            .unwrap();
        sim.set_osc(&osc("1.0.0", "1.30.4", None, None)).await;
        sim
    }

    /// Publishes a signed slot for `version`.
    pub fn publish(&self, version: &str) {
        let (kernel, initrd) = slot_files(version);
        let boot = BootSpec {
            linux: "vmlinuz".into(),
            initrd: Some("initrd.img".into()),
            options: "console=ttyS0".into(),
        };
        let mut manifest = SlotManifest::describe(
            version,
            &[
                ("vmlinuz".into(), kernel.clone()),
                ("initrd.img".into(), initrd.clone()),
            ],
            boot,
        )
        .unwrap();
        manifest.sign(self.key.signing());
        self.source
            .put(version, "manifest.json", manifest.to_json());
        self.source.put(version, "vmlinuz", kernel);
        self.source.put(version, "initrd.img", initrd);
    }

    pub async fn set_osc(&self, osc: &OperatingSystemConfig) {
        let secret = encode_secret(osc, SECRET, "kube-system").unwrap();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), "kube-system");
        match secrets.get_opt(SECRET).await.unwrap() {
            None => {
                secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .unwrap();
            }
            Some(existing) => {
                let mut secret = secret;
                secret.metadata.resource_version = existing.metadata.resource_version;
                secrets
                    .replace(SECRET, &PostParams::default(), &secret)
                    .await
                    .unwrap();
            }
        }
    }

    /// The firmware and systemd-boot: boot until a slot that is not broken comes up.
    pub fn power_on(&mut self) {
        for _ in 0..20 {
            let record = inplace_boot::boot(&self.esp, &mut self.vars)
                .unwrap()
                .expect("an entry to boot");
            let version = record.entry.conf.version.clone().unwrap_or_default();
            self.boots.push(version.clone());
            self.boot_id.fetch_add(1, Ordering::SeqCst);
            if self.broken.contains(&version) {
                continue;
            }
            self.os.set(version);
            self.booted.set(LoaderHint {
                boot_count_path: record.loader_boot_count_path.clone(),
                entry_selected: Some(record.loader_entry_selected.clone()),
            });
            return;
        }
        panic!("the machine never booted: every entry fails");
    }

    fn start_agent(&mut self) {
        let events = self.events_tx.clone();
        let boot_id = self.boot_id.clone();
        let reboot = CallbackReboot::new(move || {
            let _ = events.send(Event::Reboot);
        })
        .with_boot_id(move || boot_id.load(Ordering::SeqCst).to_string());
        let store = CrashingStore {
            inner: self.store.clone(),
            writes: self.writes.clone(),
            crash_after: self.crash_after.clone(),
            saved: self.saved.clone(),
            tear: self.tear_on_crash,
            crashed: self.events_tx.clone(),
        };
        let platform = Platform {
            store: Arc::new(store),
            files: Arc::new(self.files.clone()),
            kubelet: Arc::new(self.kubelet.clone()),
            reboot: Arc::new(reboot),
            os_version: Arc::new(self.os.clone()),
            boot: Arc::new(EspAssessor::new(
                Arc::new(self.esp.clone()),
                Arc::new(self.booted.clone()),
                "rackproof",
            )),
            os_update: self.runner.clone(),
        };
        let agent = Agent::new(
            self.config.clone(),
            platform,
            recording(self.server.node_client(NODE), self.requests.clone()),
            self.clock.clone(),
        );
        self.task = Some(tokio::spawn(async move { agent.run().await }));
    }

    /// Starts the kubelet's part (the heartbeat) of the running boot, as its own task.
    fn start_kubelet(&mut self) {
        if let Some(task) = self.kubelet_task.take() {
            task.abort();
        }
        let heartbeat = Heartbeat::new(
            self.server.node_client(NODE),
            NODE,
            POOL,
            HeartbeatConfig::default(),
            self.clock.clone(),
        );
        let (os, kubelet) = (self.os.clone(), self.kubelet.clone());
        self.kubelet_task = Some(tokio::spawn(
            async move { heartbeat.run(&os, &kubelet).await },
        ));
    }

    /// Kills the agent alone (the kubelet runs on), as `kill -9` of its process would.
    pub fn kill_agent(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Powers the machine on (first boot), starts the kubelet and the agent and waits until the
    /// agent applied the initial OSC.
    pub async fn start(&mut self) {
        self.server.bind_node_to_pool(NODE, POOL);
        self.server.allow_node_secret(POOL, "kube-system", SECRET);
        self.server
            .allow_node_secret(POOL, "kube-system", "node-token");
        self.power_on();
        self.start_kubelet();
        self.start_agent();
        let node = self
            .wait_for(
                |n| {
                    n.is_some_and(|n| {
                        annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).is_some()
                    })
                },
                Duration::from_secs(120),
            )
            .await;
        assert!(
            node.is_some_and(|n| annotation(&n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC).is_some()),
            "the agent never applied the initial OSC"
        );
    }

    fn handle(&mut self, event: Event) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        match event {
            Event::Reboot => {
                self.reboots += 1;
                self.power_on();
                self.start_kubelet();
            }
            Event::Crash => self.restarts += 1,
        }
        self.start_agent();
    }

    pub async fn node(&self) -> Option<Node> {
        Api::<Node>::all(self.client.clone())
            .get_opt(NODE)
            .await
            .unwrap()
    }

    /// Runs the simulation (handling reboots and crashes) until `done(node)` or `limit` passes.
    pub async fn wait_for(
        &mut self,
        done: impl Fn(Option<&Node>) -> bool,
        limit: Duration,
    ) -> Option<Node> {
        let deadline = self.clock.instant() + limit;
        loop {
            let node = self.node().await;
            if done(node.as_ref()) {
                return node;
            }
            if self.clock.instant() >= deadline {
                return node;
            }
            tokio::select! {
                Some(event) = self.events.recv() => self.handle(event),
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Plays the orchestrator: `InPlaceUpdate` condition with reason `ReadyForUpdate`.
    pub async fn ready_for_update(&self) {
        let patch = json!({"status": {"conditions": [{
            "type": keys::CONDITION_IN_PLACE_UPDATE, "status": "True", "reason": keys::REASON_READY_FOR_UPDATE,
            "message": "drained", "lastTransitionTime": "2025-01-01T00:00:00Z",
        }]}});
        Api::<Node>::all(self.client.clone())
            .patch_status(NODE, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
    }

    pub async fn wait_result(&mut self, limit: Duration) -> Node {
        let node = self
            .wait_for(
                |n| n.is_some_and(|n| label(n, keys::LABEL_UPDATE_RESULT).is_some()),
                limit,
            )
            .await
            .unwrap();
        assert!(
            label(&node, keys::LABEL_UPDATE_RESULT).is_some(),
            "no update result within {limit:?}: {:?}",
            node.metadata
        );
        node
    }

    pub fn entries(&self) -> Vec<String> {
        inplace_boot::entry_files(&self.esp)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n.file_name().to_owned())
            .collect()
    }

    pub fn attempts(&self) -> Vec<u32> {
        self.runner.attempts.lock().unwrap().clone()
    }

    pub async fn add_pod(&self, name: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }

    pub async fn pod(&self, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .get_opt(name)
            .await
            .unwrap()
    }
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}
