//! Partial Kubernetes objects: a watch of a stand-in controller decodes only the fields it reads
//! (every renewal of every Lease and every node status reaches it; decoding each whole,
//! managedFields above all, was a cost of its own in a 1,000-node rollout).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// The metadata a watch needs: identity and resourceVersion, nothing else (`#[serde(deserialize_with = "partial::identity")]` on a partial type's `metadata`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

pub(crate) fn identity<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    let Identity {
        name,
        namespace,
        uid,
        resource_version,
    } = Identity::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        ..ObjectMeta::default()
    })
}

/// The metadata a controller of pods needs besides identity: labels, owners, and whether the
/// object is going (`#[serde(deserialize_with = "partial::ownership")]`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ownership {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    owner_references: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    #[serde(default)]
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

pub(crate) fn ownership<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    let Ownership {
        name,
        namespace,
        uid,
        resource_version,
        labels,
        owner_references,
        deletion_timestamp,
    } = Ownership::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        labels,
        owner_references,
        deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// `kube::Resource` for a partial type, through the k8s-openapi traits of the type it reads.
macro_rules! partial_of {
    ($partial:ty, $full:ty) => {
        impl k8s_openapi::Resource for $partial {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str =
                <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }
        impl k8s_openapi::Metadata for $partial {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use partial_of;
