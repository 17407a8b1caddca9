//! The user name and password of an IPMI user. Neither appears in `Debug` output, logs or errors.

use std::fmt;

use crate::codec::rakp::MAX_USERNAME_LEN;
use crate::crypto::UserKey;

/// The longest password RMCP+ allows.
pub const MAX_PASSWORD_LEN: usize = 20;

/// An IPMI user's credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: Vec<u8>,
    password: Vec<u8>,
}

/// Credentials that IPMI cannot carry (the message never repeats them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("user name is {len} bytes long; IPMI allows at most {MAX_USERNAME_LEN}")]
    UsernameTooLong { len: usize },
    #[error("password is {len} bytes long; IPMI v2.0 allows at most {MAX_PASSWORD_LEN}")]
    PasswordTooLong { len: usize },
}

impl Credentials {
    /// Credentials for `username` (at most 16 bytes) with `password` (at most 20 bytes).
    pub fn new(
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Self, CredentialsError> {
        let username = username.into().into_bytes();
        let password = password.into().into_bytes();
        if username.len() > MAX_USERNAME_LEN {
            return Err(CredentialsError::UsernameTooLong {
                len: username.len(),
            });
        }
        if password.len() > MAX_PASSWORD_LEN {
            return Err(CredentialsError::PasswordTooLong {
                len: password.len(),
            });
        }
        Ok(Self { username, password })
    }

    pub(crate) fn username(&self) -> &[u8] {
        &self.username
    }

    pub(crate) fn user_key(&self) -> UserKey {
        UserKey::from_password(&self.password)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials { username: <redacted>, password: <redacted> }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_and_errors_never_show_the_secret() {
        let credentials = Credentials::new("operator7", "hunter2-secret").unwrap();
        let debug = format!("{credentials:?}");
        assert!(
            !debug.contains("operator7") && !debug.contains("hunter2"),
            "{debug}"
        );
        let error = Credentials::new("u", "a-very-long-password-over-20")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("a-very-long"), "{error}");
        assert!(error.contains("at most 20"), "{error}");
        assert!(matches!(
            Credentials::new("x".repeat(17), ""),
            Err(CredentialsError::UsernameTooLong { len: 17 })
        ));
    }
}
