//! What a component run as its own program starts with: logs on stderr, and a kube client from
//! the kubeconfig file it was given, else from the usual places (`$KUBECONFIG`, `~/.kube/config`,
//! the in-cluster service account).

use std::path::{Path, PathBuf};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("failed to read kubeconfig {path}")]
    Read {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("failed to load kubeconfig {path}")]
    Load {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "failed to find a kubeconfig ($KUBECONFIG, ~/.kube/config or in-cluster); pass --kubeconfig"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("failed to build a Kubernetes client")]
    Client(#[source] kube::Error),
}

/// A client for the cluster of the kubeconfig at `path`, or of the inferred one.
pub async fn client(path: Option<&Path>) -> Result<kube::Client, KubeconfigError> {
    let config = match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                KubeconfigError::Read {
                    path: path.to_owned(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|source| KubeconfigError::Load {
                path: path.to_owned(),
                source,
            })?
        }
        None => kube::Config::infer()
            .await
            .map_err(KubeconfigError::Infer)?,
    };
    kube::Client::try_from(config).map_err(KubeconfigError::Client)
}

/// Logs to stderr, filtered by `RUST_LOG` (unset or invalid: `default_filter`, e.g. `info` for a
/// component, `warn` for the `rackproof` CLI). A second call changes nothing.
pub fn init_logs(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    // Colours only for a person at a terminal: a file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}
