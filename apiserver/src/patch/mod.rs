//! Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//! Server-side apply lives in `crate::apply`.

pub(crate) mod merge;
pub(crate) mod strategic;

use serde_json::Value;

use crate::error::ApiError;

/// The patch formats a `PATCH` request may carry, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub(crate) fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies a JSON, merge or strategic patch `body` to `original`.
pub(crate) fn apply_patch(
    kind: PatchType,
    original: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let parse = || {
        serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
    };
    match kind {
        PatchType::Json => {
            let operations: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("the server rejected our request due to an error in our request: invalid JSON patch: {e}")))?;
            let mut doc = original.clone();
            json_patch::patch(&mut doc, &operations.0)
                .map_err(|e| ApiError::invalid_patch(&e.to_string()))?;
            Ok(doc)
        }
        PatchType::Merge => {
            let patch = parse()?;
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            Ok(merge::merge(original, &patch))
        }
        PatchType::Strategic => {
            let patch = parse()?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strategic::merge(original, &patch)
        }
        PatchType::Apply => Err(ApiError::internal(
            "apply patches are handled by server-side apply",
        )),
    }
}
