//! BMC credentials resolved from a [`CredentialsRef`]: two environment variables, or a file with
//! the user name on its first line and the password on its second. Errors name the variable or
//! the file, never a value; `Debug` shows the user name only.

use std::fmt;
use std::path::PathBuf;

use crate::env::Env;
use crate::resource::CredentialsRef;

/// A BMC account, resolved. The password is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct BmcCredentials {
    username: String,
    password: String,
}

impl BmcCredentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    pub(crate) fn password(&self) -> &str {
        &self.password
    }

    /// The file form: user name, newline, password, newline.
    pub(crate) fn file_text(&self) -> String {
        format!("{}\n{}\n", self.username, self.password)
    }
}

impl fmt::Debug for BmcCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BmcCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Credentials that could not be resolved. Never carries a value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("environment variable {var} (the BMC {what}) is not set")]
    EnvMissing { var: String, what: &'static str },
    #[error("environment variable {var} (the BMC {what}) is empty")]
    EnvEmpty { var: String, what: &'static str },
    #[error("environment variable {var} (the BMC {what}) is not valid UTF-8")]
    EnvNotUnicode { var: String, what: &'static str },
    #[error("cannot read BMC credentials file {}", path.display())]
    FileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("BMC credentials file {}: {problem}", path.display())]
    FileFormat {
        path: PathBuf,
        problem: &'static str,
    },
}

/// Resolves `reference` in `env` (variables) or on disk (files).
pub fn resolve_credentials(
    reference: &CredentialsRef,
    env: &Env,
) -> Result<BmcCredentials, CredentialsError> {
    match reference {
        CredentialsRef::Env {
            username_var,
            password_var,
        } => Ok(BmcCredentials::new(
            env_value(env, username_var, "user name")?,
            env_value(env, password_var, "password")?,
        )),
        CredentialsRef::File { path } => {
            let bytes = std::fs::read(path).map_err(|source| CredentialsError::FileRead {
                path: path.clone(),
                source,
            })?;
            warn_if_readable_by_others(path);
            let format = |problem| CredentialsError::FileFormat {
                path: path.clone(),
                problem,
            };
            let text = String::from_utf8(bytes).map_err(|_| format("is not valid UTF-8"))?;
            let mut lines = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
            let username = lines.next().unwrap_or_default();
            let Some(password) = lines.next() else {
                return Err(format(
                    "must have two lines, the user name and then the password",
                ));
            };
            if lines.any(|l| !l.trim().is_empty()) {
                return Err(format(
                    "has more than two lines; it must hold the user name and then the password",
                ));
            }
            if username.is_empty() {
                return Err(format("its first line (the user name) is empty"));
            }
            if password.is_empty() {
                return Err(format("its second line (the password) is empty"));
            }
            Ok(BmcCredentials::new(username, password))
        }
    }
}

fn env_value(env: &Env, var: &str, what: &'static str) -> Result<String, CredentialsError> {
    let value = env
        .var_os(var)
        .ok_or_else(|| CredentialsError::EnvMissing {
            var: var.to_owned(),
            what,
        })?;
    if value.is_empty() {
        return Err(CredentialsError::EnvEmpty {
            var: var.to_owned(),
            what,
        });
    }
    value
        .into_string()
        .map_err(|_| CredentialsError::EnvNotUnicode {
            var: var.to_owned(),
            what,
        })
}

fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "BMC credentials file is readable by group or others; chmod 600 it"
        );
    }
}
