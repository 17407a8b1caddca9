//! `ImageCatalog` (`rackproof.dev/v1alpha1`, cluster-scoped): the versions a pool may use, in the
//! role of Gardener's CloudProfile — Kubernetes versions and machine image versions with their
//! classification, expiration date and in-place update support.
//!
//! ```yaml
//! apiVersion: rackproof.dev/v1alpha1
//! kind: ImageCatalog
//! metadata: { name: lab }
//! spec:
//!   kubernetes:
//!     versions:
//!     - { version: 1.31.1, classification: supported }
//!   machineImages:
//!   - name: gardenlinux
//!     updateStrategy: minor
//!     versions:
//!     - version: 1632.0.0
//!       inPlaceUpdates: { supported: true, minVersionForUpdate: 1630.0.0 }
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The versions offered to worker pools.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "rackproof.dev",
    version = "v1alpha1",
    kind = "ImageCatalog",
    shortname = "ic",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageCatalogSpec {
    /// Kubernetes versions.
    #[serde(default)]
    pub kubernetes: KubernetesVersions,
    /// Machine images and their versions.
    #[serde(default)]
    pub machine_images: Vec<CatalogImage>,
}

impl ImageCatalogSpec {
    /// The catalog entry of a machine image version (compared numerically, `1631.0` = `1631.0.0`).
    pub fn image_version(
        &self,
        name: &str,
        version: &crate::version::ImageVersion,
    ) -> Option<&ImageVersionEntry> {
        self.machine_images
            .iter()
            .filter(|image| image.name == name)
            .flat_map(|image| &image.versions)
            .find(|entry| {
                crate::version::ImageVersion::parse(&entry.version).is_ok_and(|v| &v == version)
            })
    }

    /// The catalog entry of a Kubernetes version.
    pub fn kubernetes_version(
        &self,
        version: &crate::version::KubeVersion,
    ) -> Option<&VersionEntry> {
        self.kubernetes.versions.iter().find(|entry| {
            crate::version::KubeVersion::parse(&entry.version).is_ok_and(|v| &v == version)
        })
    }
}

/// Kubernetes versions of the catalog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesVersions {
    /// The versions.
    #[serde(default)]
    pub versions: Vec<VersionEntry>,
}

/// One Kubernetes version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionEntry {
    /// The version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// Its logical state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<Classification>,
    /// From this instant on the version is expired: pools can't move to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<Time>,
}

/// A machine image and its versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogImage {
    /// Image name, e.g. `gardenlinux`.
    pub name: String,
    /// How far an automatic (maintenance) update of this image may move; `major` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<ImageUpdateStrategy>,
    /// Its versions.
    #[serde(default)]
    pub versions: Vec<ImageVersionEntry>,
}

impl CatalogImage {
    /// The image's update strategy, `major` when absent (Gardener's default).
    pub fn update_strategy(&self) -> ImageUpdateStrategy {
        self.update_strategy.unwrap_or_default()
    }
}

/// How far an automatic update of a machine image may move (the CloudProfile's
/// `machineImages[].updateStrategy`): the first number of an image version is its major, the
/// second its minor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageUpdateStrategy {
    /// Only to a higher patch of the same major.minor.
    Patch,
    /// Only within the same major.
    Minor,
    /// To any higher version.
    #[default]
    Major,
}

impl ImageUpdateStrategy {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Patch => "patch",
            Self::Minor => "minor",
            Self::Major => "major",
        }
    }
}

/// One machine image version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageVersionEntry {
    /// The version, e.g. `1443.8.0`.
    pub version: String,
    /// Its logical state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<Classification>,
    /// From this instant on the version is expired: pools can't move to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<Time>,
    /// Whether and from where an in-place update to this version is possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdateSupport>,
}

/// In-place update support of a machine image version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InPlaceUpdateSupport {
    /// Whether pools on this version may use an in-place strategy.
    pub supported: bool,
    /// The lowest version from which an in-place update to this version is possible; without it,
    /// no in-place update to this version is possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version_for_update: Option<String>,
}

impl VersionEntry {
    /// The classification, `supported` when absent (Gardener's default).
    pub fn classification(&self) -> Classification {
        self.classification.unwrap_or(Classification::Supported)
    }
}

impl ImageVersionEntry {
    /// The classification, `supported` when absent (Gardener's default).
    pub fn classification(&self) -> Classification {
        self.classification.unwrap_or(Classification::Supported)
    }
}

/// Logical state of a version; `expired` is not a classification but follows from the
/// expiration date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Classification {
    /// New, not yet recommended for production.
    Preview,
    /// Recommended.
    Supported,
    /// Approaching its end of life.
    Deprecated,
}

/// Whether an entry with this expiration date is expired at `now` (the date itself counts as expired).
pub fn is_expired(expiration_date: Option<&Time>, now: jiff::Timestamp) -> bool {
    expiration_date.is_some_and(|date| date.0 <= now)
}
