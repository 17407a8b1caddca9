//! Reading the JSON document: where a value sits ([`Path`], for error messages) and typed
//! field readers that name it when a key has the wrong JSON type; vendor extensions as YAML.

use serde_json::{Map, Value};

use super::messages::{Any, NamedAny};
/// Where a value sits in the document, for error messages (a JSON pointer).
#[derive(Clone)]
pub(super) struct Path(String);

impl Path {
    pub(super) fn root() -> Self {
        Path(String::new())
    }

    pub(super) fn key(&self, key: &str) -> Self {
        Path(format!(
            "{}/{}",
            self.0,
            key.replace('~', "~0").replace('/', "~1")
        ))
    }

    pub(super) fn index(&self, index: usize) -> Self {
        Path(format!("{}/{index}", self.0))
    }

    pub(super) fn wrong(&self, expected: &str, found: &Value) -> String {
        let at = if self.0.is_empty() { "/" } else { &self.0 };
        format!("OpenAPI v2 document at {at}: expected {expected}, found {found}")
    }
}

pub(super) fn object<'a>(value: &'a Value, at: &Path) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| at.wrong("an object", value))
}

pub(super) fn string(map: &Map<String, Value>, key: &str, at: &Path) -> Result<String, String> {
    match map.get(key) {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(at.key(key).wrong("a string", other)),
    }
}

pub(super) fn boolean(map: &Map<String, Value>, key: &str, at: &Path) -> Result<bool, String> {
    match map.get(key) {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(other) => Err(at.key(key).wrong("a boolean", other)),
    }
}

pub(super) fn number(map: &Map<String, Value>, key: &str, at: &Path) -> Result<f64, String> {
    match map.get(key) {
        None => Ok(0.0),
        Some(value) => value
            .as_f64()
            .ok_or_else(|| at.key(key).wrong("a number", value)),
    }
}

pub(super) fn integer(map: &Map<String, Value>, key: &str, at: &Path) -> Result<i64, String> {
    match map.get(key) {
        None => Ok(0),
        Some(value) => value
            .as_i64()
            .ok_or_else(|| at.key(key).wrong("an integer", value)),
    }
}

pub(super) fn strings(
    map: &Map<String, Value>,
    key: &str,
    at: &Path,
) -> Result<Vec<String>, String> {
    match map.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| at.key(key).index(i).wrong("a string", item))
            })
            .collect(),
        Some(other) => Err(at.key(key).wrong("an array of strings", other)),
    }
}

pub(super) fn any(map: &Map<String, Value>, key: &str) -> Option<Any> {
    map.get(key).map(|value| Any { yaml: yaml(value) })
}

pub(super) fn anys(map: &Map<String, Value>, key: &str, at: &Path) -> Result<Vec<Any>, String> {
    match map.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            Ok(items.iter().map(|item| Any { yaml: yaml(item) }).collect())
        }
        Some(other) => Err(at.key(key).wrong("an array", other)),
    }
}

/// The `x-` keys of `map`, in order, as gnostic carries them.
pub(super) fn extensions(map: &Map<String, Value>) -> Vec<NamedAny> {
    map.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(Any { yaml: yaml(v) }),
        })
        .collect()
}

/// `value` as YAML text, as gnostic's `Any.yaml` holds it. Strings that YAML reads back
/// unchanged without quotes are written plain (`merge\n`, as gnostic writes them); any other
/// value is written as JSON, which is YAML (flow style) that every YAML reader accepts.
pub(crate) fn yaml(value: &Value) -> String {
    let plain = |text: &str| {
        const SPECIAL: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];
        text.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ','))
            && !SPECIAL.contains(&text.to_ascii_lowercase().as_str())
    };
    match value {
        Value::String(text) if plain(text) => format!("{text}\n"),
        other => format!("{other}\n"),
    }
}
