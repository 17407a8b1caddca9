//! Host-key pinning: the decision for the key a server presents, and the russh handler that makes it.
//!
//! 1. A pinned key (`host_key`) that matches: accepted.
//! 2. A pinned key that does not match: refused, whatever `accept_unknown_host_key` says; the error
//!    shows both fingerprints.
//! 3. No pin and `accept_unknown_host_key: false` (the default): refused; the error shows the
//!    presented fingerprint and the session never authenticates.
//! 4. No pin and `accept_unknown_host_key: true`: accepted, and reported as
//!    [`HostKeyTrust::AcceptedUnknown`] with the key so the caller can pin it. Reconnections of
//!    the same session pin the key seen first.
//!
//! Certificates are refused: lab nodes present plain host keys.

use std::sync::{Arc, Mutex};

use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};

use crate::target::HostKeyPin;

/// How the server's host key came to be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyTrust {
    /// It matched the pinned key.
    Pinned,
    /// Nothing was pinned and the target accepts unknown keys.
    AcceptedUnknown,
}

/// The host key a connected server presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenHostKey {
    /// The key itself.
    pub key: PublicKey,
    /// How it was trusted.
    pub trust: HostKeyTrust,
}

impl SeenHostKey {
    /// SHA-256 fingerprint, as `ssh-keygen -l` prints it.
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint(HashAlg::Sha256).to_string()
    }

    /// The key as an OpenSSH public-key line, ready for `host_key`.
    pub fn openssh_line(&self) -> String {
        openssh_line(&self.key)
    }

    /// A pin for this key, to store in the target.
    pub fn pin(&self) -> HostKeyPin {
        HostKeyPin::Key(self.key.clone())
    }
}

pub(crate) fn openssh_line(key: &PublicKey) -> String {
    let mut key = key.clone();
    key.set_comment("");
    key.to_openssh()
        .unwrap_or_else(|_| key.fingerprint(HashAlg::Sha256).to_string())
}

/// What the handler decided about the presented key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Trusted(SeenHostKey),
    Mismatch {
        expected: String,
        presented: String,
    },
    Unknown {
        presented: String,
        public_key: String,
    },
    Certificate,
}

pub(crate) fn decide(pin: Option<&HostKeyPin>, accept_unknown: bool, key: &PublicKey) -> Verdict {
    let presented = key.fingerprint(HashAlg::Sha256).to_string();
    match pin {
        Some(pin) if pin.matches(key) => Verdict::Trusted(SeenHostKey {
            key: key.clone(),
            trust: HostKeyTrust::Pinned,
        }),
        Some(pin) => Verdict::Mismatch {
            expected: pin.fingerprint().to_string(),
            presented,
        },
        None if accept_unknown => Verdict::Trusted(SeenHostKey {
            key: key.clone(),
            trust: HostKeyTrust::AcceptedUnknown,
        }),
        None => Verdict::Unknown {
            presented,
            public_key: openssh_line(key),
        },
    }
}

/// The russh client handler: checks the host key and records the verdict for the caller.
#[derive(Debug)]
pub(crate) struct PinningHandler {
    pub(crate) pin: Option<HostKeyPin>,
    pub(crate) accept_unknown: bool,
    pub(crate) verdict: Arc<Mutex<Option<Verdict>>>,
}

impl russh::client::Handler for PinningHandler {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        presented: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let verdict = match presented {
            PublicKeyOrCertificate::PublicKey { key, .. } => {
                decide(self.pin.as_ref(), self.accept_unknown, key)
            }
            PublicKeyOrCertificate::Certificate(_) => Verdict::Certificate,
        };
        let trusted = matches!(verdict, Verdict::Trusted(_));
        if let Ok(mut slot) = self.verdict.lock() {
            *slot = Some(verdict);
        }
        Ok(trusted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDLA5a0eDV+YGlGUeIMZJNaWNwhX8/qowQ66V9hSLddP a";
    const FP_A: &str = "SHA256:DOOkYQuL7wzl7gYY70TrsnsZ9nWvuhJsj0x3cJw3OFo";
    const FP_B: &str = "SHA256:ikYvJMV67IAiQWIwYEkR2loQ5HYb1Zv8q0frP+4gSmI";

    fn key_a() -> PublicKey {
        PublicKey::from_openssh(KEY_A).unwrap()
    }

    #[test]
    fn matching_pin_is_trusted() {
        let pin: HostKeyPin = FP_A.parse().unwrap();
        let Verdict::Trusted(seen) = decide(Some(&pin), false, &key_a()) else {
            panic!("not trusted")
        };
        assert_eq!(seen.trust, HostKeyTrust::Pinned);
        assert_eq!(seen.fingerprint(), FP_A);
    }

    #[test]
    fn mismatch_is_refused_even_when_unknown_keys_are_accepted() {
        let pin: HostKeyPin = FP_B.parse().unwrap();
        assert_eq!(
            decide(Some(&pin), true, &key_a()),
            Verdict::Mismatch {
                expected: FP_B.to_owned(),
                presented: FP_A.to_owned()
            }
        );
    }

    #[test]
    fn unknown_key_is_refused_by_default_and_accepted_on_request() {
        let Verdict::Unknown {
            presented,
            public_key,
        } = decide(None, false, &key_a())
        else {
            panic!("accepted")
        };
        assert_eq!(presented, FP_A);
        assert_eq!(public_key, KEY_A.trim_end_matches(" a"));
        let Verdict::Trusted(seen) = decide(None, true, &key_a()) else {
            panic!("refused")
        };
        assert_eq!(seen.trust, HostKeyTrust::AcceptedUnknown);
        assert!(seen.pin().matches(&key_a()));
    }
}
