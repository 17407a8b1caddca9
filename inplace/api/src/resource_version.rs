//! resourceVersions as Rackproof's clients use them: read back from a write's reply, and compared
//! to tell whether a watched copy already shows a write (read-your-own-writes over a watch).
//!
//! They are opaque strings to clients. kube-apiserver's (etcd revisions) and the embedded
//! server's are numbers that grow with every write, and only that makes the comparison possible;
//! any other format compares only when equal, so it costs a read, never a stale answer.

use serde::Deserialize;

/// What a write reads of its reply: the object's new resourceVersion. The rest of the reply —
/// what the writer sent, plus managedFields — is skipped, not decoded.
#[derive(Debug, Deserialize)]
pub struct Written {
    metadata: WrittenMeta,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrittenMeta {
    resource_version: Option<String>,
}

impl Written {
    /// The resourceVersion the server gave the written object.
    pub fn resource_version(self) -> Option<String> {
        self.metadata.resource_version
    }
}

/// A resourceVersion as a number, when the server's are numbers.
pub fn as_number(rv: &str) -> Option<u64> {
    rv.parse().ok()
}

/// Whether an object at resourceVersion `copy` includes the write that returned `written`.
pub fn includes(copy: &str, written: &str) -> bool {
    match (as_number(copy), as_number(written)) {
        (Some(copy), Some(written)) => copy >= written,
        _ => copy == written,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_includes_a_write_from_its_version_on() {
        assert!(includes("42", "42"));
        assert!(
            includes("100", "42"),
            "numbers compare as numbers, not text"
        );
        assert!(!includes("41", "42"));
        assert!(includes("v7", "v7"));
        assert!(
            !includes("v8", "v7"),
            "an unknown format counts only when equal"
        );
    }

    #[test]
    fn a_reply_gives_its_version_and_nothing_else_is_read() {
        let reply = r#"{"kind": "Lease", "metadata": {"name": "n", "resourceVersion": "12", "managedFields": [{"x": 1}]}, "spec": 5}"#;
        assert_eq!(
            serde_json::from_str::<Written>(reply)
                .unwrap()
                .resource_version()
                .as_deref(),
            Some("12")
        );
        assert_eq!(
            serde_json::from_str::<Written>(r#"{"metadata": {}}"#)
                .unwrap()
                .resource_version(),
            None
        );
    }
}
