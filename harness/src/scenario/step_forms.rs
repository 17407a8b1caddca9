//! Steps written short or long: `scale: 4` or `scale: { pool: small, nodes: 4 }`, and
//! `maintenanceOperation: rotate-ca-start` or `maintenanceOperation: { pool: small, operation:
//! rotate-ca-start }`. The long form names the pool the step acts on.
//!
//! Each is read by kind of YAML node (a scalar is the short form, a mapping the long form),
//! never `untagged`, so a mistake in the long form is reported as the field it is about.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Located;

/// A `scale` step: a pool's new node count.
#[derive(Debug, Clone)]
pub struct Scale {
    /// The pool to scale (one of `pools`); `None` in the short form.
    pub pool: Option<Located<String>>,
    /// Its node count, where it was written.
    pub nodes: Located<u32>,
}

/// A `maintenanceOperation` step: the operation asked for in a pool's next window.
#[derive(Debug, Clone)]
pub struct MaintenanceOperation {
    /// The pool whose annotation is set (one of `pools`); `None` in the short form.
    pub pool: Option<Located<String>>,
    /// The operation, where it was written.
    pub operation: Located<String>,
}

/// The long form of `scale`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScaleLong {
    /// The pool to scale (one of `pools`); required when the scenario has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<Located<String>>,
    /// The pool's new node count.
    nodes: Located<u32>,
}

/// The long form of `maintenanceOperation`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MaintenanceOperationLong {
    /// The pool whose annotation is set (one of `pools`); required when the scenario has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<Located<String>>,
    /// The operation: `rotate-credentials-start`, `rotate-ca-start`,
    /// `rotate-serviceaccount-key-start` or `force-in-place-update`.
    operation: Located<String>,
}

/// What was written after `scale:`, before its position is known.
enum ScaleForm {
    Short(u32),
    Long(ScaleLong),
}

impl<'de> Deserialize<'de> for ScaleForm {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = ScaleForm;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a node count (`scale: 4`) or a pool and its node count (`scale: { pool: small, nodes: 4 }`)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScaleForm, E> {
                u32::try_from(v).map(ScaleForm::Short).map_err(|_| {
                    E::custom(format!(
                        "{v} nodes is too many: write a node count up to {}",
                        u32::MAX
                    ))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScaleForm, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ScaleForm, A::Error> {
                ScaleLong::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(ScaleForm::Long)
            }
        }
        deserializer.deserialize_any(Form)
    }
}

impl<'de> Deserialize<'de> for Scale {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let form = Located::<ScaleForm>::deserialize(deserializer)?;
        Ok(match form.value {
            ScaleForm::Short(nodes) => Self {
                pool: None,
                nodes: Located {
                    value: nodes,
                    at: form.at,
                },
            },
            ScaleForm::Long(long) => Self {
                pool: long.pool,
                nodes: long.nodes,
            },
        })
    }
}

impl Serialize for Scale {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.pool {
            None => self.nodes.serialize(serializer),
            Some(pool) => ScaleLong {
                pool: Some(pool.clone()),
                nodes: self.nodes.clone(),
            }
            .serialize(serializer),
        }
    }
}

impl JsonSchema for Scale {
    fn schema_name() -> Cow<'static, str> {
        "Scale".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let long = generator.subschema_for::<ScaleLong>();
        json_schema!({
            "description": "A node count (`scale: 4`), or a pool and its node count (`scale: { pool: small, nodes: 4 }`); the pool is required when the scenario has several.",
            "oneOf": [
                { "type": "integer", "format": "uint32", "minimum": 0 },
                long
            ]
        })
    }
}

/// What was written after `maintenanceOperation:`, before its position is known.
enum OperationForm {
    Short(String),
    Long(MaintenanceOperationLong),
}

impl<'de> Deserialize<'de> for OperationForm {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = OperationForm;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an operation (`maintenanceOperation: rotate-ca-start`) or a pool and its operation (`maintenanceOperation: { pool: small, operation: rotate-ca-start }`)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OperationForm, E> {
                Ok(OperationForm::Short(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OperationForm, A::Error> {
                MaintenanceOperationLong::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(OperationForm::Long)
            }
        }
        deserializer.deserialize_any(Form)
    }
}

impl<'de> Deserialize<'de> for MaintenanceOperation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let form = Located::<OperationForm>::deserialize(deserializer)?;
        Ok(match form.value {
            OperationForm::Short(operation) => Self {
                pool: None,
                operation: Located {
                    value: operation,
                    at: form.at,
                },
            },
            OperationForm::Long(long) => Self {
                pool: long.pool,
                operation: long.operation,
            },
        })
    }
}

impl Serialize for MaintenanceOperation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.pool {
            None => self.operation.serialize(serializer),
            Some(pool) => MaintenanceOperationLong {
                pool: Some(pool.clone()),
                operation: self.operation.clone(),
            }
            .serialize(serializer),
        }
    }
}

impl JsonSchema for MaintenanceOperation {
    fn schema_name() -> Cow<'static, str> {
        "MaintenanceOperation".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let long = generator.subschema_for::<MaintenanceOperationLong>();
        json_schema!({
            "description": "An operation (`maintenanceOperation: rotate-ca-start`), or a pool and its operation (`maintenanceOperation: { pool: small, operation: rotate-ca-start }`); the pool is required when the scenario has several.",
            "oneOf": [
                { "type": "string" },
                long
            ]
        })
    }
}
