//! Turns an HTTP request (method, path, query, content type, body) into a typed [`Action`],
//! in one place. Everything malformed becomes an [`ApiError`] here, before any state is touched.

mod options;
mod query;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use crate::error::ApiError;
use crate::patch::PatchType;
use crate::registry::{Registry, Resource};
use crate::selector::{FieldSelector, LabelSelector};

use options::{delete_options, dry_run, list_options, object_body};
use query::{Query, query_pairs};

pub(crate) use query::query_value;

/// A subresource path segment we serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subresource {
    Status,
    Scale,
    Eviction,
}

impl Subresource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Eviction => "eviction",
        }
    }
}

/// The object(s) a request addresses.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) resource: Arc<Resource>,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<Subresource>,
}

impl Target {
    pub(crate) fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    pub(crate) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

/// Options of list, watch and deletecollection.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<String>,
    pub(crate) resource_version: Option<String>,
    /// `timeoutSeconds` as kube-apiserver reads it: an int64 (larger values are a 400).
    pub(crate) timeout_seconds: Option<i64>,
    pub(crate) bookmarks: bool,
    pub(crate) send_initial_events: bool,
}

/// Options of create, update and patch.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOptions {
    pub(crate) field_manager: Option<String>,
    pub(crate) force: bool,
    pub(crate) dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields are an error.
    pub(crate) strict: bool,
}

/// `metav1.DeleteOptions`, from the query and the body.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub(crate) grace_period: Option<i64>,
    pub(crate) propagation: Option<String>,
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
    pub(crate) dry_run: bool,
}

/// What a request asks for.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Version,
    Health(crate::health::HealthRequest),
    /// `/metrics` (administrators only).
    Metrics,
    CoreVersions {
        aggregated: bool,
    },
    Groups {
        aggregated: bool,
    },
    GroupVersions {
        group: String,
    },
    Resources {
        group: String,
        version: String,
    },
    /// `/openapi/v2` in the negotiated media type (JSON or gnostic protobuf).
    OpenApiV2 {
        media_type: &'static str,
    },
    OpenApiV3Root,
    OpenApiV3 {
        group: String,
        version: String,
    },
    Get(Target),
    List(Target, ListOptions),
    Watch(Target, ListOptions),
    Create(Target, Value, WriteOptions),
    Update(Target, Value, WriteOptions),
    Patch(Target, PatchType, Bytes, WriteOptions),
    Delete(Target, DeleteOptions),
    DeleteCollection(Target, ListOptions, DeleteOptions),
    Evict(Target, Value),
    /// A `SelfSubjectAccessReview`: may the requesting user do what the body describes?
    AccessReview(Value),
}

impl Action {
    /// The Kubernetes verb and target, for authorization (None: discovery and health).
    pub(crate) fn verb_and_target(&self) -> Option<(&'static str, &Target)> {
        Some(match self {
            Action::Get(t) => ("get", t),
            Action::List(t, _) => ("list", t),
            Action::Watch(t, _) => ("watch", t),
            Action::Create(t, _, _) | Action::Evict(t, _) => ("create", t),
            Action::Update(t, _, _) => ("update", t),
            Action::Patch(t, _, _, _) => ("patch", t),
            Action::Delete(t, _) => ("delete", t),
            Action::DeleteCollection(t, _, _) => ("deletecollection", t),
            _ => return None,
        })
    }

    pub(crate) fn field_selector(&self) -> Option<&FieldSelector> {
        match self {
            Action::List(_, o) | Action::Watch(_, o) | Action::DeleteCollection(_, o, _) => {
                Some(&o.fields)
            }
            _ => None,
        }
    }
}

/// The raw parts of a request the parser needs.
#[derive(Debug)]
pub(crate) struct RawRequest<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    pub(crate) query: &'a str,
    pub(crate) content_type: &'a str,
    pub(crate) accept: &'a str,
    pub(crate) body: Bytes,
}

/// Whether the Accept header asks for aggregated discovery (apidiscovery.k8s.io/v2).
fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

/// Parses a request against the served resources.
pub(crate) fn parse(raw: RawRequest<'_>, registry: &Registry) -> Result<Action, ApiError> {
    let query = Query(query_pairs(raw.query));
    let segments: Vec<&str> = raw
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let get_only = |action: Action| {
        if raw.method == Method::GET {
            Ok(action)
        } else {
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({} {})",
                raw.method, raw.path
            )))
        }
    };
    match segments.as_slice() {
        ["version"] => return get_only(Action::Version),
        ["metrics"] => return get_only(Action::Metrics),
        [endpoint, rest @ ..] if crate::health::Endpoint::from_path(endpoint).is_some() => {
            let check = match rest {
                [] => None,
                [check] => Some((*check).to_owned()),
                _ => return Err(ApiError::path_not_found(raw.path)),
            };
            return get_only(Action::Health(crate::health::HealthRequest {
                endpoint: crate::health::Endpoint::from_path(endpoint)
                    .unwrap_or(crate::health::Endpoint::Healthz),
                check,
                // kube-apiserver looks for the parameter, whatever its value.
                verbose: query.get("verbose").is_some(),
                exclude: query.all("exclude").map(str::to_owned).collect(),
            }));
        }
        ["api"] => {
            return get_only(Action::CoreVersions {
                aggregated: wants_aggregated(raw.accept),
            });
        }
        ["apis"] => {
            return get_only(Action::Groups {
                aggregated: wants_aggregated(raw.accept),
            });
        }
        ["openapi", "v2"] | ["swagger.json"] => {
            // JSON or gnostic protobuf, negotiated as kube-openapi does; anything else is 406.
            let Some(media_type) = crate::openapi::negotiate_v2(raw.accept) else {
                return Err(ApiError::not_acceptable(format!(
                    "the OpenAPI v2 document is served as application/json or {}, not {:?}",
                    crate::openapi::V2_PROTOBUF,
                    raw.accept
                )));
            };
            return get_only(Action::OpenApiV2 { media_type });
        }
        ["openapi", "v3"] => return get_only(Action::OpenApiV3Root),
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
        ] => {
            if raw.method != Method::POST {
                return Err(ApiError::method_not_allowed(format!(
                    "selfsubjectaccessreviews only accept create ({} {})",
                    raw.method, raw.path
                )));
            }
            return Ok(Action::AccessReview(object_body(
                &raw.body,
                raw.content_type,
            )?));
        }
        ["openapi", "v3", "api", version] => {
            return get_only(Action::OpenApiV3 {
                group: String::new(),
                version: (*version).to_owned(),
            });
        }
        ["openapi", "v3", "apis", group, version] => {
            return get_only(Action::OpenApiV3 {
                group: (*group).to_owned(),
                version: (*version).to_owned(),
            });
        }
        ["apis", group] => {
            if registry.group_versions().iter().any(|(g, _)| g == group) {
                return get_only(Action::GroupVersions {
                    group: (*group).to_owned(),
                });
            }
            return Err(ApiError::path_not_found(raw.path));
        }
        ["api", version] => {
            if *version == "v1" {
                return get_only(Action::Resources {
                    group: String::new(),
                    version: (*version).to_owned(),
                });
            }
            return Err(ApiError::path_not_found(raw.path));
        }
        ["apis", group, version] => {
            if registry
                .group_versions()
                .iter()
                .any(|(g, v)| g == group && v == version)
            {
                return get_only(Action::Resources {
                    group: (*group).to_owned(),
                    version: (*version).to_owned(),
                });
            }
            return Err(ApiError::path_not_found(raw.path));
        }
        _ => {}
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::path_not_found(raw.path)),
    };
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    // Resolve namespace, resource, name, subresource.
    let (namespace, plural, name, sub): (Option<&str>, &str, Option<&str>, Option<&str>) =
        match rest {
            ["namespaces", ns, sub @ ("status" | "finalize")] => {
                (None, "namespaces", Some(*ns), Some(*sub))
            }
            ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
            ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
            ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
            [plural] => (None, *plural, None, None),
            [plural, name] => (None, *plural, Some(*name), None),
            [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
            _ => return Err(ApiError::path_not_found(raw.path)),
        };
    let resource = registry
        .get(group, version, plural)
        .ok_or_else(|| ApiError::path_not_found(raw.path))?;
    if namespace.is_some() && !resource.namespaced {
        return Err(ApiError::path_not_found(raw.path));
    }
    let sub = match sub {
        None => None,
        Some("status") if resource.status => Some(Subresource::Status),
        Some("scale") if resource.scale.is_some() => Some(Subresource::Scale),
        Some("eviction") if resource.eviction => Some(Subresource::Eviction),
        Some(_) => return Err(ApiError::path_not_found(raw.path)),
    };
    if resource.namespaced && name.is_some() && namespace.is_none() {
        return Err(ApiError::path_not_found(raw.path));
    }
    let target = Target {
        resource: resource.clone(),
        namespace: namespace.map(str::to_owned),
        name: name.map(|n| n.to_owned()),
        sub,
    };
    let is_watch = legacy_watch || query.flag("watch")?;
    let method = raw.method;
    if *method == Method::GET {
        if name.is_some() && !is_watch {
            return Ok(Action::Get(target));
        }
        if sub.is_some() {
            return Err(ApiError::method_not_allowed(
                "watch and list are not supported on subresources",
            ));
        }
        let mut options = list_options(&query, &resource)?;
        if let Some(name) = name {
            let pinned =
                FieldSelector::parse(&format!("metadata.name={name}"), &["metadata.name"])?;
            options.fields = if options.fields == FieldSelector::default() {
                pinned
            } else {
                return Err(ApiError::bad_request(
                    "a field selector may not be combined with a name in a watch path",
                ));
            };
        }
        return Ok(if is_watch {
            Action::Watch(target, options)
        } else {
            Action::List(target, options)
        });
    }
    let write = WriteOptions {
        field_manager: query.get("fieldManager").map(str::to_owned),
        force: query.flag("force")?,
        dry_run: dry_run(&query)?,
        strict: match query.get("fieldValidation") {
            None | Some("" | "Ignore" | "Warn") => false,
            Some("Strict") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Warn\", \"Strict\""
                )));
            }
        },
    };
    if let Some(manager) = &write.field_manager
        && manager.len() > 128
    {
        return Err(ApiError::invalid(
            &resource.group,
            &resource.kind,
            target.name(),
            vec![(
                "fieldManager".into(),
                "Too long: may not be longer than 128".into(),
            )],
        ));
    }
    match *method {
        Method::POST => {
            if sub == Some(Subresource::Eviction) {
                return Ok(Action::Evict(
                    target,
                    object_body(&raw.body, raw.content_type)?,
                ));
            }
            if name.is_some() || sub.is_some() {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource (post {})",
                    raw.path
                )));
            }
            if resource.namespaced && namespace.is_none() {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource (post {})",
                    raw.path
                )));
            }
            Ok(Action::Create(
                target,
                object_body(&raw.body, raw.content_type)?,
                write,
            ))
        }
        Method::PUT => {
            if name.is_none() || sub == Some(Subresource::Eviction) {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource (put {})",
                    raw.path
                )));
            }
            Ok(Action::Update(
                target,
                object_body(&raw.body, raw.content_type)?,
                write,
            ))
        }
        Method::PATCH => {
            if name.is_none() || sub == Some(Subresource::Eviction) {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource (patch {})",
                    raw.path
                )));
            }
            let kind = PatchType::from_content_type(raw.content_type)
                .ok_or_else(|| ApiError::unsupported_media_type(raw.content_type))?;
            if kind == PatchType::Strategic && !resource.strategic {
                return Err(ApiError::unsupported_media_type(raw.content_type));
            }
            if kind == PatchType::Apply && write.field_manager.is_none() {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![(
                        "fieldManager".into(),
                        "Required value: is required for apply patch".into(),
                    )],
                ));
            }
            if kind != PatchType::Apply && write.force {
                return Err(ApiError::bad_request(
                    "force may only be specified with an apply patch",
                ));
            }
            Ok(Action::Patch(target, kind, raw.body, write))
        }
        Method::DELETE => {
            let delete = delete_options(&query, &raw.body)?;
            if sub.is_some() {
                return Err(ApiError::method_not_allowed(
                    "delete is not supported on subresources",
                ));
            }
            match name {
                Some(_) => Ok(Action::Delete(target, delete)),
                None => Ok(Action::DeleteCollection(
                    target.clone(),
                    list_options(&query, &resource)?,
                    delete,
                )),
            }
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow method {method}"
        ))),
    }
}
