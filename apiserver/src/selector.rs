//! Label and field selectors: parsing the query-string forms (`a=b,c in (x,y),!d`) and the
//! `metav1.LabelSelector` object form, and matching them against stored objects.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector: every requirement must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the string form used in `?labelSelector=`.
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Self { requirements })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object. `None` → matches everything
    /// when `empty_matches_all`; kube-apiserver treats a missing PDB selector as matching nothing.
    pub(crate) fn from_object(selector: &Value) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().ok_or_else(|| {
                    ApiError::bad_request(format!("matchLabels value for {key:?} is not a string"))
                })?;
                requirements.push(Requirement::Equals(key.clone(), value.to_owned()));
            }
        }
        if let Some(expressions) = selector.get("matchExpressions").and_then(Value::as_array) {
            for expression in expressions {
                let key = expression
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let values: BTreeSet<String> = expression
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|v| {
                        v.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let operator = expression
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                requirements.push(match operator {
                    "In" => Requirement::In(key, values),
                    "NotIn" => Requirement::NotIn(key, values),
                    "Exists" => Requirement::Exists(key),
                    "DoesNotExist" => Requirement::NotExists(key),
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "{other:?} is not a valid label selector operator"
                        )));
                    }
                });
            }
        }
        Ok(Self { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = object.get("metadata").and_then(|m| m.get("labels"));
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
                Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
                Requirement::In(k, set) => get(k).is_some_and(|v| set.contains(v)),
                Requirement::NotIn(k, set) => get(k).is_none_or(|v| !set.contains(v)),
                Requirement::Exists(k) => get(k).is_some(),
                Requirement::NotExists(k) => get(k).is_none(),
                Requirement::GreaterThan(k, n) => get(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                Requirement::LessThan(k, n) => get(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            })
    }
}

fn split_top_level(text: &str) -> Result<Vec<&str>, ApiError> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(parse_error(text, "unbalanced ')'"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(parse_error(text, "unbalanced '('"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_error(text: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {text:?}: {why}"))
}

fn parse_requirement(part: &str) -> Result<Requirement, ApiError> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        validate_key(key, part)?;
        return Ok(Requirement::NotExists(key.to_owned()));
    }
    for (op, build) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            validate_key(key, part)?;
            validate_value(value, part)?;
            return Ok(build(key.to_owned(), value.to_owned()));
        }
    }
    for (op, greater) in [(">", true), ("<", false)] {
        if let Some((key, value)) = part.split_once(op) {
            let key = key.trim();
            validate_key(key, part)?;
            let number: i64 = value.trim().parse().map_err(|_| {
                parse_error(
                    part,
                    "for 'gt', 'lt' operators, the value must be an integer",
                )
            })?;
            return Ok(if greater {
                Requirement::GreaterThan(key.to_owned(), number)
            } else {
                Requirement::LessThan(key.to_owned(), number)
            });
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default().trim();
    let rest = words.next().unwrap_or_default().trim();
    validate_key(key, part)?;
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.to_owned()));
    }
    let (notin, set_text) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (false, set)
    } else {
        return Err(parse_error(
            part,
            "found unknown operator, expected one of: =, ==, !=, in, notin, exists, gt, lt",
        ));
    };
    let set_text = set_text.trim();
    let inner = set_text
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| parse_error(part, "expected a set of values in parentheses"))?;
    if inner.trim().is_empty() {
        return Err(parse_error(
            part,
            "for 'in', 'notin' operators, values set can't be empty",
        ));
    }
    let mut values = BTreeSet::new();
    for value in inner.split(',') {
        let value = value.trim();
        validate_value(value, part)?;
        values.insert(value.to_owned());
    }
    if values.is_empty() {
        return Err(parse_error(
            part,
            "for 'in', 'notin' operators, values set can't be empty",
        ));
    }
    Ok(if notin {
        Requirement::NotIn(key.to_owned(), values)
    } else {
        Requirement::In(key.to_owned(), values)
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

fn validate_key(key: &str, part: &str) -> Result<(), ApiError> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty()
                || prefix.len() > 253
                || !prefix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            {
                return Err(parse_error(part, "prefix part must be a DNS subdomain"));
            }
            name
        }
        None => key,
    };
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(is_name_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(parse_error(
            part,
            "name part must consist of alphanumeric characters, '-', '_' or '.'",
        ))
    }
}

fn validate_value(value: &str, part: &str) -> Result<(), ApiError> {
    let valid = value.is_empty()
        || (value.len() <= 63
            && value.chars().all(is_name_char)
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if valid {
        Ok(())
    } else {
        Err(parse_error(
            part,
            "a valid label value must be 63 characters or less and consist of alphanumeric characters, '-', '_' or '.'",
        ))
    }
}

/// A parsed field selector: `field=value` and `field!=value` terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses `?fieldSelector=`, checking each field against those `supported` for the resource.
    pub(crate) fn parse(text: &str, supported: &[&str]) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}: expected an operator (=, ==, !=)"
                )));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self { terms })
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.terms
            .iter()
            .all(|(field, equal, value)| (field_value(object, field) == *value) == *equal)
    }

    /// The value `field` must equal, if the selector pins it.
    pub(crate) fn pinned(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, equal, _)| f == field && *equal)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The string value of a selectable field (`spec.nodeName` → "" when unset; booleans as text).
pub(crate) fn field_value(object: &Value, field: &str) -> String {
    // Walked step by step: this runs for every watch event and every selected object, and
    // `Value::pointer` would allocate the pointer and each of its steps.
    match field
        .split('.')
        .try_fold(object, |value, step| value.get(step))
    {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ if field == "spec.unschedulable" || field == "spec.hostNetwork" => "false".to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}})
    }

    #[test]
    fn every_operator_matches_like_kubernetes() {
        let object = labelled(json!({"app": "web", "tier": "front", "n": "5"}));
        for (selector, expected) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("missing notin (a)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("n>4", true),
            ("n<4", false),
            ("app=web,tier in (front),!missing", true),
            ("", true),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&object), expected, "selector {selector:?}");
        }
    }

    #[test]
    fn malformed_selectors_are_bad_requests() {
        for selector in [
            "app in web",
            "app in ()",
            "a=(b",
            "=x",
            "app foo (x)",
            "bad key=1",
            "a=b c",
        ] {
            let error = LabelSelector::parse(selector).unwrap_err();
            assert_eq!(error.code, 400, "selector {selector:?}");
        }
    }

    #[test]
    fn field_selectors_check_supported_fields() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let fields = ["metadata.name", "spec.nodeName", "status.phase"];
        assert!(
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", &fields)
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !FieldSelector::parse("spec.nodeName==n2", &fields)
                .unwrap()
                .matches(&pod)
        );
        assert_eq!(
            FieldSelector::parse("spec.foo=1", &fields)
                .unwrap_err()
                .code,
            400
        );
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.unschedulable=false", &["spec.unschedulable"])
                .unwrap()
                .matches(&node)
        );
    }
}
