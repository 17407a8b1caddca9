//! Which version a maintenance moves a pool to (the reference's "Automatic Version Updates"),
//! decided from the catalog alone; nothing here reads a clock or the API.
//!
//! A version moves when the pool opted in and a higher version is on offer, or when the current
//! version is expired (forced, opted in or not). A target is never a preview, never expired,
//! always higher, and for in-place pools reachable in place:
//!
//! - **Machine images** stay within the image's `updateStrategy` (`patch`: same major.minor;
//!   `minor`: same major; `major`: any) and, in place, need `inPlaceUpdates.supported` with the
//!   current version at or above the target's `minVersionForUpdate`. The highest such version wins.
//! - **Kubernetes** (pools with their own version) moves to the newest patch of its minor; an
//!   expired version with no such patch is forced to the newest patch of the *next* minor only
//!   (in-place pools can't skip a minor), never above the control plane.
//!
//! A forced update with no target fails with the reason; an opted-in pool with nothing higher
//! simply stays.

use inplace_api::crd::{Classification, ImageCatalogSpec, ImageUpdateStrategy, is_expired};
use inplace_api::version::{ImageVersion, KubeVersion};
use jiff::Timestamp;

/// Why a version moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// The pool opted in and a higher version is on offer.
    AutoUpdate,
    /// The current version is expired.
    Expired,
}

/// What the maintenance does with one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing to do.
    Stay,
    /// Move to `to`.
    Move { to: String, why: Why },
    /// The version must move (expired) but no version is in reach: `failure` says why.
    Unreachable { failure: String },
}

/// The machine image decision for a pool on image `name` version `current`.
pub(crate) fn machine_image(
    catalog: &ImageCatalogSpec,
    name: &str,
    current: &ImageVersion,
    opted_in: bool,
    in_place: bool,
    now: Timestamp,
) -> (Decision, ImageUpdateStrategy) {
    let image = catalog.machine_images.iter().find(|i| i.name == name);
    let strategy = image.map_or(ImageUpdateStrategy::Major, |i| i.update_strategy());
    let expired = catalog
        .image_version(name, current)
        .is_some_and(|e| is_expired(e.expiration_date.as_ref(), now));
    if !opted_in && !expired {
        return (Decision::Stay, strategy);
    }
    let mut best: Option<ImageVersion> = None;
    let mut excluded = Vec::new();
    for entry in image.map(|i| i.versions.as_slice()).unwrap_or_default() {
        let Ok(version) = ImageVersion::parse(&entry.version) else {
            continue;
        };
        if version <= *current {
            continue;
        }
        let same = |parts: usize| (0..parts).all(|i| version.part(i) == current.part(i));
        let why_not = if entry.classification() == Classification::Preview {
            Some("a preview".to_owned())
        } else if is_expired(entry.expiration_date.as_ref(), now) {
            Some("expired".to_owned())
        } else if strategy == ImageUpdateStrategy::Patch && !same(2) {
            Some("outside updateStrategy patch".to_owned())
        } else if strategy == ImageUpdateStrategy::Minor && !same(1) {
            Some("outside updateStrategy minor".to_owned())
        } else if in_place {
            in_place_blocker(entry.in_place_updates.as_ref(), current)
        } else {
            None
        };
        match why_not {
            Some(why) => excluded.push(format!("{} is {why}", entry.version)),
            None if best.as_ref().is_none_or(|b| version > *b) => best = Some(version),
            None => {}
        }
    }
    let decision = match (best, expired) {
        (Some(to), expired) => Decision::Move {
            to: to.as_str().to_owned(),
            why: if expired {
                Why::Expired
            } else {
                Why::AutoUpdate
            },
        },
        (None, false) => Decision::Stay,
        (None, true) => {
            let mut failure = format!(
                "either the machine image '{name}' is reaching end of life and migration to another machine image is required or there is a misconfiguration in the image catalog"
            );
            if !excluded.is_empty() {
                failure.push_str(&format!(" (higher versions: {})", excluded.join(", ")));
            }
            Decision::Unreachable { failure }
        }
    };
    (decision, strategy)
}

/// Why an in-place update from `current` can't reach a version, if it can't.
fn in_place_blocker(
    support: Option<&inplace_api::crd::InPlaceUpdateSupport>,
    current: &ImageVersion,
) -> Option<String> {
    let Some(support) = support.filter(|s| s.supported) else {
        return Some("without in-place update support".to_owned());
    };
    let Some(min) = support.min_version_for_update.as_deref() else {
        return Some("without minVersionForUpdate".to_owned());
    };
    match ImageVersion::parse(min) {
        Ok(min) if *current >= min => None,
        Ok(min) => Some(format!(
            "reachable in place only from {} (minVersionForUpdate)",
            min.as_str()
        )),
        Err(_) => Some(format!("with an unreadable minVersionForUpdate {min:?}")),
    }
}

/// The Kubernetes decision for a pool on its own version `current`.
pub(crate) fn kubernetes(
    catalog: &ImageCatalogSpec,
    current: KubeVersion,
    control_plane: KubeVersion,
    opted_in: bool,
    now: Timestamp,
) -> Decision {
    let expired = catalog
        .kubernetes_version(&current)
        .is_some_and(|e| is_expired(e.expiration_date.as_ref(), now));
    if !opted_in && !expired {
        return Decision::Stay;
    }
    let offered: Vec<KubeVersion> = catalog
        .kubernetes
        .versions
        .iter()
        .filter(|e| e.classification() != Classification::Preview)
        .filter(|e| !is_expired(e.expiration_date.as_ref(), now))
        .filter_map(|e| KubeVersion::parse(&e.version).ok())
        .filter(|v| *v > current && *v <= control_plane)
        .collect();
    let newest_of = |major: u64, minor: u64| {
        offered
            .iter()
            .filter(|v| v.major == major && v.minor == minor)
            .max()
            .copied()
    };
    let why = if expired {
        Why::Expired
    } else {
        Why::AutoUpdate
    };
    if let Some(to) = newest_of(current.major, current.minor) {
        return Decision::Move {
            to: to.to_string(),
            why,
        };
    }
    if !expired {
        return Decision::Stay;
    }
    match newest_of(current.major, current.minor + 1) {
        Some(to) => Decision::Move {
            to: to.to_string(),
            why,
        },
        None => Decision::Unreachable {
            failure: format!(
                "Kubernetes version {current} is expired and no supported, unexpired version {}.{}.x or {}.{}.x at or below the control plane's {control_plane} is in the image catalog",
                current.major,
                current.minor,
                current.major,
                current.minor + 1
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-03-01T00:00:00Z";

    fn catalog(json: &str) -> ImageCatalogSpec {
        serde_json::from_str(json).expect("catalog fixture")
    }

    fn images(strategy: &str) -> ImageCatalogSpec {
        catalog(&format!(
            r#"{{ "machineImages": [{{ "name": "gl", "updateStrategy": "{strategy}", "versions": [
                {{ "version": "1630.0.0", "expirationDate": "2026-02-01T00:00:00Z",
                   "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1600.0.0" }} }},
                {{ "version": "1630.0.1", "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1630.0.0" }} }},
                {{ "version": "1630.1.0", "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1630.0.0" }} }},
                {{ "version": "1631.0.0", "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1630.0.0" }} }},
                {{ "version": "1700.0.0", "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1631.0.0" }} }},
                {{ "version": "1800.0.0", "classification": "preview",
                   "inPlaceUpdates": {{ "supported": true, "minVersionForUpdate": "1600.0.0" }} }}
            ] }}] }}"#
        ))
    }

    fn image(strategy: &str, current: &str, opted_in: bool) -> Decision {
        let v = ImageVersion::parse(current).unwrap();
        machine_image(
            &images(strategy),
            "gl",
            &v,
            opted_in,
            true,
            NOW.parse().unwrap(),
        )
        .0
    }

    fn moved(to: &str, why: Why) -> Decision {
        Decision::Move {
            to: to.to_owned(),
            why,
        }
    }

    #[test]
    fn image_update_strategy_bounds_the_target() {
        // 1700 needs 1631 in place; 1800 is a preview.
        assert_eq!(
            image("major", "1630.1.0", true),
            moved("1631.0.0", Why::AutoUpdate)
        );
        assert_eq!(
            image("major", "1631.0.0", true),
            moved("1700.0.0", Why::AutoUpdate)
        );
        assert_eq!(image("minor", "1631.0.0", true), Decision::Stay);
        assert_eq!(
            image("minor", "1630.0.1", true),
            moved("1630.1.0", Why::AutoUpdate)
        );
        // Image versions are major.minor.patch: a patch update keeps 1630.0.
        assert_eq!(
            image("patch", "1630.0.0", true),
            moved("1630.0.1", Why::Expired)
        );
    }

    #[test]
    fn image_moves_only_when_opted_in_or_expired() {
        assert_eq!(image("major", "1630.1.0", false), Decision::Stay);
        assert_eq!(
            image("minor", "1630.0.0", false),
            moved("1630.1.0", Why::Expired)
        );
    }

    #[test]
    fn expired_image_without_target_is_unreachable_with_reasons() {
        let catalog = catalog(
            r#"{ "machineImages": [{ "name": "gl", "updateStrategy": "patch", "versions": [
                { "version": "1630.0.0", "expirationDate": "2026-02-01T00:00:00Z",
                  "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1600.0.0" } },
                { "version": "1631.0.0", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1630.0.0" } }
            ] }] }"#,
        );
        let v = ImageVersion::parse("1630.0.0").unwrap();
        let (decision, _) = machine_image(&catalog, "gl", &v, false, true, NOW.parse().unwrap());
        let Decision::Unreachable { failure } = decision else {
            panic!("expected unreachable, got {decision:?}");
        };
        assert_eq!(
            failure,
            "either the machine image 'gl' is reaching end of life and migration to another machine image is required or there is a misconfiguration in the image catalog (higher versions: 1631.0.0 is outside updateStrategy patch)"
        );
    }

    fn kube_catalog() -> ImageCatalogSpec {
        catalog(
            r#"{ "kubernetes": { "versions": [
                { "version": "1.29.0", "expirationDate": "2026-02-01T00:00:00Z" },
                { "version": "1.29.4" , "expirationDate": "2026-02-01T00:00:00Z" },
                { "version": "1.30.1" },
                { "version": "1.30.5" },
                { "version": "1.30.6", "classification": "preview" },
                { "version": "1.31.1" },
                { "version": "1.32.0" }
            ] } }"#,
        )
    }

    fn kube(current: &str, control_plane: &str, opted_in: bool) -> Decision {
        let v = |s: &str| KubeVersion::parse(s).unwrap();
        kubernetes(
            &kube_catalog(),
            v(current),
            v(control_plane),
            opted_in,
            NOW.parse().unwrap(),
        )
    }

    #[test]
    fn kubernetes_auto_update_stays_within_the_minor() {
        assert_eq!(
            kube("1.30.1", "1.32.0", true),
            moved("1.30.5", Why::AutoUpdate)
        );
        assert_eq!(kube("1.30.5", "1.32.0", true), Decision::Stay);
        assert_eq!(kube("1.30.1", "1.32.0", false), Decision::Stay);
    }

    #[test]
    fn expired_kubernetes_is_forced_one_minor_only() {
        // Every 1.29 patch is expired: the next minor's newest, not 1.31 or 1.32.
        assert_eq!(
            kube("1.29.0", "1.32.0", false),
            moved("1.30.5", Why::Expired)
        );
    }

    #[test]
    fn forced_kubernetes_never_passes_the_control_plane() {
        let Decision::Unreachable { failure } = kube("1.29.0", "1.29.4", false) else {
            panic!("expected unreachable");
        };
        assert!(failure.contains("control plane's 1.29.4"), "{failure}");
    }
}
