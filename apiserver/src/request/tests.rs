//! Requests as clients send them, parsed into actions or refused with the error a client reads.

use super::query::*;

use super::*;

fn parse_get(path: &str, query: &str) -> Result<Action, ApiError> {
    let registry = Registry::builtin();
    parse(
        RawRequest {
            method: &Method::GET,
            path,
            query,
            content_type: "",
            accept: "",
            body: Bytes::new(),
        },
        &registry,
    )
}

#[test]
fn paths_resolve_to_actions() {
    assert!(
        matches!(parse_get("/api/v1/namespaces/default/pods/p", "").unwrap(), Action::Get(t) if t.name() == "p" && t.namespace() == "default")
    );
    assert!(
        matches!(parse_get("/api/v1/pods", "labelSelector=a%3Db&limit=2").unwrap(), Action::List(t, o) if t.namespace.is_none() && o.limit == Some(2))
    );
    assert!(
        matches!(parse_get("/api/v1/nodes/n1/status", "").unwrap(), Action::Get(t) if t.sub == Some(Subresource::Status))
    );
    assert!(
        matches!(parse_get("/apis/apps/v1/namespaces/x/deployments", "watch=true&resourceVersion=5").unwrap(), Action::Watch(_, o) if o.resource_version.as_deref() == Some("5"))
    );
    assert!(
        matches!(parse_get("/api/v1/namespaces/n1", "").unwrap(), Action::Get(t) if t.resource.plural == "namespaces")
    );
    assert_eq!(parse_get("/api/v1/widgets", "").unwrap_err().code, 404);
    assert_eq!(
        parse_get("/api/v1/pods", "labelSelector=in%20(")
            .unwrap_err()
            .code,
        400
    );
    assert_eq!(
        parse_get("/api/v1/pods", "fieldSelector=spec.bogus%3D1")
            .unwrap_err()
            .code,
        400
    );
    assert_eq!(
        parse_get("/api/v1/nodes/n/eviction", "").unwrap_err().code,
        404
    );
    assert_eq!(percent_decode("a%3Db+c%2"), "a=b c%2");
    let registry = Registry::builtin();
    let protobuf = RawRequest {
        method: &Method::GET,
        path: "/openapi/v2",
        query: "",
        content_type: "",
        accept: "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        body: Bytes::new(),
    };
    assert!(
        matches!(parse(protobuf, &registry).unwrap(), Action::OpenApiV2 { media_type } if media_type == crate::openapi::V2_PROTOBUF)
    );
    let json = RawRequest {
        method: &Method::GET,
        path: "/openapi/v2",
        query: "",
        content_type: "",
        accept: "application/json",
        body: Bytes::new(),
    };
    assert!(matches!(
        parse(json, &registry).unwrap(),
        Action::OpenApiV2 {
            media_type: "application/json"
        }
    ));
    let yaml = RawRequest {
        method: &Method::GET,
        path: "/openapi/v2",
        query: "",
        content_type: "",
        accept: "application/yaml",
        body: Bytes::new(),
    };
    assert_eq!(parse(yaml, &registry).unwrap_err().code, 406);
    assert!(wants_aggregated(
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    ));
    assert!(!wants_aggregated(
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
    ));
}
