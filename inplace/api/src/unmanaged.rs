//! Objects decoded without their `metadata.managedFields`, for watches and caches that never read
//! them.
//!
//! Every write to an object changes its managedFields, and every watcher of its kind gets them
//! again: a list of entries, each with a `fieldsV1` tree that k8s-openapi keeps as a
//! `serde_json::Value` (a map per level). In a 1,000-node simulated rollout decoding and dropping
//! those trees was 7% of all the work, for controllers and observers that read labels,
//! conditions and phases. [`Unmanaged<K>`] decodes exactly as `K` does and skips that one member
//! unread; everything else, unknown members included, is as `K` would have it.
//!
//! Writing back an object decoded this way is safe: an update or status update without
//! managedFields keeps the stored ones (as kube-apiserver does when the request carries none).
//!
//! [`watcher`] is the way in: kube's watcher over [`Unmanaged<K>`], yielding `K`.

use std::borrow::Cow;
use std::fmt;

use std::fmt::Debug;

use futures::{Stream, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::runtime::watcher::{self as kube_watcher, Event};
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor,
};

/// kube's [`kube::runtime::watcher()`] over `api`, its objects decoded without managedFields.
pub fn watcher<K>(
    api: Api<Unmanaged<K>>,
    config: kube_watcher::Config,
) -> impl Stream<Item = Result<Event<K>, kube_watcher::Error>> + Send + 'static
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    kube_watcher::watcher(api, config).map_ok(|event| match event {
        Event::Apply(Unmanaged(object)) => Event::Apply(object),
        Event::Delete(Unmanaged(object)) => Event::Delete(object),
        Event::Init => Event::Init,
        Event::InitApply(Unmanaged(object)) => Event::InitApply(object),
        Event::InitDone => Event::InitDone,
    })
}

/// An object's `metadata` decoded without `managedFields`, for a narrow type's
/// `#[serde(deserialize_with = "inplace_api::unmanaged::metadata")] metadata: ObjectMeta`: the
/// identity and resourceVersion a watch needs and every other member but the one that is most of
/// the metadata's bytes.
pub fn metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    <ObjectMeta as de::Deserialize>::deserialize(Skipping {
        inner: deserializer,
        level: Level::Metadata,
    })
}

/// A `K` decoded without `metadata.managedFields` (left empty). A [`kube::Resource`] as `K` is,
/// so `Api<Unmanaged<Node>>` lists and watches Nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmanaged<K>(pub K);

impl<'de, K: de::Deserialize<'de>> de::Deserialize<'de> for Unmanaged<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Skipping {
            inner: deserializer,
            level: Level::Object,
        })
        .map(Unmanaged)
    }
}

impl<K: kube::Resource> kube::Resource for Unmanaged<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// Which map is being decoded: the object's (look for `metadata`) or its metadata's (skip
/// `managedFields`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Level {
    Object,
    Metadata,
}

/// A deserializer that hands `K`'s visitor the maps of `inner` through [`SkippingMap`].
struct Skipping<D> {
    inner: D,
    level: Level,
}

macro_rules! forward {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Skipping<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(Maps {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(Maps {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            Maps {
                inner: visitor,
                level: self.level,
            },
        )
    }

    /// k8s-openapi decodes `metadata` as an `Option<ObjectMeta>`.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(Maps {
            inner: visitor,
            level: self.level,
        })
    }

    forward!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_seq,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(name, variants, visitor)
    }
}

/// `K`'s visitor, given its maps through [`SkippingMap`] (and an optional value through
/// [`Skipping`]); anything else is not an object and gets `K`'s own "invalid type" error.
struct Maps<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Maps<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(SkippingMap {
            inner: map,
            level: self.level,
            metadata_next: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Skipping {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
}

/// A map whose `managedFields` member (in metadata) is skipped and whose `metadata` member (in
/// an object) is decoded through [`Skipping`].
struct SkippingMap<A> {
    inner: A,
    level: Level,
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkippingMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(Key(key)) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            if self.level == Level::Metadata && key == "managedFields" {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.metadata_next = self.level == Level::Object && key == "metadata";
            return match key {
                Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A member name, borrowed from the input when it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }

            fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Decodes the `metadata` member through [`Skipping`] at the metadata level.
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Skipping {
            inner: deserializer,
            level: Level::Metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use kube::core::{ObjectList, WatchEvent};
    use serde_json::json;

    use super::*;
    use crate::crd::Machine;

    fn node_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "n1", "resourceVersion": "7", "labels": {"a": "b"},
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {"f:conditions": {}}}}],
                "annotations": {"c": "d\u{e9}"},
            },
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        })
    }

    /// Everything but managedFields decodes as the full type decodes it, from text (borrowed
    /// and escaped member names) as from a value.
    #[test]
    fn decodes_as_the_type_does_without_managed_fields() {
        let mut expected: Node = serde_json::from_value(node_json()).unwrap();
        assert!(expected.metadata.managed_fields.is_some());
        expected.metadata.managed_fields = None;
        let text = node_json()
            .to_string()
            .replace("\"labels\"", "\"lab\\u0065ls\"");
        let from_text: Unmanaged<Node> = serde_json::from_str(&text).unwrap();
        assert_eq!(from_text.0, expected);
        let from_value: Unmanaged<Node> = serde_json::from_value(node_json()).unwrap();
        assert_eq!(from_value.0, expected);
    }

    /// Lists and watch events (where the object may come before its type) carry it too, and a
    /// custom resource decodes the same way.
    #[test]
    fn lists_watch_events_and_custom_resources() {
        let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "9"}, "items": [node_json()]});
        let list: ObjectList<Unmanaged<Node>> = serde_json::from_value(list).unwrap();
        assert_eq!(list.items[0].0.metadata.managed_fields, None);
        assert_eq!(list.items[0].0.metadata.name.as_deref(), Some("n1"));
        let event = format!("{{\"object\": {}, \"type\": \"MODIFIED\"}}", node_json());
        let WatchEvent::Modified(node) =
            serde_json::from_str::<WatchEvent<Unmanaged<Node>>>(&event).unwrap()
        else {
            panic!("a MODIFIED event")
        };
        assert_eq!(
            (
                node.0.metadata.managed_fields,
                node.0.metadata.labels.map(|l| l.len())
            ),
            (None, Some(1))
        );
        let machine = json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "m1", "namespace": "ns", "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"providerID": "sim://m1"},
        });
        let Unmanaged(machine) = serde_json::from_value::<Unmanaged<Machine>>(machine).unwrap();
        assert_eq!(
            (
                machine.metadata.managed_fields,
                machine.spec.provider_id.as_deref()
            ),
            (None, Some("sim://m1"))
        );
    }

    /// A narrow type's metadata decodes as `ObjectMeta` does, without managedFields.
    #[test]
    fn metadata_alone_decodes_without_managed_fields() {
        #[derive(serde::Deserialize)]
        struct Narrow {
            #[serde(deserialize_with = "metadata")]
            metadata: ObjectMeta,
        }
        let mut expected: Node = serde_json::from_value(node_json()).unwrap();
        expected.metadata.managed_fields = None;
        let narrow: Narrow = serde_json::from_str(&node_json().to_string()).unwrap();
        assert_eq!(narrow.metadata, expected.metadata);
    }

    /// A malformed object fails as the full type fails.
    #[test]
    fn errors_are_the_types_own() {
        let bad = json!({"metadata": {"name": 5}});
        let full = serde_json::from_value::<Node>(bad.clone())
            .unwrap_err()
            .to_string();
        let skipping = serde_json::from_value::<Unmanaged<Node>>(bad)
            .unwrap_err()
            .to_string();
        assert_eq!(skipping, full);
        assert!(serde_json::from_str::<Unmanaged<Node>>("[1]").is_err());
    }
}
