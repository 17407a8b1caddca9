//! Where and how to reach a node over SSH: plain data, read from inventories and scenarios.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use russh::keys::HashAlg;
use russh::keys::ssh_key::{Fingerprint, PublicKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The default SSH port.
pub const DEFAULT_PORT: u16 = 22;

/// The default limit for connecting (TCP, key exchange and authentication together).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One SSH endpoint of a node: address, login, client key and the host key to expect.
///
/// Host keys are pinned, not trusted on first use: without `host_key`, a connection is refused
/// unless `accept_unknown_host_key` is `true`, and then the key the server presented is reported
/// by [`crate::SshSession::host_key`] so the caller can pin it. A pinned key that does not match is
/// always refused.
///
/// ```yaml
/// host: 10.0.0.12
/// port: 22
/// user: root
/// private_key: /etc/rackproof/lab_ed25519
/// host_key: "SHA256:DOOkYQuL7wzl7gYY70TrsnsZ9nWvuhJsj0x3cJw3OFo"
/// connect_timeout: 10s
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshTarget {
    /// Host name or IP address.
    pub host: String,
    /// TCP port; 22 when absent.
    #[serde(default = "default_port")]
    pub port: u16,
    /// The user to log in as.
    pub user: String,
    /// Private key file in OpenSSH format (ed25519 or RSA, not passphrase-protected).
    pub private_key: PathBuf,
    /// The host key to expect: an OpenSSH public-key line or a `SHA256:...` fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<HostKeyPin>,
    /// Accept a server whose key is not pinned (only when `host_key` is absent). Off by default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub accept_unknown_host_key: bool,
    /// Limit for TCP connect, key exchange and authentication together, as `10s`, `1m`.
    #[serde(default = "default_connect_timeout", with = "duration_text")]
    pub connect_timeout: Duration,
}

impl SshTarget {
    /// A target with the defaults: port 22, no pinned key, unknown keys refused, 10 s to connect.
    pub fn new(
        host: impl Into<String>,
        user: impl Into<String>,
        private_key: impl Into<PathBuf>,
    ) -> Self {
        Self {
            host: host.into(),
            port: DEFAULT_PORT,
            user: user.into(),
            private_key: private_key.into(),
            host_key: None,
            accept_unknown_host_key: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// `host:port`, bracketing IPv6 literals, as errors and logs show it.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Checks what serde cannot: non-empty host and user, a port, a positive connect timeout.
    pub fn validate(&self) -> Result<(), String> {
        if self.host.trim().is_empty() {
            return Err("host is empty".to_owned());
        }
        if self.user.trim().is_empty() {
            return Err("user is empty".to_owned());
        }
        if self.port == 0 {
            return Err("port 0 is not a port to connect to".to_owned());
        }
        if self.private_key.as_os_str().is_empty() {
            return Err("private_key is empty".to_owned());
        }
        if self.connect_timeout.is_zero() {
            return Err("connect_timeout must be positive".to_owned());
        }
        Ok(())
    }
}

fn default_port() -> u16 {
    DEFAULT_PORT
}

fn default_connect_timeout() -> Duration {
    DEFAULT_CONNECT_TIMEOUT
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The host key a target expects: the whole public key, or its SHA-256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyPin {
    /// An OpenSSH public-key line (`ssh-ed25519 AAAA... comment`); the comment is ignored.
    Key(PublicKey),
    /// A fingerprint as `ssh-keygen -l` prints it: `SHA256:` and unpadded base64.
    Fingerprint(Fingerprint),
}

impl HostKeyPin {
    /// Whether `key` is the pinned key.
    pub fn matches(&self, key: &PublicKey) -> bool {
        match self {
            Self::Key(pinned) => pinned.key_data() == key.key_data(),
            Self::Fingerprint(pinned) => *pinned == key.fingerprint(HashAlg::Sha256),
        }
    }

    /// The SHA-256 fingerprint of the pinned key.
    pub fn fingerprint(&self) -> Fingerprint {
        match self {
            Self::Key(key) => key.fingerprint(HashAlg::Sha256),
            Self::Fingerprint(fingerprint) => *fingerprint,
        }
    }
}

impl FromStr for HostKeyPin {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.starts_with("SHA256:") {
            return Fingerprint::from_str(text)
                .map(Self::Fingerprint)
                .map_err(|_| format!("{text:?} is not a valid SHA256 fingerprint"));
        }
        if text.contains(char::is_whitespace) {
            return PublicKey::from_openssh(text)
                .map(Self::Key)
                .map_err(|_| "host key is not a valid OpenSSH public-key line".to_owned());
        }
        Err("host key must be an OpenSSH public-key line (`ssh-ed25519 AAAA...`) or a `SHA256:...` fingerprint".to_owned())
    }
}

impl fmt::Display for HostKeyPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(key) => match key.to_openssh() {
                Ok(line) => f.write_str(&line),
                Err(_) => write!(f, "{}", key.fingerprint(HashAlg::Sha256)),
            },
            Self::Fingerprint(fingerprint) => write!(f, "{fingerprint}"),
        }
    }
}

impl Serialize for HostKeyPin {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostKeyPin {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Durations written as `10s`, `1m`, `250ms` (`rackproof_clock::parse_duration`).
mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&rackproof_clock::format_duration(*duration))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        rackproof_clock::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDLA5a0eDV+YGlGUeIMZJNaWNwhX8/qowQ66V9hSLddP root@vm";
    const ED25519_FP: &str = "SHA256:DOOkYQuL7wzl7gYY70TrsnsZ9nWvuhJsj0x3cJw3OFo";

    #[test]
    fn parses_a_full_target() {
        let yaml = format!(
            "host: 10.0.0.12\nport: 2222\nuser: root\nprivate_key: /keys/id\nhost_key: \"{ED25519}\"\nconnect_timeout: 3s\n"
        );
        let target: SshTarget = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(target.port, 2222);
        assert_eq!(target.connect_timeout, Duration::from_secs(3));
        assert!(!target.accept_unknown_host_key);
        let pin = target.host_key.as_ref().unwrap();
        assert_eq!(pin.fingerprint().to_string(), ED25519_FP);
        assert_eq!(target.address(), "10.0.0.12:2222");
    }

    #[test]
    fn defaults_refuse_unknown_keys() {
        let target: SshTarget =
            serde_saphyr::from_str("host: n1\nuser: root\nprivate_key: /k\n").unwrap();
        assert_eq!(target, SshTarget::new("n1", "root", "/k"));
        assert_eq!(target.port, 22);
        assert!(target.host_key.is_none());
        assert!(!target.accept_unknown_host_key);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let error = serde_saphyr::from_str::<SshTarget>(
            "host: n1\nuser: root\nprivate_key: /k\npassword: x\n",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("password"), "{error}");
    }

    #[test]
    fn bad_host_keys_and_durations_are_refused() {
        for bad in [
            "host_key: nonsense",
            "host_key: \"SHA256:***\"",
            "host_key: \"ssh-ed25519 AAAA\"",
            "connect_timeout: 10",
        ] {
            let yaml = format!("host: n1\nuser: root\nprivate_key: /k\n{bad}\n");
            assert!(
                serde_saphyr::from_str::<SshTarget>(&yaml).is_err(),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn fingerprint_and_key_pins_match_the_same_key() {
        let key = PublicKey::from_openssh(ED25519).unwrap();
        let by_key: HostKeyPin = ED25519.parse().unwrap();
        let by_fp: HostKeyPin = ED25519_FP.parse().unwrap();
        assert!(by_key.matches(&key));
        assert!(by_fp.matches(&key));
        let other: HostKeyPin = "SHA256:ikYvJMV67IAiQWIwYEkR2loQ5HYb1Zv8q0frP+4gSmI"
            .parse()
            .unwrap();
        assert!(!other.matches(&key));
    }

    #[test]
    fn round_trips_through_yaml() {
        let mut target = SshTarget::new("::1", "admin", "/k");
        target.host_key = Some(ED25519_FP.parse().unwrap());
        target.connect_timeout = Duration::from_millis(1500);
        let yaml = serde_saphyr::to_string(&target).unwrap();
        let back: SshTarget = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, target);
        assert_eq!(back.address(), "[::1]:22");
    }

    #[test]
    fn validate_names_the_problem() {
        let mut target = SshTarget::new("n1", "", "/k");
        assert_eq!(target.validate().unwrap_err(), "user is empty");
        target.user = "root".into();
        target.port = 0;
        assert!(target.validate().unwrap_err().contains("port 0"));
    }
}
