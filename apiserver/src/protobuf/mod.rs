//! Kubernetes' protobuf wire format for request bodies: the `k8s\0` envelope (`runtime.Unknown`:
//! type meta, raw bytes) around the object's own message, turned into the JSON object the
//! handlers take. kubectl sends protobuf for the objects it builds itself (`kubectl create
//! namespace|configmap|secret|serviceaccount|deployment|pdb|service`, `kubectl auth can-i`); the
//! kinds and fields read are in [`messages`]. A kind or field this server does not read gets 415,
//! saying which, so nothing sent is silently dropped.

mod messages;
mod wire;

use prost::Message;
use serde_json::Value;

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
    let (api_version, kind) = (type_meta.api_version.as_str(), type_meta.kind.as_str());
    let Some((_, _, message)) = messages::KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
    else {
        return Err(ApiError::unsupported_media_type(&format!(
            "{MEDIA_TYPE} for {api_version} {kind} (send it as application/json)"
        )));
    };
    let mut object = match wire::read_message(&unknown.raw, message, "") {
        Ok(object) => object,
        Err(e @ wire::WireError::Malformed { .. }) => return Err(invalid(e.to_string())),
        Err(e @ wire::WireError::UnknownField { .. }) => {
            return Err(ApiError::unsupported_media_type(&format!(
                "{MEDIA_TYPE} for {api_version} {kind} with {e} (send it as application/json)"
            )));
        }
    };
    object.insert("apiVersion".to_owned(), Value::from(api_version));
    object.insert("kind".to_owned(), Value::from(kind));
    Ok(Value::Object(object))
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

    /// Hand-built wire fields, as Go's generated marshallers write them.
    fn tag(number: u32, wire: u64) -> Vec<u8> {
        varint(u64::from(number) << 3 | wire)
    }

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes(number: u32, value: &[u8]) -> Vec<u8> {
        let mut out = tag(number, 2);
        out.extend(varint(value.len() as u64));
        out.extend_from_slice(value);
        out
    }

    fn int(number: u32, value: i64) -> Vec<u8> {
        let mut out = tag(number, 0);
        out.extend(varint(value as u64));
        out
    }

    fn entry(number: u32, key: &str, value: &[u8]) -> Vec<u8> {
        bytes(
            number,
            &[bytes(1, key.as_bytes()), bytes(2, value)].concat(),
        )
    }

    /// ObjectMeta as Go writes it for a new object: every plain field, empty ones included.
    fn meta(name: &str, labels: &[(&str, &str)]) -> Vec<u8> {
        let mut out = [
            bytes(1, name.as_bytes()),
            bytes(2, b""),
            bytes(3, b""),
            bytes(4, b""),
            bytes(5, b""),
            bytes(6, b""),
            int(7, 0),
            bytes(8, b""),
        ]
        .concat();
        for (k, v) in labels {
            out.extend(entry(11, k, v.as_bytes()));
        }
        out
    }

    #[test]
    fn a_deployment_as_kubectl_create_sends_it_decodes_to_its_json_form() {
        let container = [
            bytes(1, b"web"),
            bytes(2, b"nginx"),
            bytes(
                6,
                &[bytes(1, b""), int(2, 0), int(3, 80), bytes(4, b"")].concat(),
            ),
            bytes(8, &entry(2, "cpu", &bytes(1, b"100m"))),
            bytes(13, b""),
        ]
        .concat();
        let template = [
            bytes(1, &meta("", &[("app", "web")])),
            bytes(
                2,
                &[bytes(2, &container), bytes(3, b""), bytes(6, b"")].concat(),
            ),
        ]
        .concat();
        let max_surge = [int(1, 1), int(2, 0), bytes(3, b"25%")].concat();
        let spec = [
            int(1, 0),
            bytes(2, &entry(1, "app", b"web")),
            bytes(3, &template),
            bytes(
                4,
                &[bytes(1, b""), bytes(2, &bytes(2, &max_surge))].concat(),
            ),
            int(5, 0),
        ]
        .concat();
        let deployment = [
            bytes(1, &meta("web", &[("app", "web")])),
            bytes(2, &spec),
            bytes(3, &[int(1, 0), int(2, 0)].concat()),
        ]
        .concat();
        let value = decode(&envelope("apps/v1", "Deployment", deployment)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "web",
                            "image": "nginx",
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "100m"}},
                        }]},
                    },
                    "strategy": {"rollingUpdate": {"maxSurge": "25%"}},
                },
                "status": {},
            })
        );
    }

    #[test]
    fn a_secret_keeps_empty_values_and_encodes_bytes_as_base64() {
        let secret = [
            bytes(1, &meta("s", &[("empty", "")])),
            entry(2, "key", b"\x00\xff"),
            bytes(3, b"Opaque"),
        ]
        .concat();
        let value = decode(&envelope("v1", "Secret", secret)).unwrap();
        assert_eq!(value["metadata"]["labels"]["empty"], "");
        assert_eq!(value["data"]["key"], "AP8=");
        assert_eq!(value["type"], "Opaque");
    }

    #[test]
    fn a_self_subject_access_review_decodes_to_its_json_form() {
        let attributes = [bytes(2, b"delete"), bytes(5, b"nodes"), bytes(7, b"")].concat();
        let review = [bytes(1, &meta("", &[])), bytes(2, &bytes(1, &attributes))].concat();
        let body = envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", review);
        let value = decode(&body).unwrap();
        assert_eq!(value["spec"]["resourceAttributes"]["verb"], "delete");
        assert_eq!(value["spec"]["resourceAttributes"]["resource"], "nodes");
        assert!(value["spec"].get("nonResourceAttributes").is_none());
    }

    #[test]
    fn times_read_as_rfc3339() {
        let meta = [
            bytes(1, b"x"),
            bytes(9, &[int(1, 1_700_000_000), int(2, 5)].concat()),
        ]
        .concat();
        let value = decode(&envelope("v1", "ConfigMap", bytes(1, &meta))).unwrap();
        assert_eq!(
            value["metadata"]["deletionTimestamp"],
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn unknown_kinds_and_fields_and_broken_bodies_are_refused_with_a_reason() {
        let job = envelope("batch/v1", "Job", Vec::new());
        assert_eq!(decode(&job).unwrap_err().code, 415);
        let volumes = bytes(2, &bytes(1, b""));
        let error = decode(&envelope("v1", "Pod", volumes)).unwrap_err();
        assert_eq!(error.code, 415);
        assert!(
            error.message.contains("spec: field number 1 of PodSpec"),
            "{}",
            error.message
        );
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        assert_eq!(decode(b"k8s\0\xff\xff").unwrap_err().code, 400);
        let cut = envelope("v1", "Namespace", bytes(1, b"abc")[..3].to_vec());
        let error = decode(&cut).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(error.message.contains("claims"), "{}", error.message);
    }
}
