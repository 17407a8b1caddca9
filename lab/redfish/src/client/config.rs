//! What a Redfish client needs to know: the endpoint (URL, TLS policy, which system), the
//! credentials, and the behaviour knobs (auth mode, retries, polling, vendor-quirk tolerance).

use std::fmt;
use std::time::Duration;

/// How the client checks the BMC's TLS certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TlsPolicy {
    /// Verify against the operating system's trust store (the default).
    #[default]
    Verify,
    /// Verify against this CA certificate (PEM) only — for lab BMCs with a private CA.
    CustomCa { pem: String },
    /// Do not verify the certificate at all. An explicit per-endpoint opt-out for lab BMCs with
    /// self-signed certificates; never a default.
    InsecureSkipVerify,
}

/// A BMC to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The BMC's base URL, e.g. `https://10.0.0.5` or `https://127.0.0.1:8443`.
    pub url: String,
    pub tls: TlsPolicy,
    /// The system's `Id` in `/redfish/v1/Systems`; `None` takes the first (usually only) member.
    pub system: Option<String>,
}

impl Endpoint {
    /// An endpoint with TLS verification against the system trust store and the first system.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            tls: TlsPolicy::Verify,
            system: None,
        }
    }

    /// The same endpoint with another TLS policy.
    pub fn with_tls(mut self, tls: TlsPolicy) -> Self {
        self.tls = tls;
        self
    }

    /// The same endpoint addressing system `id`.
    pub fn with_system(mut self, id: &str) -> Self {
        self.system = Some(id.to_owned());
        self
    }
}

/// A secret string: never printed by `Debug`, never `Display`ed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Self {
        Self(value)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A BMC account. The password never appears in `Debug` output, logs or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: Secret,
}

impl Credentials {
    pub fn new(username: &str, password: &str) -> Self {
        Self {
            username: username.to_owned(),
            password: Secret::new(password.to_owned()),
        }
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    pub(crate) fn password(&self) -> &str {
        self.password.expose()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password)
            .finish()
    }
}

/// How the client authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Log in through `SessionService` and send `X-Auth-Token`; log in again on 401.
    #[default]
    Session,
    /// Send HTTP basic auth with every request.
    Basic,
}

/// Retries of requests that failed with 5xx or a connection error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, including the first (at least 1).
    pub attempts: u32,
    /// The wait before the first retry; it doubles with every retry.
    pub initial_backoff: Duration,
    /// The longest wait between tries (also caps a BMC's `Retry-After`).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based).
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Tolerance for known vendor behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quirks {
    /// After `On` is accepted, poll the power state; if it is still off after
    /// [`ClientOptions::power_on_grace`], send `On` again (up to [`ClientOptions::power_on_attempts`]).
    pub retry_ignored_power_on: bool,
    /// When a restart-type reset is refused with 409 (or `…PowerStateOffRequired`), power off,
    /// wait for `Off`, then power on.
    pub power_off_when_reset_refused: bool,
}

impl Default for Quirks {
    fn default() -> Self {
        Self {
            retry_ignored_power_on: true,
            power_off_when_reset_refused: true,
        }
    }
}

/// Behaviour knobs. The defaults suit real BMCs; tests shorten the durations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    pub auth: AuthMode,
    pub retry: RetryPolicy,
    pub quirks: Quirks,
    /// One HTTP request's limit.
    pub request_timeout: Duration,
    /// The pause between power-state and task-monitor polls.
    pub poll_interval: Duration,
    /// How long a power change may take before it counts as ignored (or failed).
    pub power_on_grace: Duration,
    /// How many times `On` is sent before giving up.
    pub power_on_attempts: u32,
    /// How long a task monitor may stay running.
    pub task_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            auth: AuthMode::Session,
            retry: RetryPolicy::default(),
            quirks: Quirks::default(),
            request_timeout: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            power_on_grace: Duration::from_secs(20),
            power_on_attempts: 3,
            task_timeout: Duration::from_secs(300),
        }
    }
}
