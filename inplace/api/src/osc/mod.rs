//! The OperatingSystemConfig (OSC): the desired node configuration the agent applies, delivered
//! in one Secret per pool ([`secret`]).
//!
//! ```yaml
//! apiVersion: rackproof.dev/v1alpha1
//! kind: OperatingSystemConfig
//! spec:
//!   pool: pool-a
//!   inPlaceUpdates:                       # present for in-place pools
//!     operatingSystemVersion: "1631.0"
//!     kubelet: { version: 1.30.4, evictionHard: { memoryAvailable: 100Mi } }
//!     credentialsRotation:
//!       certificateAuthorities: { lastInitiationTime: "2024-01-01T12:30:00Z" }
//!       serviceAccountKey: { lastInitiationTime: "2024-01-01T12:30:00Z" }
//!   files:
//!   - { path: /etc/motd, content: { inline: { encoding: "", data: "hello" } } }
//! status:
//!   inPlaceUpdates:
//!     osUpdate: { command: /opt/gardener/bin/inplace-update.sh, args: [--version, "1631.0"] }
//! ```
//!
//! `spec` says *what* the node should run (written from the pool), `status.inPlaceUpdates.osUpdate`
//! says *how* to update the OS (written by whoever knows the OS, Gardener's OS extension). The
//! agent compares the inputs of the last-applied and the new OSC with
//! [`crate::classify::in_place_changes`] after reading them with [`crate::pool::UpdateInputs::from_osc`].

pub mod secret;

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::crd::{CredentialsRotation, EvictionHard, Reserved, WorkerPoolSpec};
use crate::version::KubeVersion;

/// `apiVersion` of the document.
pub const API_VERSION: &str = "rackproof.dev/v1alpha1";
/// `kind` of the document.
pub const KIND: &str = "OperatingSystemConfig";

/// The document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatingSystemConfig {
    /// [`API_VERSION`].
    pub api_version: String,
    /// [`KIND`].
    pub kind: String,
    /// What the node should run.
    pub spec: OscSpec,
    /// How to get there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OscStatus>,
}

impl OperatingSystemConfig {
    /// A document with the right `apiVersion` and `kind`.
    pub fn new(spec: OscSpec, status: Option<OscStatus>) -> Self {
        Self {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            spec,
            status,
        }
    }

    /// The OS-update command, if the OS extension provided one.
    pub fn os_update(&self) -> Option<&OsUpdate> {
        self.status
            .as_ref()?
            .in_place_updates
            .as_ref()?
            .os_update
            .as_ref()
    }
}

/// What the node should run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OscSpec {
    /// The worker pool.
    pub pool: String,
    /// In-place update inputs (in-place pools only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdates>,
    /// Files to write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
}

/// `spec.inPlaceUpdates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InPlaceUpdates {
    /// The machine image version the node should run.
    pub operating_system_version: String,
    /// Kubelet version and configuration.
    pub kubelet: OscKubelet,
    /// Credentials rotation initiation times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_rotation: Option<CredentialsRotation>,
}

impl InPlaceUpdates {
    /// The in-place inputs of a pool; `kubelet_version` is the pool's effective version.
    pub fn for_pool(spec: &WorkerPoolSpec, kubelet_version: &KubeVersion) -> Self {
        let kubelet = spec.kubelet().cloned().unwrap_or_default();
        Self {
            operating_system_version: spec.machine.image.version.clone(),
            kubelet: OscKubelet {
                version: kubelet_version.to_string(),
                cpu_manager_policy: kubelet.cpu_manager_policy,
                eviction_hard: kubelet.eviction_hard,
                kube_reserved: kubelet.kube_reserved,
                system_reserved: kubelet.system_reserved,
            },
            credentials_rotation: spec.credentials_rotation.clone(),
        }
    }
}

/// `spec.inPlaceUpdates.kubelet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OscKubelet {
    /// Kubelet version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// CPU manager policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_manager_policy: Option<String>,
    /// Hard eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<EvictionHard>,
    /// Reserved for Kubernetes components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<Reserved>,
    /// Reserved for the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<Reserved>,
}

/// A file to write on the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct File {
    /// Absolute path.
    pub path: String,
    /// Octal permissions as a number (e.g. 0o644 = 420); 0600 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<u32>,
    /// Content.
    pub content: FileContent,
}

/// File content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileContent {
    /// Inline data.
    pub inline: InlineContent,
}

/// Inline data with its encoding: `""` (plain) or `b64`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InlineContent {
    /// `""` or `b64`.
    #[serde(default)]
    pub encoding: String,
    /// The data.
    pub data: String,
}

/// A file's content can't be decoded.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The encoding is not `""` or `b64`.
    #[error("file {path} has unknown encoding {encoding:?}; use \"\" or \"b64\"")]
    UnknownEncoding {
        /// File path.
        path: String,
        /// The encoding.
        encoding: String,
    },
    /// The base64 data is malformed.
    #[error("file {path} has malformed base64 data")]
    Base64 {
        /// File path.
        path: String,
        /// Decoder error.
        #[source]
        source: base64::DecodeError,
    },
}

impl File {
    /// A file whose bytes are stored base64-encoded.
    pub fn inline(path: &str, permissions: Option<u32>, bytes: &[u8]) -> Self {
        Self {
            path: path.to_owned(),
            permissions,
            content: FileContent {
                inline: InlineContent {
                    encoding: "b64".to_owned(),
                    data: base64::engine::general_purpose::STANDARD.encode(bytes),
                },
            },
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, FileError> {
        let inline = &self.content.inline;
        match inline.encoding.as_str() {
            "" => Ok(inline.data.clone().into_bytes()),
            "b64" => base64::engine::general_purpose::STANDARD
                .decode(&inline.data)
                .map_err(|source| FileError::Base64 {
                    path: self.path.clone(),
                    source,
                }),
            other => Err(FileError::UnknownEncoding {
                path: self.path.clone(),
                encoding: other.to_owned(),
            }),
        }
    }
}

/// How to get to the spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OscStatus {
    /// In-place update instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdatesStatus>,
}

/// `status.inPlaceUpdates`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InPlaceUpdatesStatus {
    /// The OS-update command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_update: Option<OsUpdate>,
}

/// `status.inPlaceUpdates.osUpdate`: the command that updates the OS; its exit code is read with
/// [`crate::keys::OsUpdateExit::from_code`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsUpdate {
    /// Executable path.
    pub command: String,
    /// Arguments, e.g. `--version 1631.0 --repo <registry>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

#[cfg(test)]
mod tests;
