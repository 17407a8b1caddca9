//! Differential suite: the embedded API server (`rackproof-apiserver`, in-process transport)
//! against a real control plane (etcd + kube-apiserver v1.20.2, the `local` provider).
//!
//! Each test replays one request sequence with kube-rs against both servers and compares the
//! normalized responses step by step: HTTP status code, and the JSON body after [`normalize`]
//! (for `Status` bodies: `code`, `reason`, `status`, `details.name/group/kind` and the causes'
//! `reason`/`field`). Every mismatch of a test is collected and printed together.
//!
//! These tests need `etcd` (Debian `etcd-server`) and the kube-apiserver built by
//! `ci/build-kube-apiserver`; without them they fail, naming `ci/install-local-control-plane`.
//!
//! # Normalization (values that legitimately differ between any two servers)
//!
//! - `metadata.uid`, `metadata.resourceVersion`, `metadata.creationTimestamp`,
//!   `metadata.selfLink` and `metadata.managedFields[].time` are removed; a
//!   `metadata.deletionTimestamp` becomes `"<set>"`; a name generated from `generateName` becomes
//!   `generateName` + `"<generated>"`.
//! - List metadata (`resourceVersion`, `continue`, `remainingItemCount`) is removed, and list items
//!   lose `apiVersion`/`kind` (see the differences below).
//! - `Status` messages are not compared (their wording is kube-apiserver's Go error text);
//!   everything else of a `Status` is.
//! - CRD `status` is not compared (conditions appear asynchronously on kube-apiserver).
//! - `null` counts as absent (kube-apiserver writes unset condition times as `null`).
//!
//! # Deliberate differences (the "Deliberate differences" of `rackproof-apiserver`)
//!
//! - List items carry `apiVersion` and `kind` on the embedded server; kube-apiserver omits them.
//!   The suite removes them from items before comparing.
//! - Built-in resources are served in one version each, the current one. Eviction is therefore
//!   not compared: kube-apiserver v1.20 serves PodDisruptionBudgets and the eviction body only as
//!   `policy/v1beta1`, the embedded server only as `policy/v1`; the kubectl referee tests of
//!   `rackproof-apiserver` cover eviction with PodDisruptionBudgets instead.
//! - Pods bound to a node stay Terminating until deleted with grace period 0: the same on both
//!   sides here (no kubelet runs with the `local` provider either), so it is compared as is.
//! - No controllers besides the embedded server's own; the `local` provider runs none at all.
//!   The suite compares neither namespace deletion's completion nor Deployment status.
//!
//! # Version differences (the embedded server follows current Kubernetes, the referee is v1.20)
//!
//! Listed with the same labels in `rackproof-apiserver`'s deliberate differences. Normalized
//! away, or stepped over with [`Pair::known`]:
//!
//! - V1: namespaces get the label `kubernetes.io/metadata.name` (Kubernetes 1.21+); the label
//!   and its field in `managedFields` are removed.
//! - V2: pods carry `metadata.generation` (newer Kubernetes); v1.20 leaves it out.
//! - V3: `managedFields` entries name their `subresource` (1.22+); v1.20 folds status writes into
//!   the main entry. Entries are compared without `subresource`, those of the same manager,
//!   operation and apiVersion merged.
//! - V4: a malformed JSON merge patch gets 400 BadRequest; v1.20 answers 500.
//! - V5: v1.20 records in `managedFields` what a write sets in the part its endpoint ignores
//!   (status through the main resource, spec through `status`) and drops what such a write
//!   removes; Kubernetes 1.22+ ignores both. Those steps are compared without `managedFields`.
//! - V6: a node may not change its own Node's `ownerReferences` (NodeRestriction of later
//!   Kubernetes); v1.20 lets it. Stepped over with [`Pair::known`].
//!
//! # Reported differences (found by this suite)
//!
//! - R18: v1.20 records no `managedFields` entry for a Node write that sets `spec.podCIDR`; the
//!   embedded server records `f:podCIDR`, `f:podCIDRs` and what else the write set.
//!
//! R1–R17 (fieldsV1 `"."` entries, admission defaults, the not-ready taint of
//! new nodes, delete answers, validation causes, status-subresource metadata, apply conflicts,
//! strategic-merge list order, empty fields, watch events when the last finalizer goes, ...)
//! were fixed in the embedded server and are compared as is. A new one is stepped over with
//! [`Pair::known`], which fails once the difference is gone so the list stays true, and is
//! listed with the same label in `rackproof-apiserver`'s deliberate differences.
//!
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http::{Method, Request, StatusCode};
use kube::api::{Api, ApiResource, DynamicObject, WatchEvent, WatchParams};
use kube::client::Body;
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use rackproof_cluster::local::{LocalControlPlane, LocalOptions};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// One HTTP request of a sequence.
#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    content_type: &'static str,
    body: Option<Vec<u8>>,
}

impl Call {
    fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            content_type: "application/json",
            body: None,
        }
    }

    fn post(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::POST,
            path: path.into(),
            content_type: "application/json",
            body: Some(body.to_string().into_bytes()),
        }
    }

    fn put(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::PUT,
            path: path.into(),
            content_type: "application/json",
            body: Some(body.to_string().into_bytes()),
        }
    }

    fn delete(path: impl Into<String>, body: Option<Value>) -> Self {
        Self {
            method: Method::DELETE,
            path: path.into(),
            content_type: "application/json",
            body: body.map(|b| b.to_string().into_bytes()),
        }
    }

    fn patch(path: impl Into<String>, content_type: &'static str, body: &str) -> Self {
        Self {
            method: Method::PATCH,
            path: path.into(),
            content_type,
            body: Some(body.as_bytes().to_vec()),
        }
    }

    fn describe(&self) -> String {
        let body = self
            .body
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        format!("{} {} {}", self.method, self.path, body)
    }
}

/// A response: status code and JSON body (non-JSON bodies become a string).
#[derive(Debug, Clone, PartialEq)]
struct Reply {
    code: u16,
    body: Value,
}

async fn send(client: &kube::Client, call: &Call) -> Reply {
    let request = Request::builder()
        .method(call.method.clone())
        .uri(&call.path)
        .header(http::header::CONTENT_TYPE, call.content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(call.body.clone().unwrap_or_default()))
        .expect("the call builds a valid request");
    let response = client
        .send(request)
        .await
        .unwrap_or_else(|error| panic!("{}: {error}", call.describe()));
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap_or_else(|error| panic!("{}: reading the body: {error}", call.describe()))
        .to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Reply { code, body }
}

/// The embedded server and the real control plane side by side, with the mismatches so far.
struct Pair {
    _server: ApiServer,
    plane: LocalControlPlane,
    embedded: kube::Client,
    real: kube::Client,
    mismatches: Vec<String>,
}

impl Pair {
    async fn start() -> Self {
        let plane = LocalControlPlane::start(LocalOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{}", report(&error)));
        let server = ApiServer::new(Clock::wall());
        let embedded = server.admin_client();
        let real = plane.client();
        Self {
            _server: server,
            plane,
            embedded,
            real,
            mismatches: Vec::new(),
        }
    }

    /// Sends `call` to both servers, records a mismatch of the normalized replies, and returns
    /// both raw replies (embedded, real).
    async fn step(&mut self, call: Call) -> (Reply, Reply) {
        let embedded = send(&self.embedded, &call).await;
        let real = send(&self.real, &call).await;
        self.compare(&call.describe(), &embedded, &real);
        (embedded, real)
    }

    /// Like [`Pair::step`], and also requires the real server to answer `expected` (so a
    /// sequence that goes wrong on both sides cannot pass).
    async fn expect(&mut self, call: Call, expected: StatusCode) -> (Reply, Reply) {
        let (embedded, real) = self.step(call.clone()).await;
        if real.code != expected.as_u16() {
            self.mismatches.push(format!(
                "{}\n  the real server answered {}, the sequence expects {expected}: {}",
                call.describe(),
                real.code,
                real.body
            ));
        }
        (embedded, real)
    }

    /// Like [`Pair::expect`], comparing the replies without `metadata.managedFields` (version
    /// difference V5).
    async fn expect_without_managed_fields(&mut self, call: Call, expected: StatusCode) {
        let mut embedded = send(&self.embedded, &call).await;
        let mut real = send(&self.real, &call).await;
        if real.code != expected.as_u16() {
            self.mismatches.push(format!(
                "{}\n  the real server answered {}, the sequence expects {expected}: {}",
                call.describe(),
                real.code,
                real.body
            ));
        }
        for reply in [&mut embedded, &mut real] {
            if let Some(meta) = reply
                .body
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
            {
                meta.remove("managedFields");
            }
        }
        self.compare(&call.describe(), &embedded, &real);
    }

    /// A step with a reported difference (see "Reported differences" in the module docs): the
    /// real server must answer `expected` and the replies must still differ. Once they agree,
    /// the test fails so that the list is updated.
    async fn known(&mut self, call: Call, expected: StatusCode, note: &str) -> (Reply, Reply) {
        let embedded = send(&self.embedded, &call).await;
        let real = send(&self.real, &call).await;
        if real.code != expected.as_u16() {
            self.mismatches.push(format!(
                "{}\n  the real server answered {}, the sequence expects {expected}: {}",
                call.describe(),
                real.code,
                real.body
            ));
        }
        if embedded.code == real.code && normalize(&embedded.body) == normalize(&real.body) {
            self.mismatches.push(format!(
                "{}\n  the known difference {note} is gone: update the list",
                call.describe()
            ));
        } else {
            eprintln!(
                "known difference {note}: {}\n  embedded {}: {}\n  real     {}: {}",
                call.describe(),
                embedded.code,
                embedded.body,
                real.code,
                real.body
            );
        }
        (embedded, real)
    }

    fn compare(&mut self, what: &str, embedded: &Reply, real: &Reply) {
        let e = normalize(&embedded.body);
        let r = normalize(&real.body);
        if embedded.code != real.code || e != r {
            self.mismatches.push(format!(
                "{what}\n  embedded {}: {}\n  real     {}: {}\n  differing paths: {:?}",
                embedded.code,
                e,
                real.code,
                r,
                differing_paths(&e, &r, String::new()),
            ));
        }
    }

    /// Fails the test with every mismatch recorded.
    async fn finish(self) {
        let Self {
            plane, mismatches, ..
        } = self;
        plane
            .shutdown()
            .await
            .unwrap_or_else(|error| panic!("{}", report(&error)));
        assert!(
            mismatches.is_empty(),
            "{} mismatch(es):\n{}",
            mismatches.len(),
            mismatches.join("\n\n")
        );
    }
}

fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn differing_paths(a: &Value, b: &Value, at: String) -> Vec<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .flat_map(|k| {
                    differing_paths(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        format!("{at}.{k}"),
                    )
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .flat_map(|(i, (p, q))| differing_paths(p, q, format!("{at}[{i}]")))
            .collect(),
        _ if a == b => Vec::new(),
        _ => vec![at],
    }
}

/// Strips what legitimately differs between servers (see the module docs).
fn normalize(value: &Value) -> Value {
    let mut value = value.clone();
    if value.get("kind").and_then(Value::as_str) == Some("Status") {
        return normalize_status(&value);
    }
    drop_nulls(&mut value);
    normalize_object(&mut value);
    let item_kind = value
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|k| k.strip_suffix("List"))
        .map(str::to_owned);
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        for item in items.iter_mut() {
            if let (Some(map), Some(kind)) = (item.as_object_mut(), &item_kind) {
                map.insert("kind".to_owned(), json!(kind));
            }
            normalize_object(item);
            if let Some(map) = item.as_object_mut() {
                map.remove("apiVersion");
                map.remove("kind");
            }
        }
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("continue");
            meta.remove("remainingItemCount");
            meta.remove("selfLink");
        }
    }
    if let Some(object) = value.get_mut("object") {
        normalize_object(object);
    }
    value
}

/// `null` counts as absent (kube-apiserver writes unset times in conditions as `null`).
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn normalize_object(value: &mut Value) {
    let is_crd = value.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition");
    let Some(map) = value.as_object_mut() else {
        return;
    };
    if is_crd {
        map.remove("status");
    }
    let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    normalize_metadata(meta);
    known_differences(map);
}

fn normalize_metadata(meta: &mut Map<String, Value>) {
    for key in ["uid", "resourceVersion", "creationTimestamp", "selfLink"] {
        meta.remove(key);
    }
    if meta.contains_key("deletionTimestamp") {
        meta.insert("deletionTimestamp".to_owned(), json!("<set>"));
    }
    if let Some(generate) = meta
        .get("generateName")
        .and_then(Value::as_str)
        .map(str::to_owned)
        && meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| name.starts_with(&generate))
    {
        meta.insert("name".to_owned(), json!(format!("{generate}<generated>")));
    }
    if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
        let mut merged: Vec<Value> = Vec::new();
        for entry in fields.iter_mut().filter_map(Value::as_object_mut) {
            entry.remove("time");
            // Version difference V3: `subresource` entries (Kubernetes 1.22+) are folded into
            // the main entry of the same manager, operation and apiVersion, as v1.20 records them.
            entry.remove("subresource");
            // Version difference V1: the namespace name label.
            if let Some(fields_v1) = entry.get_mut("fieldsV1").and_then(Value::as_object_mut) {
                without_namespace_label(fields_v1);
            }
            let entry = Value::Object(entry.clone());
            let same = |other: &Value| {
                ["manager", "operation", "apiVersion"]
                    .iter()
                    .all(|k| other.get(k) == entry.get(k))
            };
            match merged.iter_mut().find(|other| same(other)) {
                Some(other) => union_fields(&mut other["fieldsV1"], &entry["fieldsV1"]),
                None => merged.push(entry),
            }
        }
        merged.retain(|entry| {
            entry
                .get("fieldsV1")
                .and_then(Value::as_object)
                .is_some_and(|f| !f.is_empty())
        });
        merged.sort_by_key(Value::to_string);
        *fields = merged;
        if fields.is_empty() {
            meta.remove("managedFields");
        }
    }
}

/// Removes the field of the `kubernetes.io/metadata.name` label (version difference V1) from
/// `FieldsV1`, and the labels and metadata nodes it leaves empty.
fn without_namespace_label(fields_v1: &mut Map<String, Value>) {
    let Some(meta) = fields_v1
        .get_mut("f:metadata")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(labels) = meta.get_mut("f:labels").and_then(Value::as_object_mut) {
        labels.remove("f:kubernetes.io/metadata.name");
        if labels.keys().all(|k| k == ".") {
            meta.remove("f:labels");
        }
    }
    if meta.is_empty() {
        fields_v1.remove("f:metadata");
    }
}

/// Adds the fields of `more` to `fields` (both `FieldsV1`).
fn union_fields(fields: &mut Value, more: &Value) {
    if let (Some(into), Some(from)) = (fields.as_object_mut(), more.as_object()) {
        for (key, value) in from {
            match into.get_mut(key) {
                Some(existing) => union_fields(existing, value),
                None => {
                    into.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

/// Normalizes the version differences V1–V2 (module docs).
fn known_differences(map: &mut Map<String, Value>) {
    let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // Version difference V1: the namespace name label.
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove("kubernetes.io/metadata.name");
    }
    if meta
        .get("labels")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        meta.remove("labels");
    }
    // Version difference V2: pod generation.
    if map.get("kind").and_then(Value::as_str) == Some("Pod")
        && let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("generation");
    }
}

fn normalize_status(value: &Value) -> Value {
    let mut out = Map::new();
    for key in ["kind", "apiVersion", "status", "reason", "code"] {
        if let Some(v) = value.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(details) = value.get("details") {
        let mut d = Map::new();
        for key in ["name", "group", "kind"] {
            if let Some(v) = details.get(key) {
                d.insert(key.to_owned(), v.clone());
            }
        }
        if let Some(causes) = details.get("causes").and_then(Value::as_array) {
            let mut causes: Vec<Value> = causes
                .iter()
                .map(|c| json!({ "reason": c.get("reason"), "field": c.get("field") }))
                .collect();
            causes.sort_by_key(Value::to_string);
            d.insert("causes".to_owned(), Value::Array(causes));
        }
        if !d.is_empty() {
            out.insert("details".to_owned(), Value::Object(d));
        }
    }
    Value::Object(out)
}

fn names(reply: &Reply) -> Vec<String> {
    let mut names: Vec<String> = reply.body["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

const NS: &str = "/api/v1/namespaces";
const NODES: &str = "/api/v1/nodes";

fn ns_path(ns: &str, resource: &str) -> String {
    format!("/api/v1/namespaces/{ns}/{resource}")
}

fn pod(name: &str, node: Option<&str>) -> Value {
    let mut spec = json!({ "containers": [{ "name": "app", "image": "busybox:1.36" }] });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "labels": { "app": name } }, "spec": spec })
}

fn node(name: &str, labels: Value) -> Value {
    let mut node = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } });
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        node["metadata"]["labels"] = labels;
    }
    node
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn crud_of_namespaces_configmaps_secrets_and_leases() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(
            NS,
            json!({ "metadata": { "name": "crud", "labels": { "team": "a" } } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::get(format!("{NS}/crud")), StatusCode::OK)
        .await;
    pair.expect(
        Call::post(NS, json!({ "metadata": { "name": "crud" } })),
        StatusCode::CONFLICT,
    )
    .await;

    let cms = ns_path("crud", "configmaps");
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "settings" }, "data": { "a": "1" } });
    pair.expect(Call::post(&cms, cm), StatusCode::CREATED).await;
    let (embedded, real) = pair
        .expect(Call::get(format!("{cms}/settings")), StatusCode::OK)
        .await;
    // Update with each server's own resourceVersion: a full PUT.
    for (client, reply) in [(pair.embedded.clone(), embedded), (pair.real.clone(), real)] {
        let mut body = reply.body.clone();
        body["data"]["b"] = json!("2");
        let reply = send(&client, &Call::put(format!("{cms}/settings"), body)).await;
        assert_eq!(reply.code, 200, "{}", reply.body);
    }
    pair.expect(Call::get(format!("{cms}/settings")), StatusCode::OK)
        .await;
    pair.expect(Call::get(format!("{cms}/missing")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "generateName": "gen-" }, "data": {} }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::delete(format!("{cms}/settings"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/settings")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::delete(format!("{cms}/settings"), None),
        StatusCode::NOT_FOUND,
    )
    .await;

    let secrets = ns_path("crud", "secrets");
    let secret = json!({ "metadata": { "name": "osc" }, "type": "Opaque", "stringData": { "config": "x" }, "data": { "raw": "eHl6" } });
    pair.expect(Call::post(&secrets, secret), StatusCode::CREATED)
        .await;
    pair.expect(Call::get(format!("{secrets}/osc")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{secrets}/osc"),
            MERGE,
            r#"{"data":{"more":"YQ=="}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let leases = "/apis/coordination.k8s.io/v1/namespaces/crud/leases";
    let lease = json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": { "name": "node-a" }, "spec": { "holderIdentity": "node-a", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z" } });
    pair.expect(Call::post(leases, lease), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::patch(
            format!("{leases}/node-a"),
            MERGE,
            r#"{"spec":{"renewTime":"2024-01-01T00:00:10.000000Z"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(leases), StatusCode::OK).await;
    pair.expect(
        Call::delete(format!("{leases}/node-a"), None),
        StatusCode::OK,
    )
    .await;

    pair.expect(Call::delete(format!("{NS}/crud"), None), StatusCode::OK)
        .await;
    pair.finish().await;
}

#[tokio::test]
async fn nodes_and_pods_with_status_subresources() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({ "pool": "a" }))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::get(format!("{NODES}/node-a")), StatusCode::OK)
        .await;
    let status = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    pair.expect(
        Call::patch(format!("{NODES}/node-a/status"), MERGE, status),
        StatusCode::OK,
    )
    .await;
    // Metadata written through status is applied.
    pair.expect(
        Call::patch(
            format!("{NODES}/node-a/status"),
            MERGE,
            r#"{"metadata":{"labels":{"x":"y"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{NODES}/node-a"),
            MERGE,
            r#"{"metadata":{"labels":{"z":"1"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{NODES}/node-a/status")), StatusCode::OK)
        .await;
    // Status written through the main resource is ignored; spec through status is ignored.
    // Compared without managedFields (version difference V5), on a node of its own.
    pair.expect(
        Call::post(NODES, node("node-b", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect_without_managed_fields(
        Call::patch(
            format!("{NODES}/node-b"),
            MERGE,
            r#"{"spec":{"unschedulable":true},"status":{"phase":"Terminated"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_without_managed_fields(
        Call::patch(
            format!("{NODES}/node-b/status"),
            MERGE,
            r#"{"spec":{"unschedulable":false},"metadata":{"labels":{"x":"y"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let pods = ns_path("default", "pods");
    pair.expect(
        Call::post(&pods, pod("web", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{pods}/web/status"),
            MERGE,
            r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/web")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/web"),
            MERGE,
            r#"{"metadata":{"labels":{"tier":"front"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/web"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/web")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::delete(format!("{NODES}/node-a"), None),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn deployments_and_the_scale_subresource() {
    let mut pair = Pair::start().await;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "mcm", "labels": { "app": "mcm" } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "mcm" } },
            "template": { "metadata": { "labels": { "app": "mcm" } }, "spec": { "containers": [{ "name": "mcm", "image": "busybox:1.36" }] } },
        },
    });
    pair.expect(Call::post(deployments, deployment), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::get(format!("{deployments}/mcm/scale")),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{deployments}/mcm/scale"),
            MERGE,
            r#"{"spec":{"replicas":0}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::put(format!("{deployments}/mcm/scale"), json!({ "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": { "name": "mcm", "namespace": "default" }, "spec": { "replicas": 3 } })), StatusCode::OK).await;
    pair.expect(Call::get(format!("{deployments}/mcm")), StatusCode::OK)
        .await;
    pair.expect(Call::patch(format!("{deployments}/mcm"), STRATEGIC, r#"{"spec":{"template":{"spec":{"containers":[{"name":"mcm","image":"busybox:1.37"}]}}}}"#), StatusCode::OK).await;
    let bad = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "bad" }, "spec": { "selector": { "matchLabels": { "app": "x" } }, "template": { "metadata": { "labels": { "app": "y" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } } });
    pair.expect(
        Call::post(deployments, bad),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::delete(format!("{deployments}/mcm"), None),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    for (name, labels) in [
        ("a", json!({ "env": "prod", "tier": "web" })),
        ("b", json!({ "env": "dev", "tier": "web" })),
        ("c", json!({ "env": "test" })),
        ("d", json!({ "other": "x" })),
    ] {
        pair.expect(
            Call::post(
                &cms,
                json!({ "metadata": { "name": name, "labels": labels } }),
            ),
            StatusCode::CREATED,
        )
        .await;
    }
    for selector in [
        "env=prod",
        "env==prod",
        "env!=prod",
        "env in (prod,dev)",
        "env notin (prod)",
        "env",
        "!env",
        "env,tier=web",
        "tier=web,env notin (dev)",
        "env in (nothing)",
    ] {
        let path = format!("{cms}?labelSelector={}", encode(selector));
        let (embedded, real) = pair.expect(Call::get(path), StatusCode::OK).await;
        assert_eq!(names(&embedded), names(&real), "labelSelector {selector}");
    }
    pair.expect(
        Call::get(format!("{cms}?labelSelector={}", encode("env in prod"))),
        StatusCode::BAD_REQUEST,
    )
    .await;

    for (name, labels, unschedulable) in [
        ("n1", json!({ "pool": "a" }), true),
        ("n2", json!({ "pool": "b" }), false),
    ] {
        let mut body = node(name, labels);
        body["spec"] = json!({ "unschedulable": unschedulable });
        pair.expect(Call::post(NODES, body), StatusCode::CREATED)
            .await;
    }
    let pods = ns_path("default", "pods");
    pair.expect(
        Call::post(&pods, pod("p1", Some("n1"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(&pods, pod("p2", Some("n2"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::post(&pods, pod("p3", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/p2/status"),
            MERGE,
            r#"{"status":{"phase":"Running"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::post(NS, json!({ "metadata": { "name": "other" } })),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(ns_path("other", "pods"), pod("p4", Some("n1"))),
        StatusCode::CREATED,
    )
    .await;

    for (path, selector) in [
        (pods.clone(), "spec.nodeName=n1"),
        (pods.clone(), "spec.nodeName!=n1"),
        (pods.clone(), "spec.nodeName="),
        (pods.clone(), "status.phase=Running"),
        (pods.clone(), "metadata.name=p3"),
        ("/api/v1/pods".to_owned(), "metadata.namespace=other"),
        (
            "/api/v1/pods".to_owned(),
            "spec.nodeName=n1,metadata.namespace!=other",
        ),
        (NODES.to_owned(), "spec.unschedulable=true"),
        (NODES.to_owned(), "spec.unschedulable=false"),
        (NODES.to_owned(), "metadata.name=n2"),
    ] {
        let (embedded, real) = pair
            .expect(
                Call::get(format!("{path}?fieldSelector={}", encode(selector))),
                StatusCode::OK,
            )
            .await;
        assert_eq!(
            names(&embedded),
            names(&real),
            "fieldSelector {selector} on {path}"
        );
    }
    pair.expect(
        Call::get(format!("{pods}?fieldSelector={}", encode("spec.unknown=x"))),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn optimistic_concurrency_and_error_statuses() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let (embedded, real) = pair
        .expect(
            Call::post(
                &cms,
                json!({ "metadata": { "name": "cm" }, "data": { "v": "1" } }),
            ),
            StatusCode::CREATED,
        )
        .await;
    // Two updates from the same (then stale) read: the second one conflicts.
    for (client, created) in [
        (pair.embedded.clone(), embedded.body),
        (pair.real.clone(), real.body),
    ] {
        let mut first = created.clone();
        first["data"]["v"] = json!("2");
        assert_eq!(
            send(&client, &Call::put(format!("{cms}/cm"), first))
                .await
                .code,
            200
        );
    }
    let mut stale_e = pair.embedded_last_read(&format!("{cms}/cm")).await;
    let mut stale_r = pair.real_last_read(&format!("{cms}/cm")).await;
    stale_e["data"]["v"] = json!("3");
    stale_r["data"]["v"] = json!("3");
    pair.expect(
        Call::patch(format!("{cms}/cm"), MERGE, r#"{"data":{"v":"4"}}"#),
        StatusCode::OK,
    )
    .await;
    let e = send(&pair.embedded, &Call::put(format!("{cms}/cm"), stale_e)).await;
    let r = send(&pair.real, &Call::put(format!("{cms}/cm"), stale_r)).await;
    assert_eq!(r.code, 409);
    pair.compare("PUT with a stale resourceVersion", &e, &r);
    // A merge patch carrying a stale resourceVersion conflicts as well.
    pair.expect(
        Call::patch(
            format!("{cms}/cm"),
            MERGE,
            r#"{"metadata":{"resourceVersion":"1"},"data":{"v":"5"}}"#,
        ),
        StatusCode::CONFLICT,
    )
    .await;
    // An update without resourceVersion is unconditional.
    pair.expect(
        Call::put(
            format!("{cms}/cm"),
            json!({ "metadata": { "name": "cm" }, "data": { "v": "6" } }),
        ),
        StatusCode::OK,
    )
    .await;

    pair.expect(Call::get(format!("{cms}/nope")), StatusCode::NOT_FOUND)
        .await;
    pair.expect(
        Call::get("/api/v1/namespaces/nope/configmaps/x"),
        StatusCode::NOT_FOUND,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "cm" } })),
        StatusCode::CONFLICT,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "Bad_Name" } })),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(
            NODES,
            json!({ "metadata": { "name": "node", "labels": { "bad key!": "v" } } }),
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": {} })),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.known(
        Call::patch(format!("{cms}/cm"), MERGE, "{not json"),
        StatusCode::INTERNAL_SERVER_ERROR,
        "V4 (malformed merge patch: 400, not 500)",
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/cm"), JSON_PATCH, r#"{"op":"add"}"#),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/cm"), STRATEGIC, "[1,2]"),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "x", "namespace": "other" } }),
        ),
        StatusCode::BAD_REQUEST,
    )
    .await;
    pair.finish().await;
}

impl Pair {
    async fn embedded_last_read(&self, path: &str) -> Value {
        let mut body = send(&self.embedded, &Call::get(path)).await.body;
        body.as_object_mut().map(|m| m.remove("status"));
        body
    }

    async fn real_last_read(&self, path: &str) -> Value {
        let mut body = send(&self.real, &Call::get(path)).await.body;
        body.as_object_mut().map(|m| m.remove("status"));
        body
    }
}

#[tokio::test]
async fn merge_json_and_strategic_patches_on_nodes_and_pods() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({ "pool": "a", "zone": "z1" }))),
        StatusCode::CREATED,
    )
    .await;
    let status = format!("{NODES}/node-a/status");
    let conditions = r#"{"status":{"conditions":[
        {"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"},
        {"type":"InPlaceUpdate","status":"True","reason":"CandidateForUpdate","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    pair.expect(Call::patch(&status, STRATEGIC, conditions), StatusCode::OK)
        .await;
    // Strategic merge: conditions merge by type.
    let selected = r#"{"status":{"conditions":[{"type":"InPlaceUpdate","status":"True","reason":"SelectedForUpdate","lastHeartbeatTime":"2024-01-01T00:01:00Z","lastTransitionTime":"2024-01-01T00:01:00Z"}]}}"#;
    pair.expect(Call::patch(&status, STRATEGIC, selected), StatusCode::OK)
        .await;
    // Delete one condition by its merge key.
    pair.expect(
        Call::patch(
            &status,
            STRATEGIC,
            r#"{"status":{"conditions":[{"type":"InPlaceUpdate","$patch":"delete"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    // A merge patch replaces the list.
    pair.expect(Call::patch(&status, MERGE, selected), StatusCode::OK)
        .await;
    // JSON patch: test, add, replace, remove; labels with escaped keys.
    let node_path = format!("{NODES}/node-a");
    pair.expect(Call::patch(&node_path, JSON_PATCH, r#"[{"op":"test","path":"/metadata/labels/pool","value":"a"},{"op":"add","path":"/metadata/labels/node.machine.sapcloud.io~1candidate-for-update","value":"true"},{"op":"replace","path":"/metadata/labels/zone","value":"z2"},{"op":"remove","path":"/metadata/labels/pool"}]"#), StatusCode::OK).await;
    pair.expect(
        Call::patch(
            &node_path,
            JSON_PATCH,
            r#"[{"op":"test","path":"/metadata/labels/zone","value":"nope"}]"#,
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::patch(
            &node_path,
            JSON_PATCH,
            r#"[{"op":"remove","path":"/metadata/labels/absent"}]"#,
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    // Merge patch with null deletes; taints are atomic under strategic merge.
    pair.expect(Call::patch(&node_path, MERGE, r#"{"metadata":{"labels":{"zone":null}},"spec":{"unschedulable":true,"taints":[{"key":"a","effect":"NoSchedule"}]}}"#), StatusCode::OK).await;
    pair.expect(
        Call::patch(
            &node_path,
            STRATEGIC,
            r#"{"spec":{"taints":[{"key":"b","effect":"NoExecute"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;

    let pods = ns_path("default", "pods");
    let mut two = pod("web", Some("node-a"));
    two["spec"]["containers"] = json!([{ "name": "app", "image": "busybox:1.36" }, { "name": "side", "image": "busybox:1.36", "env": [{ "name": "A", "value": "1" }] }]);
    pair.expect(Call::post(&pods, two), StatusCode::CREATED)
        .await;
    let web = format!("{pods}/web");
    // Strategic merge: containers merge by name (image is mutable on a pod).
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"spec":{"containers":[{"name":"side","image":"busybox:1.37"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"metadata":{"annotations":{"a":"1"},"finalizers":["rackproof.test/one"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            STRATEGIC,
            r#"{"metadata":{"finalizers":["rackproof.test/two"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            MERGE,
            r#"{"metadata":{"finalizers":["rackproof.test/one","rackproof.test/two"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            &web,
            JSON_PATCH,
            r#"[{"op":"replace","path":"/spec/containers/0/image","value":"busybox:1.37"}]"#,
        ),
        StatusCode::OK,
    )
    .await;
    let pod_status = r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}"#;
    pair.expect(
        Call::patch(format!("{web}/status"), STRATEGIC, pod_status),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{web}/status"),
            STRATEGIC,
            r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Draining"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(&web, MERGE, r#"{"metadata":{"finalizers":null}}"#),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn server_side_apply_with_two_managers_and_a_conflict() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let a = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    owner: a\ndata:\n  shared: from-a\n  a: '1'\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=a"), APPLY, a),
        StatusCode::CREATED,
    )
    .await;
    let b = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: '2'\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=b"), APPLY, b),
        StatusCode::OK,
    )
    .await;
    let b_conflict = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: '2'\n  shared: from-b\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=b"), APPLY, b_conflict),
        StatusCode::CONFLICT,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{cms}/applied?fieldManager=b&force=true"),
            APPLY,
            b_conflict,
        ),
        StatusCode::OK,
    )
    .await;
    // a drops `a`: the field is removed because a alone owned it.
    let a2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    owner: a\ndata:\n  shared: from-b\n";
    pair.expect(
        Call::patch(format!("{cms}/applied?fieldManager=a"), APPLY, a2),
        StatusCode::OK,
    )
    .await;
    // An update by a third manager (merge patch) shows up as an Update entry.
    pair.expect(
        Call::patch(
            format!("{cms}/applied?fieldManager=c"),
            MERGE,
            r#"{"data":{"c":"3"}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/applied")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(format!("{cms}/missing-manager"), APPLY, a),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;

    let apply_node =
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: applied-node\n  labels:\n    pool: a\n";
    pair.expect(
        Call::patch(
            format!("{NODES}/applied-node?fieldManager=agent"),
            APPLY,
            apply_node,
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn graceful_pod_deletion_and_finalizers() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    let pods = ns_path("default", "pods");
    // Bound pod: graceful deletion leaves it Terminating until deleted with grace period 0.
    pair.expect(
        Call::post(&pods, pod("bound", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 30 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/bound")), StatusCode::OK)
        .await;
    // A second graceful delete with a longer period does not extend it.
    pair.expect(Call::delete(format!("{pods}/bound"), None), StatusCode::OK)
        .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/bound")), StatusCode::NOT_FOUND)
        .await;
    // Unbound pod: deleted at once.
    pair.expect(Call::post(&pods, pod("unbound", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::delete(format!("{pods}/unbound"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/unbound")), StatusCode::NOT_FOUND)
        .await;
    // Finalizers hold an object after deletion until removed.
    let cms = ns_path("default", "configmaps");
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "held", "finalizers": ["rackproof.test/hold"] } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::delete(format!("{cms}/held"), None), StatusCode::OK)
        .await;
    pair.expect(Call::get(format!("{cms}/held")), StatusCode::OK)
        .await;
    // Adding a finalizer while deleting is forbidden; changing data is allowed.
    pair.expect(
        Call::patch(format!("{cms}/held"), MERGE, r#"{"data":{"x":"y"}}"#),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(
            format!("{cms}/held"),
            MERGE,
            r#"{"metadata":{"finalizers":[]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{cms}/held")), StatusCode::NOT_FOUND)
        .await;
    // Pod with a finalizer and grace 0: stays until the finalizer goes.
    let mut held = pod("held", Some("node-a"));
    held["metadata"]["finalizers"] = json!(["rackproof.test/hold"]);
    pair.expect(Call::post(&pods, held), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::delete(
            format!("{pods}/held"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/held")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{pods}/held"),
            JSON_PATCH,
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(Call::get(format!("{pods}/held")), StatusCode::NOT_FOUND)
        .await;
    pair.finish().await;
}

/// The events a watch from `resource_version` delivers, `count` of them, as (type, object).
async fn watch_events(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: &str,
    resource_version: &str,
    count: usize,
) -> Vec<(String, Value)> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let params = WatchParams::default().timeout(30);
    let stream = api
        .watch(&params, resource_version)
        .await
        .expect("watch starts");
    let events: Vec<WatchEvent<DynamicObject>> = stream
        .take(count)
        .try_collect()
        .await
        .expect("watch events arrive");
    events
        .into_iter()
        .map(|event| match event {
            WatchEvent::Added(o) => ("ADDED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Modified(o) => ("MODIFIED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Deleted(o) => ("DELETED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Bookmark(b) => ("BOOKMARK".to_owned(), serde_json::to_value(b).unwrap()),
            WatchEvent::Error(e) => ("ERROR".to_owned(), serde_json::to_value(e).unwrap()),
        })
        .collect()
}

#[tokio::test]
async fn watch_event_sequences_for_a_series_of_writes() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    // Start both watches from the current list resourceVersion, then write.
    let start_e = send(&pair.embedded, &Call::get(&cms)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let start_r = send(&pair.real, &Call::get(&cms)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "w1", "labels": { "a": "1" } }, "data": { "k": "1" } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "w2" } })),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/w1"), MERGE, r#"{"data":{"k":"2"}}"#),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "w3", "finalizers": ["rackproof.test/hold"] } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::delete(format!("{cms}/w2"), None), StatusCode::OK)
        .await;
    pair.expect(Call::delete(format!("{cms}/w3"), None), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{cms}/w3"),
            MERGE,
            r#"{"metadata":{"finalizers":null}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::put(
            format!("{cms}/w1"),
            json!({ "metadata": { "name": "w1" }, "data": { "k": "3" } }),
        ),
        StatusCode::OK,
    )
    .await;
    let count = 8;
    let embedded = watch_events(&pair.embedded, &resource, "default", &start_e, count).await;
    let real = watch_events(&pair.real, &resource, "default", &start_r, count).await;
    let types = |events: &[(String, Value)]| {
        events
            .iter()
            .map(|(t, o)| format!("{t} {}", o["metadata"]["name"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&real),
        [
            "ADDED w1",
            "ADDED w2",
            "MODIFIED w1",
            "ADDED w3",
            "DELETED w2",
            "MODIFIED w3",
            "DELETED w3",
            "MODIFIED w1"
        ]
    );
    assert_eq!(
        types(&embedded),
        types(&real),
        "watch event types and objects in order"
    );
    for (i, ((te, oe), (_, or))) in embedded.iter().zip(&real).enumerate() {
        let e = Reply {
            code: 200,
            body: oe.clone(),
        };
        let r = Reply {
            code: 200,
            body: or.clone(),
        };
        pair.compare(&format!("watch event {i} ({te})"), &e, &r);
    }
    pair.finish().await;
}

#[tokio::test]
async fn watch_events_of_pod_deletions() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    let pods = ns_path("default", "pods");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
    let start_e = send(&pair.embedded, &Call::get(&pods)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let start_r = send(&pair.real, &Call::get(&pods)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    pair.expect(Call::post(&pods, pod("unbound", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::post(&pods, pod("bound", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    // Deleted at once (unbound), gracefully then at once (bound).
    pair.expect(
        Call::delete(format!("{pods}/unbound"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 30 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    let count = 7;
    let embedded = watch_events(&pair.embedded, &resource, "default", &start_e, count).await;
    let real = watch_events(&pair.real, &resource, "default", &start_r, count).await;
    let types = |events: &[(String, Value)]| {
        events
            .iter()
            .map(|(t, o)| format!("{t} {}", o["metadata"]["name"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&real),
        [
            "ADDED unbound",
            "ADDED bound",
            "MODIFIED unbound",
            "DELETED unbound",
            "MODIFIED bound",
            "MODIFIED bound",
            "DELETED bound"
        ]
    );
    assert_eq!(
        types(&embedded),
        types(&real),
        "watch event types and objects in order"
    );
    for (i, ((te, oe), (_, or))) in embedded.iter().zip(&real).enumerate() {
        let e = Reply {
            code: 200,
            body: oe.clone(),
        };
        let r = Reply {
            code: 200,
            body: or.clone(),
        };
        pair.compare(&format!("watch event {i} ({te})"), &e, &r);
    }
    pair.finish().await;
}

#[tokio::test]
async fn custom_resources_with_defaulting_and_pruning() {
    let mut pair = Pair::start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.rackproof.test" },
        "spec": {
            "group": "rackproof.test",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": {
                            "size": { "type": "integer", "default": 3, "minimum": 1 },
                            "mode": { "type": "string", "default": "Auto", "enum": ["Auto", "Manual"] },
                            "free": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                        } },
                        "status": { "type": "object", "properties": { "ready": { "type": "boolean" } } },
                    },
                } },
            }],
        },
    });
    pair.expect(
        Call::post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd,
        ),
        StatusCode::CREATED,
    )
    .await;
    let widgets = "/apis/rackproof.test/v1/namespaces/default/widgets";
    // kube-apiserver serves the new resource after a moment: wait until a list answers.
    for client in [pair.embedded.clone(), pair.real.clone()] {
        let mut ready = false;
        for _ in 0..100 {
            if send(&client, &Call::get(widgets)).await.code == 200 {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "the custom resource is served within 10 s");
    }
    let widget = json!({ "apiVersion": "rackproof.test/v1", "kind": "Widget", "metadata": { "name": "w" }, "spec": { "mode": "Manual", "unknown": 1, "free": { "kept": true } }, "extra": "pruned" });
    pair.expect(Call::post(widgets, widget), StatusCode::CREATED)
        .await;
    pair.expect(Call::get(format!("{widgets}/w")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{widgets}/w/status"),
            MERGE,
            r#"{"status":{"ready":true,"junk":1}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(format!("{widgets}/w"), MERGE, r#"{"spec":{"size":null}}"#),
        StatusCode::OK,
    )
    .await;
    let invalid = json!({ "apiVersion": "rackproof.test/v1", "kind": "Widget", "metadata": { "name": "bad" }, "spec": { "size": 0, "mode": "Sometimes" } });
    pair.expect(
        Call::post(widgets, invalid),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(Call::get(widgets), StatusCode::OK).await;
    pair.finish().await;
}

/// A CRD named `gadgets.rackproof.test` whose versions have the given schemas (None: no schema).
fn gadget_crd(schemas: &[Option<Value>]) -> Value {
    let versions: Vec<Value> = schemas
        .iter()
        .enumerate()
        .map(|(i, schema)| {
            let mut version =
                json!({ "name": format!("v{}", i + 1), "served": true, "storage": i == 0 });
            if let Some(schema) = schema {
                version["schema"] = json!({ "openAPIV3Schema": schema });
            }
            version
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "gadgets.rackproof.test" },
        "spec": { "group": "rackproof.test", "scope": "Namespaced", "names": { "plural": "gadgets", "kind": "Gadget" }, "versions": versions },
    })
}

#[tokio::test]
async fn crds_with_bad_schemas_are_rejected() {
    let mut pair = Pair::start().await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All";
    let object = |properties: Value| json!({ "type": "object", "properties": properties });
    let invalid = [
        object(json!({ "a": { "tpye": "string" } })),
        object(json!({ "a": { "type": "strin" } })),
        object(json!({ "a": { "type": "null" } })),
        json!({ "type": "string" }),
        json!({ "properties": { "a": { "type": "string" } } }),
        json!({ "type": "object", "$schema": "x" }),
        json!({ "type": "object", "additionalProperties": { "type": "string" } }),
        json!({ "type": "object", "definitions": { "x": { "type": "string" } } }),
        object(
            json!({ "a": { "type": "array", "uniqueItems": true, "items": { "type": "string" } } }),
        ),
        object(json!({ "a": { "$ref": "#/definitions/x" } })),
        object(json!({ "a": { "type": "array", "items": [{ "type": "string" }] } })),
        object(json!({ "a": { "type": "array" } })),
        object(
            json!({ "a": { "type": "object", "properties": { "b": { "type": "string" } }, "additionalProperties": { "type": "string" } } }),
        ),
        object(
            json!({ "metadata": { "type": "object", "properties": { "labels": { "type": "object" } } } }),
        ),
        object(json!({ "metadata": { "type": "object", "default": {} } })),
        object(
            json!({ "a": { "type": "string", "anyOf": [{ "type": "string", "description": "d" }] } }),
        ),
        object(json!({ "a": { "type": "object", "default": { "x": 1 } } })),
        object(json!({ "a": { "type": "string", "pattern": "(" } })),
        object(json!({ "a": { "type": "string", "x-kubernetes-list-type": "set" } })),
        object(
            json!({ "a": { "type": "array", "x-kubernetes-list-type": "map", "items": { "type": "object", "properties": { "k": { "type": "string" } } }, "x-kubernetes-list-map-keys": ["k", "z"] } }),
        ),
        object(
            json!({ "a": { "x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true } }),
        ),
        object(json!({ "a": { "type": "string", "x-kubernetes-preserve-unknown-fields": false } })),
        json!({ "type": "object", "anyOf": [{ "properties": { "b": { "maxLength": 1 } } }] }),
    ];
    for schema in invalid {
        pair.expect(
            Call::post(crds, gadget_crd(&[Some(schema)])),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let undecodable = [
        object(json!([{ "a": 1 }])),
        object(json!({ "a": { "x-kubernetes-int-or-string": "yes" } })),
        json!({ "type": "object", "required": "a" }),
        json!({ "type": "object", "required": [1] }),
        object(json!({ "a": { "type": ["string"] } })),
        object(json!({ "a": "string" })),
    ];
    for schema in undecodable {
        pair.expect(
            Call::post(crds, gadget_crd(&[Some(schema)])),
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    // Differing schemas are reported per version; missing ones are required.
    let good = json!({ "type": "object" });
    pair.expect(
        Call::post(
            crds,
            gadget_crd(&[Some(good.clone()), Some(json!({ "type": "string" }))]),
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(crds, gadget_crd(&[Some(good), None])),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(crds, gadget_crd(&[None])),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.finish().await;
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Node identities: NodeRestriction and Node update validation
// ---------------------------------------------------------------------------------------------

impl Pair {
    /// A pair whose real control plane gives each of `nodes` an identity
    /// (`system:node:NAME` in `system:nodes`), as the embedded server does for any name.
    async fn start_with_nodes(nodes: &[&str]) -> Self {
        let options = LocalOptions::default().with_nodes(nodes.iter().copied());
        let plane = LocalControlPlane::start(options)
            .await
            .unwrap_or_else(|error| panic!("{}", report(&error)));
        let server = ApiServer::new(Clock::wall());
        let embedded = server.admin_client();
        let real = plane.client();
        Self {
            _server: server,
            plane,
            embedded,
            real,
            mismatches: Vec::new(),
        }
    }

    /// Clients acting as node `name` on both servers (embedded, real).
    async fn node_clients(&self, name: &str) -> (kube::Client, kube::Client) {
        let real = self
            .plane
            .client_as(&rackproof_cluster::local::User::node(name))
            .await
            .unwrap_or_else(|error| panic!("{}", report(&error)));
        (self._server.node_client(name), real)
    }

    /// [`Pair::expect`] with `clients` (embedded, real) in place of the admin clients.
    async fn expect_as(
        &mut self,
        clients: &(kube::Client, kube::Client),
        call: Call,
        expected: StatusCode,
    ) -> (Reply, Reply) {
        let admin = (
            std::mem::replace(&mut self.embedded, clients.0.clone()),
            std::mem::replace(&mut self.real, clients.1.clone()),
        );
        let replies = self.expect(call, expected).await;
        (self.embedded, self.real) = admin;
        replies
    }

    /// [`Pair::known`] with `clients` (embedded, real) in place of the admin clients.
    async fn known_as(
        &mut self,
        clients: &(kube::Client, kube::Client),
        call: Call,
        expected: StatusCode,
        note: &str,
    ) -> (Reply, Reply) {
        let admin = (
            std::mem::replace(&mut self.embedded, clients.0.clone()),
            std::mem::replace(&mut self.real, clients.1.clone()),
        );
        let replies = self.known(call, expected, note).await;
        (self.embedded, self.real) = admin;
        replies
    }
}

/// `object` as read from one server, made fit to PUT on both: without the metadata each server
/// sets itself (`uid`, `resourceVersion`, `creationTimestamp`, `managedFields`).
fn for_replacing(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(field);
        }
    }
    object
}

#[tokio::test]
async fn node_restriction_of_a_nodes_own_node_object() {
    let mut pair = Pair::start_with_nodes(&["node-a"]).await;
    let node_a = pair.node_clients("node-a").await;
    let own = format!("{NODES}/node-a");

    // Registration: labels outside the kubelet's set are refused, the rest pass.
    for label in [
        "node-role.kubernetes.io/worker",
        "node-restriction.kubernetes.io/pool",
        "kubernetes.io/role",
        "example.k8s.io/x",
    ] {
        pair.expect_as(
            &node_a,
            Call::post(NODES, node("node-a", json!({ label: "x" }))),
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::post(
            NODES,
            node(
                "node-a",
                json!({ "kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "rack", "worker.gardener.cloud/pool": "a" }),
            ),
        ),
        StatusCode::CREATED,
    )
    .await;

    // Labels the agent and the kubelet write stay the node's.
    for patch in [
        r#"{"metadata":{"labels":{"worker.gardener.cloud/pool":"b","node.machine.sapcloud.io/update-result":"successful"}}}"#,
        r#"{"metadata":{"labels":{"topology.kubernetes.io/zone":"z1","beta.kubernetes.io/arch":"amd64","kubelet.kubernetes.io/x":"y","sub.node.kubernetes.io/z":"w"}}}"#,
        r#"{"metadata":{"labels":{"kubernetes.io/os":null}}}"#,
        r#"{"spec":{"unschedulable":true}}"#,
    ] {
        pair.expect_as(&node_a, Call::patch(&own, MERGE, patch), StatusCode::OK)
            .await;
    }

    // Taints and other Kubernetes labels are not, through the main resource or status.
    for patch in [
        r#"{"spec":{"taints":null}}"#,
        r#"{"spec":{"taints":[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"},{"key":"mine","effect":"NoSchedule"}]}}"#,
        r#"{"metadata":{"labels":{"node-role.kubernetes.io/master":""}}}"#,
        r#"{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"a"}}}"#,
        r#"{"metadata":{"labels":{"k8s.io/x":"y"}}}"#,
        r#"{"metadata":{"labels":{"kubernetes.io/hostname":null,"topology.kubernetes.io/rack":"r1"}}}"#,
    ] {
        pair.expect_as(
            &node_a,
            Call::patch(&own, MERGE, patch),
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::patch(
            format!("{own}/status"),
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/master":""}}}"#,
        ),
        StatusCode::FORBIDDEN,
    )
    .await;
    let (_, real) = pair
        .expect_as(&node_a, Call::get(&own), StatusCode::OK)
        .await;
    let mut replaced = for_replacing(&real.body);
    replaced["spec"]["taints"] = json!([]);
    pair.expect_as(&node_a, Call::put(&own, replaced), StatusCode::FORBIDDEN)
        .await;

    // The admin may; a forbidden label the node leaves alone does not stop its other writes.
    pair.expect(
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}},"spec":{"taints":[{"key":"dedicated","value":"rack","effect":"NoSchedule"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"worker.gardener.cloud/pool":"a"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/worker":null}}}"#,
        ),
        StatusCode::FORBIDDEN,
    )
    .await;
    // Version difference V6 (last: the real server's Node keeps the change).
    pair.known_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"8c7a8e0e-7b4f-4c1e-9d7a-000000000001"}]}}"#,
        ),
        StatusCode::OK,
        "V6 (a node may not change its Node's ownerReferences)",
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn node_provider_id_and_pod_cidr_are_immutable_once_set() {
    let mut pair = Pair::start_with_nodes(&["node-a"]).await;
    let node_a = pair.node_clients("node-a").await;
    let own = format!("{NODES}/node-a");
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    // From unset to a value, by anyone allowed to write the Node; podCIDRs follows podCIDR.
    pair.known(
        Call::patch(
            &own,
            MERGE,
            r#"{"spec":{"providerID":"rackproof://node-a","podCIDR":"10.0.1.0/24"}}"#,
        ),
        StatusCode::OK,
        "R18 (no managedFields for a Node write that sets podCIDR)",
    )
    .await;
    // Changing either afterwards: 422 for every user, the admin included.
    for patch in [
        r#"{"spec":{"providerID":"rackproof://other"}}"#,
        r#"{"spec":{"providerID":null}}"#,
        r#"{"spec":{"podCIDR":"10.0.2.0/24","podCIDRs":["10.0.2.0/24"]}}"#,
        r#"{"spec":{"podCIDR":"10.0.3.0/24"}}"#,
        r#"{"spec":{"providerID":"rackproof://other","podCIDR":"10.0.2.0/24"}}"#,
        r#"{"spec":{"externalID":"other"}}"#,
    ] {
        pair.expect(
            Call::patch(&own, MERGE, patch),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::patch(&own, MERGE, r#"{"spec":{"providerID":"rackproof://mine"}}"#),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    // podCIDRs alone in a patch: podCIDR, still set, wins and nothing changes. (Compared
    // without managedFields: R18.)
    pair.expect_without_managed_fields(
        Call::patch(&own, MERGE, r#"{"spec":{"podCIDRs":["10.0.4.0/24"]}}"#),
        StatusCode::OK,
    )
    .await;
    // A replacement naming only podCIDR changes podCIDRs with it.
    let real = send(&pair.real, &Call::get(&own)).await;
    let mut replaced = for_replacing(&real.body);
    replaced["spec"]["podCIDR"] = json!("10.0.3.0/24");
    if let Some(spec) = replaced["spec"].as_object_mut() {
        spec.remove("podCIDRs");
    }
    pair.expect(Call::put(&own, replaced), StatusCode::UNPROCESSABLE_ENTITY)
        .await;
    // Setting the same values again is no change.
    pair.expect_without_managed_fields(
        Call::patch(
            &own,
            MERGE,
            r#"{"spec":{"providerID":"rackproof://node-a","podCIDRs":["10.0.1.0/24"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}
