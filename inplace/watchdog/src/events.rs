//! Kubernetes Events stamped with the component's clock: the shared recorder from `inplace_api::events`.

pub(crate) use inplace_api::events::{Kind, Recorder};
