//! Kubernetes' protobuf wire format for request bodies, for the kinds this server decodes from it:
//! the `k8s\0` envelope (`runtime.Unknown`: type meta, raw bytes) around the object's own
//! message, turned into the JSON object the handlers take. `kubectl auth can-i` sends its
//! `SelfSubjectAccessReview` this way. A kind this module does not know gets 415 with the media
//! types that are accepted, as before.

use prost::Message;
use serde_json::{Value, json};

use crate::error::ApiError;

/// The media type of protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every protobuf-encoded Kubernetes object starts with.
const MAGIC: &[u8] = b"k8s\0";

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

/// `runtime.Unknown`: the envelope.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    raw: Vec<u8>,
    #[prost(string, tag = "3")]
    content_encoding: String,
    #[prost(string, tag = "4")]
    content_type: String,
}

/// `authorization.k8s.io/v1.ResourceAttributes`.
#[derive(Clone, PartialEq, Message)]
struct ResourceAttributes {
    #[prost(string, tag = "1")]
    namespace: String,
    #[prost(string, tag = "2")]
    verb: String,
    #[prost(string, tag = "3")]
    group: String,
    #[prost(string, tag = "4")]
    version: String,
    #[prost(string, tag = "5")]
    resource: String,
    #[prost(string, tag = "6")]
    subresource: String,
    #[prost(string, tag = "7")]
    name: String,
}

/// `authorization.k8s.io/v1.NonResourceAttributes`.
#[derive(Clone, PartialEq, Message)]
struct NonResourceAttributes {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(string, tag = "2")]
    verb: String,
}

/// `authorization.k8s.io/v1.SelfSubjectAccessReviewSpec`.
#[derive(Clone, PartialEq, Message)]
struct SelfSubjectAccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    non_resource_attributes: Option<NonResourceAttributes>,
}

/// `authorization.k8s.io/v1.SelfSubjectAccessReview` (its metadata is not read).
#[derive(Clone, PartialEq, Message)]
struct SelfSubjectAccessReview {
    #[prost(message, optional, tag = "2")]
    spec: Option<SelfSubjectAccessReviewSpec>,
}

/// Whether a Content-Type names the protobuf encoding.
pub(crate) fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or_default().trim() == MEDIA_TYPE
}

/// Decodes a protobuf body into the JSON object the handlers take.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let invalid = |why: String| {
        ApiError::bad_request(format!(
            "the protobuf body of the request could not be decoded: {why}"
        ))
    };
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| invalid("it does not start with the k8s\\0 prefix".to_owned()))?;
    let unknown = Unknown::decode(envelope).map_err(|e| invalid(e.to_string()))?;
    if !unknown.content_encoding.is_empty() {
        return Err(invalid(format!(
            "content encoding {:?} is not supported",
            unknown.content_encoding
        )));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    match (type_meta.api_version.as_str(), type_meta.kind.as_str()) {
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            let review = SelfSubjectAccessReview::decode(unknown.raw.as_slice())
                .map_err(|e| invalid(e.to_string()))?;
            let spec = review.spec.unwrap_or_default();
            let mut json_spec = json!({});
            if let Some(a) = spec.resource_attributes {
                json_spec["resourceAttributes"] = json!({
                    "namespace": a.namespace, "verb": a.verb, "group": a.group,
                    "version": a.version, "resource": a.resource,
                    "subresource": a.subresource, "name": a.name,
                });
            }
            if let Some(a) = spec.non_resource_attributes {
                json_spec["nonResourceAttributes"] = json!({"path": a.path, "verb": a.verb});
            }
            Ok(json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "metadata": {},
                "spec": json_spec,
            }))
        }
        (api_version, kind) => Err(ApiError::unsupported_media_type(&format!(
            "{MEDIA_TYPE} for {api_version} {kind} (send it as application/json)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let mut body = MAGIC.to_vec();
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            }),
            raw,
            content_encoding: String::new(),
            content_type: String::new(),
        }
        .encode(&mut body)
        .expect("encodes");
        body
    }

    #[test]
    fn a_self_subject_access_review_decodes_to_its_json_form() {
        let review = SelfSubjectAccessReview {
            spec: Some(SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: "delete".into(),
                    resource: "nodes".into(),
                    ..Default::default()
                }),
                non_resource_attributes: None,
            }),
        };
        let body = envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            review.encode_to_vec(),
        );
        let value = decode(&body).unwrap();
        assert_eq!(value["spec"]["resourceAttributes"]["verb"], "delete");
        assert_eq!(value["spec"]["resourceAttributes"]["resource"], "nodes");
        assert!(value["spec"].get("nonResourceAttributes").is_none());
    }

    #[test]
    fn other_kinds_and_broken_bodies_are_refused_with_a_reason() {
        let namespace = envelope("v1", "Namespace", Vec::new());
        assert_eq!(decode(&namespace).unwrap_err().code, 415);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        assert_eq!(decode(b"k8s\0\xff\xff").unwrap_err().code, 400);
    }
}
