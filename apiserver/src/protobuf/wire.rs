//! Protobuf wire format to JSON, driven by a [`Message`] table: each field's number says which
//! JSON field it becomes and how its bytes read. A field the table does not name is an error, so
//! nothing a client sent is silently dropped.
//!
//! Zero values follow Go's JSON encoding of Kubernetes types: the Go encoder writes every
//! non-pointer field, also when it is empty, where JSON leaves it out (`omitempty`); such a field
//! ([`Shape::One`]) is left out when it holds its zero value. A pointer field
//! ([`Shape::Pointer`], such as `spec.replicas`) is sent only when set and kept as sent, zero
//! included.

use base64::Engine;
use serde_json::{Map, Value};

/// A message: its name (for errors) and its fields.
#[derive(Debug)]
pub(crate) struct Message {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) number: u32,
    /// Its JSON name.
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) shape: Shape,
}

/// How a field's value reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    String,
    /// Base64 in JSON.
    Bytes,
    Int32,
    Int64,
    Bool,
    Message(&'static Message),
    /// `meta/v1.Time`: seconds (and nanos, unread), an RFC 3339 time in JSON.
    Time,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
}

/// How often a field occurs and what its absence means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A plain Go field: left out of the JSON when it holds its zero value.
    One,
    /// A Go pointer: present only when set, kept as sent.
    Pointer,
    /// A list.
    List,
    /// A `map<string, V>` (entries with the key as field 1, the value as field 2).
    Map,
}

impl Field {
    pub(crate) const fn one(number: u32, name: &'static str, kind: Kind) -> Self {
        Self {
            number,
            name,
            kind,
            shape: Shape::One,
        }
    }

    pub(crate) const fn pointer(number: u32, name: &'static str, kind: Kind) -> Self {
        Self {
            number,
            name,
            kind,
            shape: Shape::Pointer,
        }
    }

    pub(crate) const fn list(number: u32, name: &'static str, kind: Kind) -> Self {
        Self {
            number,
            name,
            kind,
            shape: Shape::List,
        }
    }

    pub(crate) const fn map(number: u32, name: &'static str, kind: Kind) -> Self {
        Self {
            number,
            name,
            kind,
            shape: Shape::Map,
        }
    }
}

/// Why bytes could not be read as a message.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    /// The bytes are not valid protobuf (or not the message the table says).
    #[error("{path}: {why}")]
    Malformed { path: String, why: String },
    /// A field this server's tables do not know.
    #[error("{path}: field number {number} of {message} is not one this server decodes")]
    UnknownField {
        path: String,
        message: &'static str,
        number: u32,
    },
}

/// The four wire types Kubernetes' messages use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WireType {
    Varint,
    Fixed64,
    LengthDelimited,
    Fixed32,
}

/// One field as it appeared on the wire.
enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width value (no Kubernetes field this server decodes uses one).
    Fixed,
}

/// Reads `bytes` as `message` into a JSON object. `path` names where it sits, for errors.
pub(crate) fn read_message(
    bytes: &[u8],
    message: &'static Message,
    path: &str,
) -> Result<Map<String, Value>, WireError> {
    let mut object = Map::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (number, raw) = next_field(&mut rest).map_err(|why| WireError::Malformed {
            path: display_path(path),
            why,
        })?;
        let field = message
            .fields
            .iter()
            .find(|f| f.number == number)
            .ok_or_else(|| WireError::UnknownField {
                path: display_path(path),
                message: message.name,
                number,
            })?;
        let here = join(path, field.name);
        match field.shape {
            Shape::One | Shape::Pointer => {
                let value = read_value(&raw, field.kind, &here)?;
                object.insert(field.name.to_owned(), value);
            }
            Shape::List => {
                let value = read_value(&raw, field.kind, &here)?;
                let list = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.push(value);
                }
            }
            Shape::Map => {
                let (key, value) = read_entry(&raw, field.kind, &here)?;
                let map = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(entries) = map {
                    entries.insert(key, value);
                }
            }
        }
    }
    object.retain(|name, value| {
        let shape = message.fields.iter().find(|f| f.name == name.as_str());
        !matches!(shape, Some(f) if f.shape == Shape::One && is_zero(value))
    });
    Ok(object)
}

/// A plain field's zero value, which Go's JSON encoding of Kubernetes types leaves out. (An empty
/// object stays: Go writes a non-pointer struct as `{}`.)
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(_) => false,
    }
}

fn read_value(raw: &Raw<'_>, kind: Kind, path: &str) -> Result<Value, WireError> {
    let malformed = |why: String| WireError::Malformed {
        path: display_path(path),
        why,
    };
    match (kind, raw) {
        (Kind::Int32, Raw::Varint(v)) => Ok(Value::from(*v as i64 as i32)),
        (Kind::Int64, Raw::Varint(v)) => Ok(Value::from(*v as i64)),
        (Kind::Bool, Raw::Varint(v)) => Ok(Value::Bool(*v != 0)),
        (Kind::String, Raw::Bytes(b)) => std::str::from_utf8(b)
            .map(|s| Value::String(s.to_owned()))
            .map_err(|_| malformed("a string that is not UTF-8".to_owned())),
        (Kind::Bytes, Raw::Bytes(b)) => Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(b),
        )),
        (Kind::Message(message), Raw::Bytes(b)) => {
            read_message(b, message, path).map(Value::Object)
        }
        (Kind::Time, Raw::Bytes(b)) => {
            // Go writes the zero Time as no bytes, and reads only the seconds (its JSON has no
            // fraction).
            if b.is_empty() {
                return Ok(Value::Null);
            }
            let parts = read_message(b, &TIME, path)?;
            let seconds = parts.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            let time = jiff::Timestamp::from_second(seconds)
                .map_err(|e| malformed(format!("not a time: {e}")))?;
            Ok(Value::String(crate::state::format_time(time)))
        }
        (Kind::Quantity, Raw::Bytes(b)) => {
            let parts = read_message(b, &QUANTITY, path)?;
            Ok(parts
                .get("string")
                .cloned()
                .unwrap_or_else(|| Value::String("0".to_owned())))
        }
        (Kind::IntOrString, Raw::Bytes(b)) => {
            let parts = read_message(b, &INT_OR_STRING, path)?;
            if parts.get("type").and_then(Value::as_i64) == Some(1) {
                Ok(parts
                    .get("strVal")
                    .cloned()
                    .unwrap_or_else(|| Value::String(String::new())))
            } else {
                Ok(parts
                    .get("intVal")
                    .cloned()
                    .unwrap_or_else(|| Value::from(0)))
            }
        }
        (kind, _) => Err(malformed(format!(
            "a {kind:?} field arrived in the wrong wire type"
        ))),
    }
}

/// A map entry: key (field 1, a string) and value (field 2, of `kind`).
fn read_entry(raw: &Raw<'_>, kind: Kind, path: &str) -> Result<(String, Value), WireError> {
    let Raw::Bytes(mut rest) = *raw else {
        return Err(WireError::Malformed {
            path: display_path(path),
            why: "a map entry that is not length-delimited".to_owned(),
        });
    };
    let (mut key, mut value) = (String::new(), None);
    while !rest.is_empty() {
        let (number, raw) = next_field(&mut rest).map_err(|why| WireError::Malformed {
            path: display_path(path),
            why,
        })?;
        match number {
            1 => {
                if let Value::String(k) = read_value(&raw, Kind::String, path)? {
                    key = k;
                }
            }
            2 => value = Some(read_value(&raw, kind, &join(path, "[value]"))?),
            number => {
                return Err(WireError::UnknownField {
                    path: display_path(path),
                    message: "a map entry",
                    number,
                });
            }
        }
    }
    let value = match (value, kind) {
        (Some(v), _) => v,
        (None, Kind::String | Kind::Bytes) => Value::String(String::new()),
        (None, Kind::Message(_)) => Value::Object(Map::new()),
        (None, Kind::Quantity) => Value::String("0".to_owned()),
        (None, _) => Value::Null,
    };
    Ok((key, value))
}

/// Takes the next field off `rest`: its number and its raw value.
fn next_field<'a>(rest: &mut &'a [u8]) -> Result<(u32, Raw<'a>), String> {
    let key = varint(rest)?;
    let number =
        u32::try_from(key >> 3).map_err(|_| format!("field number {} is too large", key >> 3))?;
    if number == 0 {
        return Err("field number 0".to_owned());
    }
    let wire = match key & 7 {
        0 => WireType::Varint,
        1 => WireType::Fixed64,
        2 => WireType::LengthDelimited,
        5 => WireType::Fixed32,
        other => {
            return Err(format!(
                "field {number} has wire type {other}, which Kubernetes does not use"
            ));
        }
    };
    let raw = match wire {
        WireType::Varint => Raw::Varint(varint(rest)?),
        WireType::LengthDelimited => {
            let len =
                usize::try_from(varint(rest)?).map_err(|_| "a length too large".to_owned())?;
            if len > rest.len() {
                return Err(format!(
                    "field {number} claims {len} bytes where {} remain",
                    rest.len()
                ));
            }
            let (bytes, tail) = rest.split_at(len);
            *rest = tail;
            Raw::Bytes(bytes)
        }
        WireType::Fixed64 | WireType::Fixed32 => {
            let width = if wire == WireType::Fixed64 { 8 } else { 4 };
            if width > rest.len() {
                return Err(format!("field {number} is cut short"));
            }
            *rest = &rest[width..];
            Raw::Fixed
        }
    };
    Ok((number, raw))
}

/// A base-128 varint.
fn varint(rest: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for (i, byte) in rest.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Ok(value);
        }
    }
    Err("a varint is cut short or longer than ten bytes".to_owned())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "the object".to_owned()
    } else {
        path.to_owned()
    }
}

/// `meta/v1.Time` and `MicroTime`.
static TIME: Message = Message {
    name: "Time",
    fields: &[
        Field::pointer(1, "seconds", Kind::Int64),
        Field::pointer(2, "nanos", Kind::Int32),
    ],
};

/// `resource.Quantity`.
static QUANTITY: Message = Message {
    name: "Quantity",
    fields: &[Field::pointer(1, "string", Kind::String)],
};

/// `intstr.IntOrString`.
static INT_OR_STRING: Message = Message {
    name: "IntOrString",
    fields: &[
        Field::pointer(1, "type", Kind::Int64),
        Field::pointer(2, "intVal", Kind::Int32),
        Field::pointer(3, "strVal", Kind::String),
    ],
};
