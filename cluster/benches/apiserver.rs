//! Benchmark: the embedded API server against the real control plane, with the same kube-rs code.
//!
//! Run it with `ci/bench` (release mode; installs etcd and builds kube-apiserver first), or
//! `cargo bench -p rackproof-cluster --bench apiserver`.
//!
//! Three targets, measured one after the other in the same run on the same machine:
//! (a) the embedded server through its in-process transport, (b) the embedded server over HTTPS on
//! 127.0.0.1, (c) etcd + kube-apiserver v1.20.2 (the `local` provider). Measurements:
//!
//! 1. lease renewals per second: 32 clients (each its own `kube::Client`, so its own connection)
//!    renewing their own Lease with JSON merge patches for a fixed wall-time window;
//! 2. watch events delivered per second with 10 and with 1,000 watchers: every watcher watches
//!    one namespace's ConfigMaps from a known resourceVersion while 8 writers create a fixed
//!    number of ConfigMaps; the rate is watchers × writes over the time until the last watcher
//!    has seen every write;
//! 3. 10,000 Nodes created by 32 clients (creates per second), then the time for a full list of
//!    them (the median of three lists, each deserialized into `k8s_openapi` Nodes), and the same
//!    list read as bytes (without the client's parsing, which is the same for every target).
//!
//! Each measurement is bounded (a fixed window, or a fixed number of operations with a time
//! limit); the whole run takes a few minutes. Wall time is read only through
//! `rackproof_clock::Clock`.

use std::error::Error;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rackproof_apiserver::{ApiServer, User};
use rackproof_clock::Clock;
use rackproof_cluster::local::{self, LocalControlPlane, LocalOptions};
use rackproof_std::error_chain;
use serde_json::json;

type BoxError = Box<dyn Error + Send + Sync>;

const LEASE_CLIENTS: usize = 32;
const LEASE_WINDOW: Duration = Duration::from_secs(5);
const WATCH_WRITERS: usize = 8;
const WATCHERS_PER_CLIENT: usize = 50;
const NODES: usize = 10_000;
const NODE_CLIENTS: usize = 32;
const LISTS: usize = 3;
const LIMIT: Duration = Duration::from_secs(60);

/// Where a target's clients come from.
enum Target {
    InProcess(ApiServer),
    Https(rackproof_apiserver::HttpsServer),
    Real(Box<LocalControlPlane>),
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Self::InProcess(_) => "in-process",
            Self::Https(_) => "https",
            Self::Real(_) => "real",
        }
    }

    /// A fresh admin client (its own connection where there are connections).
    async fn client(&self) -> Result<kube::Client, BoxError> {
        Ok(match self {
            Self::InProcess(server) => server.admin_client(),
            Self::Https(https) => https.client(&User::admin()).await?,
            Self::Real(plane) => plane.client_as(&local::User::Admin).await?,
        })
    }

    async fn clients(&self, count: usize) -> Result<Vec<kube::Client>, BoxError> {
        let mut clients = Vec::with_capacity(count);
        for _ in 0..count {
            clients.push(self.client().await?);
        }
        Ok(clients)
    }
}

/// One target's results.
#[derive(Debug, Default, Clone, Copy)]
struct Results {
    lease_renewals_per_s: f64,
    watch_events_per_s_10: f64,
    watch_events_per_s_1000: f64,
    node_creates_per_s: f64,
    node_list_s: f64,
    node_list_raw_s: f64,
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> Result<(), BoxError> {
    let clock = Clock::wall();
    let started = clock.instant();
    eprintln!("bench: starting the real control plane (etcd + kube-apiserver v1.20.2)");
    let plane = LocalControlPlane::start(LocalOptions::default())
        .await
        .map_err(|error| BoxError::from(error_chain(&error)))?;
    let in_process = ApiServer::new(clock.clone());
    let https_server = ApiServer::new(clock.clone());
    let https = https_server
        .serve_https(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await?;
    let targets = [
        Target::InProcess(in_process),
        Target::Https(https),
        Target::Real(Box::new(plane)),
    ];

    let mut results = Vec::new();
    for target in &targets {
        eprintln!("bench: measuring {}", target.name());
        results.push(measure(target, &clock).await?);
    }
    println!("{}", table(&results[0], &results[1], &results[2]));
    println!("whole run: {:.1} s", clock.since(started).as_secs_f64());
    let [_, _, Target::Real(plane)] = targets else {
        unreachable!("the third target is the real one")
    };
    (*plane)
        .shutdown()
        .await
        .map_err(|error| BoxError::from(error_chain(&error)))?;
    Ok(())
}

async fn measure(target: &Target, clock: &Clock) -> Result<Results, BoxError> {
    let mut results = Results {
        lease_renewals_per_s: lease_renewals(target, clock).await?,
        ..Results::default()
    };
    eprintln!("  lease renewals/s: {:.0}", results.lease_renewals_per_s);
    results.watch_events_per_s_10 = watch_events(target, clock, 10, 2_000).await?;
    eprintln!(
        "  watch events/s, 10 watchers: {:.0}",
        results.watch_events_per_s_10
    );
    results.watch_events_per_s_1000 = watch_events(target, clock, 1_000, 100).await?;
    eprintln!(
        "  watch events/s, 1000 watchers: {:.0}",
        results.watch_events_per_s_1000
    );
    let (creates, list, raw) = nodes(target, clock).await?;
    results.node_creates_per_s = creates;
    results.node_list_s = list;
    results.node_list_raw_s = raw;
    eprintln!(
        "  node creates/s: {creates:.0}; list of {NODES} nodes: {list:.3} s ({raw:.3} s as bytes)"
    );
    Ok(results)
}

/// Measurement 1: lease renewals per second with [`LEASE_CLIENTS`] clients doing merge patches.
async fn lease_renewals(target: &Target, clock: &Clock) -> Result<f64, BoxError> {
    let clients = target.clients(LEASE_CLIENTS).await?;
    for (i, client) in clients.iter().enumerate() {
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
        let lease = serde_json::from_value(json!({
            "metadata": { "name": format!("bench-{i}") },
            "spec": { "holderIdentity": format!("bench-{i}"), "leaseDurationSeconds": 40 },
        }))?;
        leases.create(&PostParams::default(), &lease).await?;
    }
    let count = Arc::new(AtomicU64::new(0));
    let start = clock.instant();
    let mut tasks = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        let count = count.clone();
        let clock = clock.clone();
        tasks.push(tokio::spawn(async move {
            let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
            let name = format!("bench-{i}");
            let params = PatchParams::default();
            while clock.since(start) < LEASE_WINDOW {
                let now = clock.now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
                let patch = json!({ "spec": { "renewTime": now } });
                leases.patch(&name, &params, &Patch::Merge(&patch)).await?;
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), kube::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = clock.since(start).as_secs_f64();
    Ok(count.load(Ordering::Relaxed) as f64 / elapsed)
}

/// Measurement 2: watch events delivered per second: `watchers` watchers, `writes` ConfigMap creates.
async fn watch_events(
    target: &Target,
    clock: &Clock,
    watchers: usize,
    writes: usize,
) -> Result<f64, BoxError> {
    let admin = target.client().await?;
    let namespace = format!("bench-watch-{watchers}");
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": namespace } }))?,
        )
        .await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), &namespace);
    let from = configmaps
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();

    // Establish every watch before the first write (a watch call returns once its response
    // has started), spreading the watchers over clients of WATCHERS_PER_CLIENT each.
    let clients = target
        .clients(watchers.div_ceil(WATCHERS_PER_CLIENT))
        .await?;
    let params = WatchParams::default().timeout(LIMIT.as_secs() as u32 * 2);
    let mut streams = Vec::with_capacity(watchers);
    for batch in (0..watchers)
        .collect::<Vec<_>>()
        .chunks(WATCHERS_PER_CLIENT)
    {
        let api: Api<ConfigMap> =
            Api::namespaced(clients[batch[0] / WATCHERS_PER_CLIENT].clone(), &namespace);
        let started =
            futures::future::try_join_all(batch.iter().map(|_| api.watch(&params, &from))).await?;
        streams.extend(started.into_iter().map(Box::pin));
    }
    let delivered = Arc::new(AtomicU64::new(0));
    let start = clock.instant();
    let mut tasks = Vec::with_capacity(watchers);
    for mut stream in streams {
        let delivered = delivered.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < writes {
                match stream.try_next().await? {
                    Some(WatchEvent::Added(_)) => {
                        seen += 1;
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            Ok::<(), kube::Error>(())
        }));
    }
    let writers = target.clients(WATCH_WRITERS).await?;
    let write_all = futures::future::try_join_all(writers.into_iter().enumerate().map(|(w, client)| {
        let namespace = namespace.clone();
        async move {
            let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
            for i in (w..writes).step_by(WATCH_WRITERS) {
                let cm = serde_json::from_value(json!({ "metadata": { "name": format!("cm-{i}") }, "data": { "i": i.to_string() } }))?;
                api.create(&PostParams::default(), &cm).await?;
            }
            Ok::<(), BoxError>(())
        }
    }));
    write_all.await?;
    let all = futures::future::join_all(tasks);
    if clock.timeout(LIMIT, all).await.is_err() {
        eprintln!(
            "  watchers did not see every write within {} s; counting what arrived",
            LIMIT.as_secs()
        );
    }
    let elapsed = clock.since(start).as_secs_f64();
    Ok(delivered.load(Ordering::Relaxed) as f64 / elapsed)
}

/// Measurement 3: creates per second of [`NODES`] Nodes, and the median time of a full list of
/// them, typed (deserialized into `k8s_openapi` Nodes, what a controller pays) and as bytes (the
/// server's part plus transport, without the client's parsing).
async fn nodes(target: &Target, clock: &Clock) -> Result<(f64, f64, f64), BoxError> {
    let clients = target.clients(NODE_CLIENTS).await?;
    let start = clock.instant();
    let create_all = futures::future::try_join_all(clients.into_iter().enumerate().map(|(c, client)| async move {
        let api: Api<Node> = Api::all(client);
        for i in (c..NODES).step_by(NODE_CLIENTS) {
            let node = serde_json::from_value(json!({
                "metadata": {
                    "name": format!("bench-node-{i:05}"),
                    "labels": { "worker.gardener.cloud/pool": format!("pool-{}", i % 10), "kubernetes.io/hostname": format!("bench-node-{i:05}") },
                },
                "spec": { "podCIDR": "10.1.0.0/24", "providerID": format!("rackproof://bench-node-{i:05}") },
            }))?;
            api.create(&PostParams::default(), &node).await?;
        }
        Ok::<(), BoxError>(())
    }));
    clock
        .timeout(LIMIT * 3, create_all)
        .await
        .map_err(|_| "creating the nodes took too long")??;
    let creates = NODES as f64 / clock.since(start).as_secs_f64();

    let api: Api<Node> = Api::all(target.client().await?);
    let mut times = Vec::with_capacity(LISTS);
    for _ in 0..LISTS {
        let start = clock.instant();
        let list = api.list(&ListParams::default()).await?;
        times.push(clock.since(start).as_secs_f64());
        let bench_nodes = list
            .items
            .iter()
            .filter(|n| {
                n.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("bench-node-"))
            })
            .count();
        if bench_nodes != NODES {
            return Err(format!(
                "{} listed {bench_nodes} bench nodes, expected {NODES}",
                target.name()
            )
            .into());
        }
    }
    times.sort_by(f64::total_cmp);
    let client = target.client().await?;
    let mut raw = Vec::with_capacity(LISTS);
    for _ in 0..LISTS {
        let request = http::Request::get("/api/v1/nodes").body(Vec::new())?;
        let start = clock.instant();
        let text = client.request_text(request).await?;
        raw.push(clock.since(start).as_secs_f64());
        if text.len() < NODES * 100 {
            return Err(format!(
                "{} answered a node list of only {} bytes",
                target.name(),
                text.len()
            )
            .into());
        }
    }
    raw.sort_by(f64::total_cmp);
    Ok((creates, times[LISTS / 2], raw[LISTS / 2]))
}

fn table(a: &Results, b: &Results, real: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<38} {:>12} {:>12} {:>12} {:>16} {:>12}",
        "measurement", "in-process", "https", "real", "in-process/real", "https/real"
    );
    let rate = |out: &mut String, name: &str, f: fn(&Results) -> f64| {
        let _ = writeln!(
            out,
            "{name:<38} {:>12.0} {:>12.0} {:>12.0} {:>15.1}x {:>11.1}x",
            f(a),
            f(b),
            f(real),
            f(a) / f(real),
            f(b) / f(real)
        );
    };
    rate(&mut out, "lease renewals/s (32 clients, merge)", |r| {
        r.lease_renewals_per_s
    });
    rate(&mut out, "watch events/s (10 watchers)", |r| {
        r.watch_events_per_s_10
    });
    rate(&mut out, "watch events/s (1000 watchers)", |r| {
        r.watch_events_per_s_1000
    });
    rate(&mut out, "node creates/s (32 clients)", |r| {
        r.node_creates_per_s
    });
    let _ = writeln!(
        out,
        "{:<38} {:>12.3} {:>12.3} {:>12.3} {:>15.1}x {:>11.1}x",
        "list of 10,000 nodes, s (ratio: speedup)",
        a.node_list_s,
        b.node_list_s,
        real.node_list_s,
        real.node_list_s / a.node_list_s,
        real.node_list_s / b.node_list_s
    );
    let _ = writeln!(
        out,
        "{:<38} {:>12.3} {:>12.3} {:>12.3} {:>15.1}x {:>11.1}x",
        "same list as bytes, s (ratio: speedup)",
        a.node_list_raw_s,
        b.node_list_raw_s,
        real.node_list_raw_s,
        real.node_list_raw_s / a.node_list_raw_s,
        real.node_list_raw_s / b.node_list_raw_s
    );
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(out);
    let _ = writeln!(out, "targets (issue 3):");
    let _ = writeln!(
        out,
        "  in-process lease renewals >= 10x real: {:.1}x, {}",
        a.lease_renewals_per_s / real.lease_renewals_per_s,
        verdict(a.lease_renewals_per_s >= 10.0 * real.lease_renewals_per_s)
    );
    let _ = writeln!(
        out,
        "  https lease renewals >= 2x real:       {:.1}x, {}",
        b.lease_renewals_per_s / real.lease_renewals_per_s,
        verdict(b.lease_renewals_per_s >= 2.0 * real.lease_renewals_per_s)
    );
    let _ = writeln!(
        out,
        "  in-process 10,000-node list >= 3x faster: {:.1}x, {}",
        real.node_list_s / a.node_list_s,
        verdict(real.node_list_s >= 3.0 * a.node_list_s)
    );
    let _ = writeln!(
        out,
        "  https 10,000-node list >= 3x faster:      {:.1}x, {}",
        real.node_list_s / b.node_list_s,
        verdict(real.node_list_s >= 3.0 * b.node_list_s)
    );
    out
}
