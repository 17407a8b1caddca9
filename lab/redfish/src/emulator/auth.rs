//! Authentication: HTTP basic auth and Redfish sessions (`X-Auth-Token`).
//!
//! Sessions expire after `SessionTimeout` seconds without use, measured on the emulator's clock.
//! Tokens are 128 random bits, hex-encoded.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use rackproof_clock::Clock;
use rand::RngCore as _;
use tokio::time::Instant;

/// One login session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) user: String,
    pub(crate) token: String,
    last_used: Instant,
}

/// The live sessions and the one account.
pub(crate) struct SessionStore {
    username: String,
    password: String,
    timeout: Duration,
    next_id: u64,
    /// Keyed by session id.
    sessions: BTreeMap<String, Session>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("username", &self.username)
            .field("timeout", &self.timeout)
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

/// Who a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    Basic,
    Session { id: String },
}

impl SessionStore {
    pub(crate) fn new(username: String, password: String, timeout: Duration) -> Self {
        Self {
            username,
            password,
            timeout,
            next_id: 0,
            sessions: BTreeMap::new(),
        }
    }

    pub(crate) fn username(&self) -> &str {
        &self.username
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn credentials_match(&self, username: &str, password: &str) -> bool {
        username == self.username && password == self.password
    }

    /// Checks an `Authorization: Basic …` header value.
    pub(crate) fn check_basic(&self, header: &str) -> bool {
        let Some(encoded) = header
            .strip_prefix("Basic ")
            .or_else(|| header.strip_prefix("basic "))
        else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(text) = String::from_utf8(decoded) else {
            return false;
        };
        text.split_once(':')
            .is_some_and(|(user, password)| self.credentials_match(user, password))
    }

    /// Creates a session; the caller has checked the credentials.
    pub(crate) fn create(&mut self, clock: &Clock) -> Session {
        self.next_id += 1;
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        let session = Session {
            id: self.next_id.to_string(),
            user: self.username.clone(),
            token: hex::encode(bytes),
            last_used: clock.instant(),
        };
        self.sessions.insert(session.id.clone(), session.clone());
        session
    }

    /// Finds the live session for `token`, refreshing its idle timer; drops expired sessions.
    pub(crate) fn touch(&mut self, token: &str, clock: &Clock) -> Option<Session> {
        self.expire_idle(clock);
        let session = self.sessions.values_mut().find(|s| s.token == token)?;
        session.last_used = clock.instant();
        Some(session.clone())
    }

    /// Ends the session with this token (fault injection: "the session expired").
    pub(crate) fn expire_token(&mut self, token: &str) -> bool {
        let before = self.sessions.len();
        self.sessions.retain(|_, s| s.token != token);
        before != self.sessions.len()
    }

    /// Ends every session.
    pub(crate) fn expire_all(&mut self) {
        self.sessions.clear();
    }

    pub(crate) fn get(&mut self, id: &str, clock: &Clock) -> Option<Session> {
        self.expire_idle(clock);
        self.sessions.get(id).cloned()
    }

    pub(crate) fn delete(&mut self, id: &str) -> bool {
        self.sessions.remove(id).is_some()
    }

    pub(crate) fn ids(&mut self, clock: &Clock) -> Vec<String> {
        self.expire_idle(clock);
        let mut ids: Vec<String> = self.sessions.keys().cloned().collect();
        ids.sort_by_key(|id| id.parse::<u64>().unwrap_or(u64::MAX));
        ids
    }

    fn expire_idle(&mut self, clock: &Clock) {
        let timeout = self.timeout;
        self.sessions
            .retain(|_, s| clock.since(s.last_used) < timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sessions_expire_after_the_idle_timeout_on_the_clock() {
        let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
        let mut store = SessionStore::new("admin".into(), "pw".into(), Duration::from_secs(60));
        let session = store.create(&clock);
        clock.sleep(Duration::from_secs(59)).await;
        assert!(store.touch(&session.token, &clock).is_some());
        clock.sleep(Duration::from_secs(59)).await;
        assert!(
            store.touch(&session.token, &clock).is_some(),
            "use refreshes the idle timer"
        );
        clock.sleep(Duration::from_secs(61)).await;
        assert!(store.touch(&session.token, &clock).is_none());
    }

    #[test]
    fn basic_auth_checks_user_and_password() {
        let store = SessionStore::new("admin".into(), "s3cret:x".into(), Duration::from_secs(60));
        let good = base64::engine::general_purpose::STANDARD.encode("admin:s3cret:x");
        assert!(store.check_basic(&format!("Basic {good}")));
        let bad = base64::engine::general_purpose::STANDARD.encode("admin:nope");
        assert!(!store.check_basic(&format!("Basic {bad}")));
        assert!(!store.check_basic("Bearer abc"));
        assert!(!store.check_basic("Basic !!!"));
    }
}
