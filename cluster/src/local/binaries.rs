//! Where the etcd, kube-apiserver and kube-controller-manager binaries come from.
//!
//! kube-apiserver: an explicit path in the options, else `RACKPROOF_KUBE_APISERVER`, else the
//! binary `ci/build-kube-apiserver` printed last:
//! `${RACKPROOF_CACHE:-$HOME/.cache/rackproof}/kube-apiserver/latest/kube-apiserver`.
//! kube-controller-manager likewise: an explicit path, else `RACKPROOF_KUBE_CONTROLLER_MANAGER`,
//! else `…/kube-apiserver/latest/kube-controller-manager` (the same build, next to kube-apiserver).
//! etcd: an explicit path, else `RACKPROOF_ETCD`, else `etcd` on `PATH` (Debian's `etcd-server`).
//! A missing binary is an error naming `ci/install-local-control-plane`; nothing is skipped.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Error;

/// Reads an environment variable; tests pass their own.
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process environment.
pub(crate) fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// A binary built by `ci/build-kube-apiserver`, and where to look for it.
struct Built {
    program: &'static str,
    option: &'static str,
    variable: &'static str,
    /// The error for a path without an executable: the path, and which setting named it.
    not_found: fn(PathBuf, String) -> Error,
}

/// Finds kube-apiserver.
pub(crate) fn kube_apiserver(explicit: Option<&Path>, env: Env<'_>) -> Result<PathBuf, Error> {
    let built = Built {
        program: "kube-apiserver",
        option: "LocalOptions::kube_apiserver",
        variable: "RACKPROOF_KUBE_APISERVER",
        not_found: |path, from| Error::KubeApiserverNotFound { path, from },
    };
    find_built(&built, explicit, env)
}

/// Finds kube-controller-manager.
pub(crate) fn kube_controller_manager(
    explicit: Option<&Path>,
    env: Env<'_>,
) -> Result<PathBuf, Error> {
    let built = Built {
        program: "kube-controller-manager",
        option: "ControllerManagerOptions::binary",
        variable: "RACKPROOF_KUBE_CONTROLLER_MANAGER",
        not_found: |path, from| Error::KubeControllerManagerNotFound { path, from },
    };
    find_built(&built, explicit, env)
}

fn find_built(built: &Built, explicit: Option<&Path>, env: Env<'_>) -> Result<PathBuf, Error> {
    let (path, from) = if let Some(path) = explicit {
        (path.to_owned(), built.option.to_owned())
    } else if let Some(path) = env(built.variable) {
        (PathBuf::from(path), format!("from {}", built.variable))
    } else {
        let root = match (env("RACKPROOF_CACHE"), env("HOME")) {
            (Some(cache), _) => PathBuf::from(cache),
            (None, Some(home)) => Path::new(&home).join(".cache/rackproof"),
            (None, None) => {
                return Err(Error::NoCacheDir {
                    program: built.program,
                    variable: built.variable,
                });
            }
        };
        (
            root.join("kube-apiserver/latest").join(built.program),
            "the cache of ci/build-kube-apiserver".to_owned(),
        )
    };
    if is_executable(&path) {
        Ok(path)
    } else {
        Err((built.not_found)(path, from))
    }
}

/// Finds etcd.
pub(crate) fn etcd(explicit: Option<&Path>, env: Env<'_>) -> Result<PathBuf, Error> {
    if let Some(path) = explicit {
        return checked_etcd(path.to_owned(), "LocalOptions::etcd");
    }
    if let Some(path) = env("RACKPROOF_ETCD") {
        return checked_etcd(PathBuf::from(path), "from RACKPROOF_ETCD");
    }
    let search = env("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&search)
        .map(|dir| dir.join("etcd"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| Error::EtcdNotFound {
            looked: format!("no `etcd` on PATH {}", search.to_string_lossy()),
        })
}

fn checked_etcd(path: PathBuf, from: &str) -> Result<PathBuf, Error> {
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(Error::EtcdNotFound {
            looked: format!("{} {from} is not an executable file", path.display()),
        })
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.as_os_str().to_owned()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "rackproof-binaries-{name}-{}",
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn kube_apiserver_comes_from_the_cache_symlink_under_rackproof_cache() {
        let dir = scratch("cache");
        let binary = dir.join("kube-apiserver/latest/kube-apiserver");
        executable(&binary);
        let env = env_of(&[
            ("RACKPROOF_CACHE", &dir),
            ("HOME", Path::new("/nonexistent")),
        ]);
        assert_eq!(kube_apiserver(None, &env).unwrap(), binary);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn kube_apiserver_env_var_wins_over_the_cache() {
        let dir = scratch("env");
        let binary = dir.join("custom");
        executable(&binary);
        let env = env_of(&[
            ("RACKPROOF_KUBE_APISERVER", &binary),
            ("RACKPROOF_CACHE", Path::new("/nonexistent")),
        ]);
        assert_eq!(kube_apiserver(None, &env).unwrap(), binary);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_kube_apiserver_names_the_install_command_and_the_path() {
        let env = env_of(&[("HOME", Path::new("/nonexistent-home"))]);
        let message = kube_apiserver(None, &env).unwrap_err().to_string();
        assert!(
            message.contains("ci/install-local-control-plane"),
            "{message}"
        );
        assert!(
            message.contains(
                "/nonexistent-home/.cache/rackproof/kube-apiserver/latest/kube-apiserver"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_non_executable_file_is_not_a_kube_apiserver() {
        let dir = scratch("noexec");
        let binary = dir.join("kube-apiserver");
        std::fs::write(&binary, "data").unwrap();
        let env = env_of(&[]);
        let err = kube_apiserver(Some(&binary), &env).unwrap_err();
        assert!(matches!(err, Error::KubeApiserverNotFound { .. }), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn no_home_and_no_cache_is_an_error_not_a_panic() {
        let env = env_of(&[]);
        let message = kube_apiserver(None, &env).unwrap_err().to_string();
        assert!(
            message.contains("ci/install-local-control-plane"),
            "{message}"
        );
    }

    #[test]
    fn kube_controller_manager_sits_next_to_kube_apiserver_in_the_cache() {
        let dir = scratch("kcm-cache");
        let binary = dir.join("kube-apiserver/latest/kube-controller-manager");
        executable(&binary);
        let env = env_of(&[("RACKPROOF_CACHE", &dir)]);
        assert_eq!(kube_controller_manager(None, &env).unwrap(), binary);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn kube_controller_manager_env_var_wins_over_the_cache() {
        let dir = scratch("kcm-env");
        let binary = dir.join("custom-kcm");
        executable(&binary);
        let env = env_of(&[
            ("RACKPROOF_KUBE_CONTROLLER_MANAGER", &binary),
            ("RACKPROOF_CACHE", Path::new("/nonexistent")),
        ]);
        assert_eq!(kube_controller_manager(None, &env).unwrap(), binary);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_kube_controller_manager_names_the_install_command_and_the_path() {
        let dir = scratch("kcm-missing");
        // A cache with kube-apiserver only, as builds before kube-controller-manager left it.
        executable(&dir.join("kube-apiserver/latest/kube-apiserver"));
        let env = env_of(&[("RACKPROOF_CACHE", &dir)]);
        let error = kube_controller_manager(None, &env).unwrap_err();
        assert!(
            matches!(error, Error::KubeControllerManagerNotFound { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("ci/install-local-control-plane"),
            "{message}"
        );
        assert!(
            message.contains("kube-apiserver/latest/kube-controller-manager"),
            "{message}"
        );
        let no_cache = kube_controller_manager(None, &env_of(&[])).unwrap_err();
        assert!(
            no_cache
                .to_string()
                .contains("RACKPROOF_KUBE_CONTROLLER_MANAGER"),
            "{no_cache}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn etcd_is_searched_on_path() {
        let dir = scratch("path");
        executable(&dir.join("b/etcd"));
        let search = std::env::join_paths([dir.join("a"), dir.join("b")]).unwrap();
        let env = env_of(&[("PATH", Path::new(&search))]);
        assert_eq!(etcd(None, &env).unwrap(), dir.join("b/etcd"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_etcd_names_the_install_command() {
        let env = env_of(&[("PATH", Path::new("/nonexistent"))]);
        let message = etcd(None, &env).unwrap_err().to_string();
        assert!(
            message.contains("ci/install-local-control-plane"),
            "{message}"
        );
        assert!(message.contains("etcd-server"), "{message}");
    }
}
