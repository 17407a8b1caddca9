//! JSON Pointer (RFC 6901) lookups that allocate only for escaped tokens.
//!
//! `serde_json::Value::pointer` unescapes every token into a new `String` (two per token),
//! and the server resolves paths such as `/metadata/uid` several times per write; on a
//! heartbeat-sized write those allocations were a measurable share of the request. [`At::at`]
//! and [`At::at_mut`] answer exactly as `pointer` and `pointer_mut` do.

use std::borrow::Cow;

use serde_json::Value;

/// Pointer lookups on a JSON value (see the module docs).
pub(crate) trait At {
    /// The value at `pointer`, as [`Value::pointer`].
    fn at(&self, pointer: &str) -> Option<&Value>;
    /// The value at `pointer`, as [`Value::pointer_mut`].
    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        // The server's own pointers (`/metadata/uid`) have no escapes: their tokens are slices.
        if let Some(rest) = pointer.strip_prefix('/')
            && !rest.contains('~')
        {
            return rest.split('/').try_fold(self, step);
        }
        tokens(pointer)?.try_fold(self, |value, token| step(value, &token))
    }

    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let mut value = self;
        for token in tokens(pointer)? {
            value = match value {
                Value::Object(map) => map.get_mut(token.as_ref())?,
                Value::Array(list) => list.get_mut(index(&token)?)?,
                _ => return None,
            };
        }
        Some(value)
    }
}

/// The member or item `token` names in `value`.
fn step<'v>(value: &'v Value, token: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => map.get(token),
        Value::Array(list) => list.get(index(token)?),
        _ => None,
    }
}

/// The unescaped reference tokens of `pointer`; `None` unless it is empty or starts with `/`.
fn tokens(pointer: &str) -> Option<impl Iterator<Item = Cow<'_, str>>> {
    let rest = match pointer {
        "" => None,
        _ => Some(pointer.strip_prefix('/')?),
    };
    Some(
        rest.into_iter()
            .flat_map(|rest| rest.split('/'))
            .map(|token| {
                if token.contains('~') {
                    Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
                } else {
                    Cow::Borrowed(token)
                }
            }),
    )
}

/// An array index token: digits without a leading zero (or `0` itself), as serde_json reads it.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every lookup answers as serde_json's own, escapes and array indexes included.
    #[test]
    fn lookups_answer_as_serde_json_pointer() {
        let mut doc = json!({
            "metadata": {"name": "a", "labels": {"x/y": "1", "m~n": "2", "": "3"}},
            "spec": {"list": [{"k": 0}, {"k": 1}], "0": "zero"},
        });
        let pointers = [
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/name/x",
            "/metadata/labels/x~1y",
            "/metadata/labels/m~0n",
            "/metadata/labels/",
            "/spec/list/1/k",
            "/spec/list/01",
            "/spec/list/+1",
            "/spec/list/2",
            "/spec/list/-",
            "/spec/0",
            "metadata",
            "/missing",
            "/spec/list/1/k/deeper",
        ];
        for pointer in pointers {
            assert_eq!(doc.at(pointer), doc.pointer(pointer), "{pointer:?}");
            let expected = doc.clone().pointer_mut(pointer).map(|v| v.clone());
            assert_eq!(
                doc.at_mut(pointer).map(|v| v.clone()),
                expected,
                "{pointer:?}"
            );
        }
        *doc.at_mut("/spec/list/0/k").unwrap() = json!(7);
        assert_eq!(doc["spec"]["list"][0]["k"], 7);
    }
}
