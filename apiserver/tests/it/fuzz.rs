//! Property tests: malformed paths, bodies, selectors and patches get a `Status` error, never
//! a panic or a non-Status reply; arbitrary CRD schemas never make CRD creation or the OpenAPI
//! documents answer 500.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::{create_pod, raw, server};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z$/.~-]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_owned()),
                    Just("spec".to_owned()),
                    Just("status".to_owned()),
                    Just("name".to_owned()),
                    Just("containers".to_owned()),
                    Just("labels".to_owned()),
                    Just("finalizers".to_owned()),
                    Just("$patch".to_owned()),
                    Just("op".to_owned()),
                    Just("path".to_owned()),
                    Just("value".to_owned()),
                    Just("apiVersion".to_owned()),
                    Just("kind".to_owned()),
                    "[a-z]{1,5}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        json_value().prop_map(|v| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": v.clone()}, "spec": v}).to_string().into_bytes()),
        json_value().prop_map(|v| json!([{"op": "replace", "path": "/metadata/labels", "value": v}]).to_string().into_bytes()),
    ]
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn path() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "/api/v1",
        "/apis/apps/v1",
        "/apis/policy/v1",
        "/apis/example.com/v1",
        "/apis",
        "/api",
        "/openapi/v3/apis/apps/v1",
        "/version",
        "/apis/coordination.k8s.io/v1",
    ]);
    let segment = prop::sample::select(vec![
        "namespaces",
        "default",
        "missing",
        "pods",
        "p",
        "status",
        "eviction",
        "scale",
        "deployments",
        "d",
        "nodes",
        "n1",
        "configmaps",
        "leases",
        "watch",
        "x",
    ]);
    (prefix, prop::collection::vec(segment, 0..5)).prop_map(|(p, segs)| {
        let mut out = p.to_owned();
        for s in segs {
            out.push('/');
            out.push_str(s);
        }
        out
    })
}

#[test]
fn malformed_requests_get_status_errors() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (_server, client) = runtime.block_on(async {
        let server = server();
        let client = server.admin_client();
        create_pod(&client, "p", json!({"app": "web"}), Some("n1")).await;
        (server, client)
    });
    let methods = prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE"]);
    let content_types = prop::sample::select(vec![
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "text/plain",
        "",
    ]);
    let selector = "[a-z=!(), .in/-]{0,14}";
    let config = ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(method in methods, path in path(), content_type in content_types, body in body(),
                        labels in selector, fields in selector, rv in "[0-9a-z]{0,3}", watch in any::<bool>(), force in any::<bool>())| {
        let mut uri = format!("{path}?labelSelector={}&fieldSelector={}&resourceVersion={rv}&fieldManager=fuzz&timeoutSeconds=1", encode(&labels), encode(&fields));
        if watch { uri.push_str("&watch=true"); }
        if force { uri.push_str("&force=true"); }
        let (status, value) = runtime.block_on(raw(&client, method, &uri, content_type, body));
        prop_assert!((200..600).contains(&status));
        if status >= 400 {
            prop_assert_eq!(&value["kind"], "Status", "{} {} gave {}", method, uri, value);
            prop_assert_eq!(value["code"].as_u64(), Some(u64::from(status)));
            prop_assert!(value["reason"].as_str().is_some_and(|r| !r.is_empty()));
        }
    });
}

/// JSON shaped like schemas: objects keyed mostly by (JSONSchemaProps and Swagger) keywords.
fn schema_like() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(1.5)),
        prop::sample::select(vec![
            "object", "string", "integer", "array", "number", "boolean", "null", "strin", "map",
            "set", "atomic", "(", "name"
        ])
        .prop_map(|s| json!(s)),
    ];
    let keys = prop::sample::select(vec![
        "type",
        "properties",
        "items",
        "additionalProperties",
        "required",
        "enum",
        "default",
        "nullable",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "maxLength",
        "minimum",
        "pattern",
        "format",
        "description",
        "$ref",
        "uniqueItems",
        "metadata",
        "spec",
        "name",
        "tpye",
        "xml",
        "readOnly",
        "discriminator",
        "example",
        "definitions",
        "$schema",
        "title",
    ]);
    leaf.prop_recursive(5, 48, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone().prop_map(str::to_owned), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn arbitrary_crd_schemas_never_make_the_server_answer_500() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (_server, client) = runtime.block_on(async {
        let server = server();
        let client = server.admin_client();
        (server, client)
    });
    let get = |path: &'static str, accept: &'static str| {
        let request = http::Request::get(path)
            .header("Accept", accept)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        let client = client.clone();
        async move { client.send(request).await.unwrap().status().as_u16() }
    };
    let config = ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(schema in schema_like(), properties in schema_like())| {
        let mut root = schema;
        if let (Some(map), true) = (root.as_object_mut(), properties.is_object()) {
            map.insert("type".to_owned(), json!("object"));
            map.insert("properties".to_owned(), properties);
        }
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": root}}]}});
        let (status, value) = runtime.block_on(raw(&client, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", crd.to_string().into_bytes()));
        prop_assert!(matches!(status, 201 | 400 | 422), "{} for {}: {}", status, crd, value);
        for (path, accept) in [("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), ("/openapi/v2", "application/json"), ("/openapi/v3/apis/example.com/v1", "application/json")] {
            let code = runtime.block_on(get(path, accept));
            prop_assert!(code == 200 || (status != 201 && code == 404), "{} {} answered {} after {} for {}", path, accept, code, status, crd);
        }
        if status == 201 {
            let (deleted, _) = runtime.block_on(raw(&client, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.example.com", "application/json", Vec::new()));
            prop_assert_eq!(deleted, 200);
        }
    });
}

/// Query parameters the server reads, and values at and past the edges of their types.
fn query() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let key = prop::sample::select(vec![
        "timeoutSeconds",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "watch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "labelSelector",
        "fieldSelector",
        "fieldManager",
        "fieldValidation",
        "force",
        "dryRun",
        "gracePeriodSeconds",
        "propagationPolicy",
        "pretty",
    ]);
    let value = prop_oneof![
        prop::sample::select(vec![
            "",
            "0",
            "1",
            "-1",
            "true",
            "false",
            "All",
            "Strict",
            "Orphan",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "1e3",
            "%ZZ",
            "%00",
            "é",
        ])
        .prop_map(str::to_owned),
        "[0-9a-z=,!-]{0,6}",
    ];
    prop::collection::vec((key, value), 0..6)
}

/// Sends a request and returns its status, and the Status body of an error (a successful
/// watch's body never ends on its own, so it is left unread).
async fn status_of(client: &kube::Client, method: &str, uri: &str) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(b"{}".to_vec()))
        .expect("request");
    let response = client
        .send(request)
        .await
        .unwrap_or_else(|e| panic!("{method} {uri}: no answer: {e}"));
    let status = response.status().as_u16();
    if status < 400 {
        return (status, Value::Null);
    }
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[test]
fn arbitrary_query_parameters_get_an_answer_or_a_status_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (_server, client) = runtime.block_on(async {
        let server = server();
        let client = server.admin_client();
        create_pod(&client, "p", json!({"app": "web"}), Some("n1")).await;
        (server, client)
    });
    let methods = prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE"]);
    let targets = prop::sample::select(vec![
        "/api/v1/namespaces/default/pods",
        "/api/v1/namespaces/default/pods/p",
        "/api/v1/pods",
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    ]);
    let config = ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(method in methods, target in targets, query in query())| {
        let query: Vec<String> = query.iter().map(|(k, v)| {
            let v = if v.starts_with('%') { v.clone() } else { encode(v) };
            format!("{k}={v}")
        }).collect();
        let uri = format!("{target}?{}", query.join("&"));
        let (status, value) = runtime.block_on(status_of(&client, method, &uri));
        prop_assert!((200..600).contains(&status), "{} {} gave {}", method, uri, status);
        prop_assert!(status != 500, "{} {} gave {}", method, uri, value);
        if status >= 400 {
            prop_assert_eq!(&value["kind"], "Status", "{} {} gave {}", method, uri, value);
            prop_assert_eq!(value["code"].as_u64(), Some(u64::from(status)));
        }
    });
}
