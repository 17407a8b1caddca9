//! The suite's machinery: one request sent to both servers ([`Pair`]), the replies compared
//! after normalization, and the objects the tests write.

pub(crate) use std::time::Duration;

pub(crate) use futures::{StreamExt, TryStreamExt};
pub(crate) use http::{Method, Request, StatusCode};
pub(crate) use kube::api::{Api, ApiResource, DynamicObject, WatchEvent, WatchParams};
pub(crate) use kube::client::Body;
pub(crate) use rackproof_apiserver::ApiServer;
pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_cluster::local::{LocalControlPlane, LocalOptions};
pub(crate) use rackproof_std::error_chain;
pub(crate) use serde_json::{Map, Value, json};

/// One HTTP request of a sequence.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) content_type: &'static str,
    pub(crate) body: Option<Vec<u8>>,
}

impl Call {
    pub(crate) fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            content_type: "application/json",
            body: None,
        }
    }

    pub(crate) fn post(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::POST,
            path: path.into(),
            content_type: "application/json",
            body: Some(body.to_string().into_bytes()),
        }
    }

    pub(crate) fn put(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::PUT,
            path: path.into(),
            content_type: "application/json",
            body: Some(body.to_string().into_bytes()),
        }
    }

    pub(crate) fn delete(path: impl Into<String>, body: Option<Value>) -> Self {
        Self {
            method: Method::DELETE,
            path: path.into(),
            content_type: "application/json",
            body: body.map(|b| b.to_string().into_bytes()),
        }
    }

    pub(crate) fn patch(path: impl Into<String>, content_type: &'static str, body: &str) -> Self {
        Self {
            method: Method::PATCH,
            path: path.into(),
            content_type,
            body: Some(body.as_bytes().to_vec()),
        }
    }

    pub(crate) fn describe(&self) -> String {
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
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) body: Value,
}

pub(crate) async fn send(client: &kube::Client, call: &Call) -> Reply {
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
pub(crate) struct Pair {
    pub(crate) _server: ApiServer,
    pub(crate) plane: LocalControlPlane,
    pub(crate) embedded: kube::Client,
    pub(crate) real: kube::Client,
    pub(crate) mismatches: Vec<String>,
}

impl Pair {
    pub(crate) async fn start() -> Self {
        let plane = LocalControlPlane::start(LocalOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{}", error_chain(&error)));
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
    pub(crate) async fn step(&mut self, call: Call) -> (Reply, Reply) {
        let embedded = send(&self.embedded, &call).await;
        let real = send(&self.real, &call).await;
        self.compare(&call.describe(), &embedded, &real);
        (embedded, real)
    }

    /// Like [`Pair::step`], and also requires the real server to answer `expected` (so a
    /// sequence that goes wrong on both sides cannot pass).
    pub(crate) async fn expect(&mut self, call: Call, expected: StatusCode) -> (Reply, Reply) {
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
    pub(crate) async fn expect_without_managed_fields(&mut self, call: Call, expected: StatusCode) {
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
    pub(crate) async fn known(
        &mut self,
        call: Call,
        expected: StatusCode,
        note: &str,
    ) -> (Reply, Reply) {
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

    pub(crate) fn compare(&mut self, what: &str, embedded: &Reply, real: &Reply) {
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
    pub(crate) async fn finish(self) {
        let Self {
            plane, mismatches, ..
        } = self;
        plane
            .shutdown()
            .await
            .unwrap_or_else(|error| panic!("{}", error_chain(&error)));
        assert!(
            mismatches.is_empty(),
            "{} mismatch(es):\n{}",
            mismatches.len(),
            mismatches.join("\n\n")
        );
    }
}

pub(crate) fn differing_paths(a: &Value, b: &Value, at: String) -> Vec<String> {
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
pub(crate) fn normalize(value: &Value) -> Value {
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
pub(crate) fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

pub(crate) fn normalize_object(value: &mut Value) {
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

pub(crate) fn normalize_metadata(meta: &mut Map<String, Value>) {
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
pub(crate) fn without_namespace_label(fields_v1: &mut Map<String, Value>) {
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
pub(crate) fn union_fields(fields: &mut Value, more: &Value) {
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
pub(crate) fn known_differences(map: &mut Map<String, Value>) {
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

pub(crate) fn normalize_status(value: &Value) -> Value {
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

pub(crate) fn names(reply: &Reply) -> Vec<String> {
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

pub(crate) const MERGE: &str = "application/merge-patch+json";
pub(crate) const JSON_PATCH: &str = "application/json-patch+json";
pub(crate) const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub(crate) const APPLY: &str = "application/apply-patch+yaml";

pub(crate) const NS: &str = "/api/v1/namespaces";
pub(crate) const NODES: &str = "/api/v1/nodes";

pub(crate) fn ns_path(ns: &str, resource: &str) -> String {
    format!("/api/v1/namespaces/{ns}/{resource}")
}

pub(crate) fn pod(name: &str, node: Option<&str>) -> Value {
    let mut spec = json!({ "containers": [{ "name": "app", "image": "busybox:1.36" }] });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "labels": { "app": name } }, "spec": spec })
}

pub(crate) fn node(name: &str, labels: Value) -> Value {
    let mut node = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } });
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        node["metadata"]["labels"] = labels;
    }
    node
}

/// `text` percent-encoded for a query parameter.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
