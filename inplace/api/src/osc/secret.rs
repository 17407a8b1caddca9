//! The Secret that carries a pool's OperatingSystemConfig to its nodes.
//!
//! | what | value |
//! |---|---|
//! | name | `gardener-node-agent-<pool>-<pool hash, 16 hex>` ([`secret_name`]); the in-place pool hash leaves out everything an in-place update changes, so the name stays put while the content changes |
//! | label | [`crate::keys::LABEL_WORKER_POOL`] = pool name |
//! | data key | [`DATA_KEY`] (`osc.yaml`): the document as YAML |
//! | annotation | [`crate::keys::ANNOTATION_CHECKSUM_DOWNLOADED_OSC`]: SHA-256 (hex) of the data |
//!
//! After applying a document completely, the agent copies the checksum into the Node annotation
//! [`crate::keys::ANNOTATION_CHECKSUM_APPLIED_OSC`]; equal checksums mean the node is up to date.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::OperatingSystemConfig;
use crate::hash::PoolHash;
use crate::keys::{ANNOTATION_CHECKSUM_DOWNLOADED_OSC, LABEL_WORKER_POOL};

/// Data key of the document in the Secret.
pub const DATA_KEY: &str = "osc.yaml";
/// Prefix of the Secret names.
pub const SECRET_NAME_PREFIX: &str = "gardener-node-agent-";

/// Encoding or decoding the Secret failed.
#[derive(Debug, thiserror::Error)]
pub enum OscSecretError {
    /// The document can't be written as YAML.
    #[error("encoding the operating system config of pool {pool}")]
    Encode {
        /// Pool name.
        pool: String,
        /// Serializer error.
        #[source]
        source: serde_saphyr::SerializeError,
    },
    /// The Secret has no document.
    #[error("secret {secret} has no {DATA_KEY:?} data")]
    MissingData {
        /// Secret name.
        secret: String,
    },
    /// The document can't be read.
    #[error("reading the operating system config in secret {secret}")]
    Decode {
        /// Secret name.
        secret: String,
        /// Parser error.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The annotated checksum disagrees with the data.
    #[error(
        "secret {secret} is annotated with checksum {annotated} but its data has checksum {computed}"
    )]
    ChecksumMismatch {
        /// Secret name.
        secret: String,
        /// The annotation's value.
        annotated: String,
        /// The data's checksum.
        computed: String,
    },
}

/// A document read from its Secret.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedOsc {
    /// The document.
    pub osc: OperatingSystemConfig,
    /// SHA-256 (hex) of the data, to compare with the Node's applied checksum.
    pub checksum: String,
}

/// The Secret name for a pool with the given in-place pool hash.
pub fn secret_name(pool: &str, pool_hash: &PoolHash) -> String {
    format!("{SECRET_NAME_PREFIX}{pool}-{}", pool_hash.short())
}

/// SHA-256 (hex) of the Secret data.
pub fn checksum(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Writes the document into a Secret named `name` in `namespace`.
pub fn encode_secret(
    osc: &OperatingSystemConfig,
    name: &str,
    namespace: &str,
) -> Result<Secret, OscSecretError> {
    let yaml = serde_saphyr::to_string(osc).map_err(|source| OscSecretError::Encode {
        pool: osc.spec.pool.clone(),
        source,
    })?;
    let data = yaml.into_bytes();
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                LABEL_WORKER_POOL.to_owned(),
                osc.spec.pool.clone(),
            )])),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_CHECKSUM_DOWNLOADED_OSC.to_owned(),
                checksum(&data),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_owned(), ByteString(data))])),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    })
}

/// Reads the document from its Secret, checking the checksum annotation when present.
pub fn decode_secret(secret: &Secret) -> Result<DecodedOsc, OscSecretError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| OscSecretError::MissingData {
            secret: name.clone(),
        })?;
    let computed = checksum(&data.0);
    if let Some(annotated) = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CHECKSUM_DOWNLOADED_OSC))
        && *annotated != computed
    {
        return Err(OscSecretError::ChecksumMismatch {
            secret: name,
            annotated: annotated.clone(),
            computed,
        });
    }
    let osc = serde_saphyr::from_slice(&data.0).map_err(|source| OscSecretError::Decode {
        secret: name,
        source: Box::new(source),
    })?;
    Ok(DecodedOsc {
        osc,
        checksum: computed,
    })
}
