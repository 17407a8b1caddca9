//! Discovery, health and error statuses at the HTTP edge.

use kube::discovery::{Discovery, verbs};
use serde_json::json;

use crate::{raw, server};

#[tokio::test(start_paused = true)]
async fn discovery_lists_groups_resources_subresources_and_verbs() {
    let server = server();
    let client = server.admin_client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, rackproof_apiserver::KUBERNETES_VERSION.0);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for (group, kind) in [
        ("", "Pod"),
        ("apps", "Deployment"),
        ("policy", "PodDisruptionBudget"),
        ("coordination.k8s.io", "Lease"),
        ("events.k8s.io", "Event"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ] {
        let found = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(r, _)| r.group == group && r.kind == kind);
        let (_, caps) = found.unwrap_or_else(|| panic!("{group}/{kind} is discoverable"));
        assert!(caps.supports_operation(verbs::WATCH) && caps.supports_operation(verbs::PATCH));
    }
    let (status, pods) = raw(&client, "GET", "/api/v1", "", Vec::new()).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = pods["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for expected in [
        "pods",
        "pods/status",
        "pods/eviction",
        "nodes/status",
        "namespaces",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let (_, apps) = raw(&client, "GET", "/apis/apps/v1", "", Vec::new()).await;
    assert!(
        apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "deployments/scale" && r["kind"] == "Scale")
    );
    let aggregated = client.list_api_groups_aggregated().await.unwrap();
    let apps = aggregated
        .items
        .iter()
        .find(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("apps"))
        .expect("apps group");
    let deployments = apps.versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("deployments"))
        .expect("deployments");
    assert!(
        deployments
            .subresources
            .iter()
            .any(|s| s.subresource.as_deref() == Some("scale"))
    );
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    let pods = core.items[0].versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("pods"))
        .expect("pods");
    let subresources: Vec<&str> = pods
        .subresources
        .iter()
        .filter_map(|s| s.subresource.as_deref())
        .collect();
    assert_eq!(subresources, vec!["status", "eviction"]);
    for path in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(
            raw(&client, "GET", path, "", Vec::new()).await.0,
            200,
            "{path}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn bad_requests_get_status_objects() {
    let server = server();
    let client = server.admin_client();
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Vec<u8>,
        u16,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        ("GET", "/api/v1/widgets", "", Vec::new(), 404, "NotFound"),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            b"[]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/vnd.kubernetes.protobuf",
            b"x".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "text/plain",
            b"x".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/pods",
            "application/json",
            b"{}".to_vec(),
            405,
            "MethodNotAllowed",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            json!({"kind": "Secret", "metadata": {"name": "x"}})
                .to_string()
                .into_bytes(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            vec![b' '; rackproof_apiserver::MAX_BODY_BYTES + 1],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "GET",
            "/api/v1/pods?watch=true&resourceVersion=abc",
            "",
            Vec::new(),
            400,
            "BadRequest",
        ),
    ];
    for (method, path, content_type, body, want_code, want_reason) in cases {
        let (status, body) = raw(&client, method, path, content_type, body).await;
        assert_eq!(
            (status, body["kind"].as_str(), body["reason"].as_str()),
            (want_code, Some("Status"), Some(want_reason)),
            "{method} {path}"
        );
        assert_eq!(body["code"], want_code);
    }
}

/// `/openapi/v2` as kube-apiserver (kube-openapi) serves it: JSON or gnostic protobuf by
/// `Accept`, `Vary: Accept`, a quoted ETag per encoding, 304 for a matching `If-None-Match`.
#[tokio::test(start_paused = true)]
async fn openapi_v2_is_negotiated_with_etag_and_vary() {
    use http_body_util::BodyExt;
    let client = server().admin_client();
    let get = |accept: &'static str, if_none_match: Option<String>| {
        let client = client.clone();
        async move {
            let mut request = http::Request::get("/openapi/v2").header("Accept", accept);
            if let Some(tag) = if_none_match {
                request = request.header("If-None-Match", tag);
            }
            let response = client
                .send(request.body(kube::client::Body::from(Vec::new())).unwrap())
                .await
                .unwrap();
            let (parts, body) = response.into_parts();
            (parts, body.collect().await.unwrap().to_bytes())
        }
    };
    let header = |parts: &http::response::Parts, name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let (parts, body) = get(protobuf, None).await;
    assert_eq!(parts.status, 200);
    assert_eq!(
        header(&parts, "content-type"),
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert_eq!(header(&parts, "vary"), "Accept");
    assert_eq!(
        body.first(),
        Some(&0x0A),
        "a protobuf message starting with field 1 (swagger)"
    );
    let etag = header(&parts, "etag");
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() == 130,
        "{etag}"
    );
    let (parts, body) = get(protobuf, Some(etag.clone())).await;
    assert_eq!((parts.status.as_u16(), body.len()), (304, 0));
    assert_eq!(header(&parts, "etag"), etag);
    let (parts, body) = get("application/json", Some(etag.clone())).await;
    assert_eq!(
        (
            parts.status.as_u16(),
            header(&parts, "content-type").as_str()
        ),
        (200, "application/json")
    );
    assert_ne!(
        header(&parts, "etag"),
        etag,
        "each encoding has its own ETag"
    );
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["swagger"], "2.0");
    assert_eq!(get("application/yaml", None).await.0.status, 406);
}
