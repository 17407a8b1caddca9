//! Scaling the dependents (Deployments) down to zero and back, remembering replicas in an
//! annotation, as dependency-watchdog's scaler does.
//!
//! 1. Scale down, in the configured order: a Deployment with `replicas > 0` gets
//!    [`ANNOTATION_REPLICAS`] = its replicas, [`ANNOTATION_MELTDOWN_PROTECTION`], and
//!    `replicas: 0` in ONE update (so a crash never loses the count). Already at zero: untouched.
//! 2. Scale up, in the reverse order: a Deployment that carries [`ANNOTATION_REPLICAS`] and is at
//!    zero gets the remembered replicas back and loses both annotations in one update. One that
//!    someone else scaled up meanwhile only loses the annotations. One without the annotation is
//!    left alone (DWD would scale it to 1; we restore only what we scaled down).
//! 3. [`ANNOTATION_IGNORE_SCALING`] = `true` on a Deployment exempts it.
//! 4. Updates carry the `resourceVersion` read; a 409 re-reads and tries again.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;
use kube::{Api, ResourceExt};

use crate::error::{Error, is_conflict, is_not_found};

/// Deployment annotation holding the replicas before the scale-down.
pub const ANNOTATION_REPLICAS: &str = "dependency-watchdog.gardener.cloud/replicas";
/// Deployment annotation present while the watchdog holds it at zero.
pub const ANNOTATION_MELTDOWN_PROTECTION: &str =
    "dependency-watchdog.gardener.cloud/meltdown-protection-active";
/// Deployment annotation that exempts it from scaling.
pub const ANNOTATION_IGNORE_SCALING: &str = "dependency-watchdog.gardener.cloud/ignore-scaling";

/// What scaling one dependent did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Scaled from `from` to `to` replicas.
    Scaled {
        from: i32,
        to: i32,
    },
    /// Only the annotations were removed (someone else restored it).
    Released,
    Unchanged,
    Missing,
    Ignored,
}

const ATTEMPTS: usize = 5;

pub(crate) async fn scale_down(api: &Api<Deployment>, name: &str) -> Result<Outcome, Error> {
    for _ in 0..ATTEMPTS {
        let mut deployment = match api.get(name).await {
            Ok(d) => d,
            Err(e) if is_not_found(&e) => return Ok(Outcome::Missing),
            Err(source) => {
                return Err(Error::Dependent {
                    name: name.to_owned(),
                    source,
                });
            }
        };
        if ignored(&deployment) {
            return Ok(Outcome::Ignored);
        }
        let replicas = deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        if replicas == 0 {
            return Ok(Outcome::Unchanged);
        }
        let annotations = deployment.annotations_mut();
        annotations.insert(ANNOTATION_REPLICAS.to_owned(), replicas.to_string());
        annotations.insert(ANNOTATION_MELTDOWN_PROTECTION.to_owned(), String::new());
        deployment
            .spec
            .get_or_insert_with(Default::default)
            .replicas = Some(0);
        match api.replace(name, &PostParams::default(), &deployment).await {
            Ok(_) => {
                return Ok(Outcome::Scaled {
                    from: replicas,
                    to: 0,
                });
            }
            Err(e) if is_conflict(&e) => continue,
            Err(source) => {
                return Err(Error::Dependent {
                    name: name.to_owned(),
                    source,
                });
            }
        }
    }
    Err(Error::Contended {
        name: name.to_owned(),
    })
}

pub(crate) async fn scale_up(api: &Api<Deployment>, name: &str) -> Result<Outcome, Error> {
    for _ in 0..ATTEMPTS {
        let mut deployment = match api.get(name).await {
            Ok(d) => d,
            Err(e) if is_not_found(&e) => return Ok(Outcome::Missing),
            Err(source) => {
                return Err(Error::Dependent {
                    name: name.to_owned(),
                    source,
                });
            }
        };
        if ignored(&deployment) {
            return Ok(Outcome::Ignored);
        }
        let Some(remembered) = deployment.annotations().get(ANNOTATION_REPLICAS).cloned() else {
            return Ok(Outcome::Unchanged);
        };
        let replicas = deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        let annotations = deployment.annotations_mut();
        annotations.remove(ANNOTATION_REPLICAS);
        annotations.remove(ANNOTATION_MELTDOWN_PROTECTION);
        let outcome = if replicas == 0 {
            let target: i32 = remembered
                .trim()
                .parse()
                .map_err(|_| Error::BadAnnotation {
                    name: name.to_owned(),
                    value: remembered.clone(),
                })?;
            deployment
                .spec
                .get_or_insert_with(Default::default)
                .replicas = Some(target);
            Outcome::Scaled {
                from: 0,
                to: target,
            }
        } else {
            Outcome::Released
        };
        match api.replace(name, &PostParams::default(), &deployment).await {
            Ok(_) => return Ok(outcome),
            Err(e) if is_conflict(&e) => continue,
            Err(source) => {
                return Err(Error::Dependent {
                    name: name.to_owned(),
                    source,
                });
            }
        }
    }
    Err(Error::Contended {
        name: name.to_owned(),
    })
}

fn ignored(deployment: &Deployment) -> bool {
    deployment
        .annotations()
        .get(ANNOTATION_IGNORE_SCALING)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}
