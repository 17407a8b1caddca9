//! Values that remember where in which file they were written, so semantic errors (an unknown
//! node name, a version with no image) point at file:line:column like syntax errors do.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a value was written: the source (index into the loader's file list) and its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Position {
    /// serde-saphyr's source id: 1 is the scenario file, 2.. are `!include`d files in the order
    /// they were resolved. 0 means unknown (a value built in code).
    pub source: u32,
    /// 1-based line; 0 when unknown.
    pub line: u64,
    /// 1-based column; 0 when unknown.
    pub column: u64,
}

/// A value and the position it was written at. Equality and ordering ignore the position.
#[derive(Clone)]
pub struct Located<T> {
    pub value: T,
    pub at: Position,
}

impl<T> Located<T> {
    /// A value built in code (no position).
    pub fn new(value: T) -> Self {
        Self {
            value,
            at: Position::default(),
        }
    }
}

impl<T> Deref for Located<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: fmt::Display> fmt::Display for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Located<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: Eq> Eq for Located<T> {}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<T>::deserialize(deserializer)?;
        let at = Position {
            source: spanned.referenced.source_id(),
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
        };
        Ok(Self {
            value: spanned.value,
            at,
        })
    }
}

impl<T: Serialize> Serialize for Located<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

impl<T: JsonSchema> JsonSchema for Located<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}
