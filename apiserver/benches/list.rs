//! The embedded server's side of `ci/bench`'s 10,000-node list, without the real control plane:
//! creates 10,000 Nodes shaped like the benchmark's through the in-process transport, then
//! prints the median time of a full list read as bytes and deserialized into `k8s_openapi`
//! Nodes, and of a single get.
//!
//! `cargo bench -p rackproof-apiserver --bench list` (`LIST_ROUNDS=N` for more rounds than 5,
//! e.g. under a profiler).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const NODES: usize = 10_000;
const DEFAULT_ROUNDS: usize = 5;

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> Result<(), BoxError> {
    let clock = Clock::wall();
    let server = ApiServer::new(clock.clone());
    let client = server.admin_client();
    let api: Api<Node> = Api::all(client.clone());
    let start = clock.instant();
    for i in 0..NODES {
        let node = serde_json::from_value(json!({
            "metadata": {
                "name": format!("bench-node-{i:05}"),
                "labels": { "worker.gardener.cloud/pool": format!("pool-{}", i % 10), "kubernetes.io/hostname": format!("bench-node-{i:05}") },
            },
            "spec": { "podCIDR": "10.1.0.0/24", "providerID": format!("rackproof://bench-node-{i:05}") },
        }))?;
        api.create(&PostParams::default(), &node).await?;
    }
    println!(
        "{NODES} node creates (one client): {:.3} s",
        clock.since(start).as_secs_f64()
    );

    let rounds = std::env::var("LIST_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(DEFAULT_ROUNDS);
    let mut raw = Vec::new();
    let mut size = 0;
    for _ in 0..rounds {
        let request = http::Request::get("/api/v1/nodes").body(Vec::new())?;
        let start = clock.instant();
        let text = client.request_text(request).await?;
        raw.push(clock.since(start));
        size = text.len();
    }
    let mut typed = Vec::new();
    for _ in 0..rounds {
        let start = clock.instant();
        let list = api.list(&ListParams::default()).await?;
        typed.push(clock.since(start));
        if list.items.len() != NODES {
            return Err(format!("listed {} nodes, expected {NODES}", list.items.len()).into());
        }
    }
    let mut gets = Vec::new();
    for i in 0..rounds {
        let start = clock.instant();
        api.get(&format!("bench-node-{i:05}")).await?;
        gets.push(clock.since(start));
    }
    println!(
        "list of {NODES} nodes as bytes ({size} bytes): median {:.4} s (first {:.4} s)",
        median(&raw),
        raw[0].as_secs_f64()
    );
    println!(
        "list of {NODES} nodes as k8s_openapi Nodes: median {:.4} s",
        median(&typed)
    );
    println!("get of one node: median {:.1} µs", median(&gets) * 1e6);
    Ok(())
}

fn median(times: &[Duration]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2].as_secs_f64()
}
