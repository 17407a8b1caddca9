//! Fault rules: what scenarios inject into an emulated BMC at runtime.
//!
//! A [`FaultRule`] matches requests by method, path (exact, or a prefix ending in `*`) and, for
//! `ComputerSystem.Reset`, the requested `ResetType`. Each matching request *applies* the rule
//! once; a rule with `times: N` applies N times and is then removed. Effects:
//!
//! 1. [`FaultEffect::Status`]: answer with that status and a Redfish error body instead of
//!    handling the request.
//! 2. [`FaultEffect::Latency`]: wait on the emulator's [`rackproof_clock::Clock`] (virtual time
//!    under a paused tokio clock) before answering. On a reset action the emulator instead
//!    answers `202 Accepted` at once with a task monitor, and performs the reset when the delay
//!    has passed (see `emulator::tasks`).
//! 3. [`FaultEffect::IgnoreAction`]: accept a reset or boot-override PATCH (`204`) and do
//!    nothing — the "power-on accepted but ignored" vendor quirk.
//! 4. [`FaultEffect::ExpireSession`]: the session the request authenticates with expires just
//!    before the request, which then fails with `401`.
//! 5. [`FaultEffect::RefuseResetUnlessOff`]: restart-type resets (`ForceRestart`,
//!    `GracefulRestart`, `PowerCycle`) are refused with `409 ChassisPowerStateOffRequired` while
//!    the system is not off.
//!
//! [`VendorProfile`]s are named bundles of rules for quirks seen on real BMCs.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rackproof_driver::ResetAction;
use serde::{Deserialize, Serialize};

/// One fault rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultRule {
    /// The HTTP method to match (`GET`, `POST`, `PATCH`, `DELETE`); any method when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The request path: exact (`/redfish/v1/Systems/node-1`), or a prefix ending in `*`
    /// (`/redfish/v1/Systems/*`). A trailing slash is ignored except on `/redfish/v1/`.
    pub path: String,
    /// Only reset actions requesting this `ResetType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_type: Option<ResetAction>,
    /// What happens to a matching request.
    pub effect: FaultEffect,
    /// How many matching requests the rule applies to; forever when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

/// What a fault rule does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum FaultEffect {
    /// Answer with this HTTP status (400–599) and a Redfish error body.
    Status { code: u16 },
    /// Delay the answer (or, on a reset, complete it through a task monitor after the delay).
    Latency {
        #[serde(with = "duration_text")]
        delay: Duration,
    },
    /// Accept the action and do nothing.
    IgnoreAction,
    /// Expire the request's session first, so it fails with 401.
    ExpireSession,
    /// Refuse restart-type resets while the system is not off (409).
    RefuseResetUnlessOff,
}

impl FaultRule {
    /// A rule answering `code` to `method path`.
    pub fn status(method: &str, path: &str, code: u16) -> Self {
        Self::new(Some(method), path, FaultEffect::Status { code })
    }

    /// A rule delaying `method path` (any method when `None`).
    pub fn latency(method: Option<&str>, path: &str, delay: Duration) -> Self {
        Self::new(method, path, FaultEffect::Latency { delay })
    }

    /// A rule accepting and ignoring resets of the systems under `path`.
    pub fn ignore_action(method: &str, path: &str) -> Self {
        Self::new(Some(method), path, FaultEffect::IgnoreAction)
    }

    /// A rule expiring the session of requests to `path`.
    pub fn expire_session(path: &str) -> Self {
        Self::new(None, path, FaultEffect::ExpireSession)
    }

    fn new(method: Option<&str>, path: &str, effect: FaultEffect) -> Self {
        Self {
            method: method.map(str::to_owned),
            path: path.to_owned(),
            reset_type: None,
            effect,
            times: None,
        }
    }

    /// Applies the rule only to resets requesting `action`.
    pub fn for_reset_type(mut self, action: ResetAction) -> Self {
        self.reset_type = Some(action);
        self
    }

    /// Applies the rule `n` times, then removes it.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Checks the rule before it is installed.
    pub(crate) fn validate(&self) -> Result<(), InvalidFault> {
        if let Some(method) = &self.method
            && !["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD"]
                .contains(&method.to_ascii_uppercase().as_str())
        {
            return Err(InvalidFault::new(
                self,
                format!("unknown method {method:?}"),
            ));
        }
        if !self.path.starts_with('/') {
            return Err(InvalidFault::new(
                self,
                "the path must start with `/`".to_owned(),
            ));
        }
        if self.path.trim_end_matches('*').contains('*') {
            return Err(InvalidFault::new(
                self,
                "`*` may only end the path".to_owned(),
            ));
        }
        if let FaultEffect::Status { code } = self.effect
            && !(400..=599).contains(&code)
        {
            return Err(InvalidFault::new(
                self,
                format!("status {code} is not an error status (400-599)"),
            ));
        }
        if self.times == Some(0) {
            return Err(InvalidFault::new(
                self,
                "`times: 0` would never apply".to_owned(),
            ));
        }
        Ok(())
    }

    /// Whether a request matches the rule.
    pub(crate) fn matches(
        &self,
        method: &str,
        path: &str,
        reset_type: Option<ResetAction>,
    ) -> bool {
        if let Some(wanted) = &self.method
            && !wanted.eq_ignore_ascii_case(method)
        {
            return false;
        }
        if let Some(wanted) = self.reset_type
            && reset_type != Some(wanted)
        {
            return false;
        }
        let path = normalize(path);
        match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix) || normalize(prefix) == path,
            None => normalize(&self.path) == path,
        }
    }
}

/// Strips a trailing slash, except from the service root.
fn normalize(path: &str) -> &str {
    if path == "/redfish/v1/" || path == "/" {
        path
    } else {
        path.strip_suffix('/').unwrap_or(path)
    }
}

/// A fault rule that cannot be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault rule for {path}: {reason}")]
pub struct InvalidFault {
    path: String,
    reason: String,
}

impl InvalidFault {
    fn new(rule: &FaultRule, reason: String) -> Self {
        Self {
            path: rule.path.clone(),
            reason,
        }
    }
}

/// Named bundles of fault rules for quirks of real BMCs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VendorProfile {
    /// The first `ComputerSystem.Reset` with `On` is accepted (204) and ignored.
    IgnoresFirstPowerOn,
    /// `ForceRestart`, `GracefulRestart` and `PowerCycle` are refused (409) unless the system is off.
    ResetRefusedUntilOff,
    /// Every request takes 2 s; resets complete through a task monitor.
    Slow,
}

impl VendorProfile {
    /// Every profile.
    pub const ALL: [VendorProfile; 3] = [
        Self::IgnoresFirstPowerOn,
        Self::ResetRefusedUntilOff,
        Self::Slow,
    ];

    /// The profile's name as scenarios write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::IgnoresFirstPowerOn => "ignores-first-power-on",
            Self::ResetRefusedUntilOff => "reset-refused-until-off",
            Self::Slow => "slow",
        }
    }

    /// The rules the profile installs.
    pub fn rules(self) -> Vec<FaultRule> {
        const RESETS: &str = "/redfish/v1/Systems/*";
        match self {
            Self::IgnoresFirstPowerOn => {
                vec![
                    FaultRule::ignore_action("POST", RESETS)
                        .for_reset_type(ResetAction::On)
                        .times(1),
                ]
            }
            Self::ResetRefusedUntilOff => {
                vec![FaultRule::new(
                    Some("POST"),
                    RESETS,
                    FaultEffect::RefuseResetUnlessOff,
                )]
            }
            Self::Slow => vec![FaultRule::latency(
                None,
                "/redfish/v1/*",
                Duration::from_secs(2),
            )],
        }
    }
}

impl fmt::Display for VendorProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VendorProfile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProfile {
                given: s.to_owned(),
            })
    }
}

/// A vendor profile name that names none of [`VendorProfile::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown vendor profile {given:?}; known: ignores-first-power-on, reset-refused-until-off, slow"
)]
pub struct UnknownProfile {
    given: String,
}

/// Identifies an installed rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FaultId(pub(crate) u64);

/// The effects that apply to one request, after matching every rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) status: Option<u16>,
    pub(crate) latency: Duration,
    pub(crate) ignore: bool,
    pub(crate) expire_session: bool,
    pub(crate) refuse_unless_off: bool,
}

/// The installed rules, in the order they were added.
#[derive(Debug, Default)]
pub(crate) struct FaultSet {
    next: u64,
    rules: Vec<(FaultId, FaultRule, Option<u32>)>,
}

impl FaultSet {
    pub(crate) fn add(&mut self, rule: FaultRule) -> Result<FaultId, InvalidFault> {
        rule.validate()?;
        self.next += 1;
        let id = FaultId(self.next);
        let remaining = rule.times;
        self.rules.push((id, rule, remaining));
        Ok(id)
    }

    pub(crate) fn remove(&mut self, id: FaultId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|(rule_id, ..)| *rule_id != id);
        self.rules.len() != before
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    /// The installed rules with how many applications each has left (`None`: unbounded).
    pub(crate) fn list(&self) -> Vec<(FaultId, FaultRule, Option<u32>)> {
        self.rules.clone()
    }

    /// Applies every matching rule once, removing rules that are used up.
    pub(crate) fn apply(
        &mut self,
        method: &str,
        path: &str,
        reset_type: Option<ResetAction>,
    ) -> Applied {
        let mut applied = Applied::default();
        for (_, rule, remaining) in &mut self.rules {
            if !rule.matches(method, path, reset_type) {
                continue;
            }
            if let Some(left) = remaining {
                *left -= 1;
            }
            match &rule.effect {
                FaultEffect::Status { code } => {
                    applied.status.get_or_insert(*code);
                }
                FaultEffect::Latency { delay } => applied.latency += *delay,
                FaultEffect::IgnoreAction => applied.ignore = true,
                FaultEffect::ExpireSession => applied.expire_session = true,
                FaultEffect::RefuseResetUnlessOff => applied.refuse_unless_off = true,
            }
        }
        self.rules.retain(|(_, _, remaining)| *remaining != Some(0));
        applied
    }
}

mod duration_text {
    //! Durations as `90s`/`250ms` strings (scenario style).

    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&rackproof_clock::format_duration(*duration))
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

    #[test]
    fn rules_match_exact_paths_prefixes_methods_and_reset_types() {
        let rule =
            FaultRule::status("POST", "/redfish/v1/Systems/*", 503).for_reset_type(ResetAction::On);
        assert!(rule.matches(
            "POST",
            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
            Some(ResetAction::On)
        ));
        assert!(!rule.matches(
            "POST",
            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
            Some(ResetAction::ForceOff)
        ));
        assert!(!rule.matches("GET", "/redfish/v1/Systems/1", None));
        let exact = FaultRule::status("GET", "/redfish/v1/Systems/1", 500);
        assert!(exact.matches("get", "/redfish/v1/Systems/1/", None));
        assert!(!exact.matches("GET", "/redfish/v1/Systems/10", None));
    }

    #[test]
    fn count_bounded_rules_apply_n_times_then_disappear() {
        let mut set = FaultSet::default();
        set.add(FaultRule::status("GET", "/redfish/v1/Systems", 503).times(2))
            .unwrap();
        assert_eq!(
            set.apply("GET", "/redfish/v1/Systems", None).status,
            Some(503)
        );
        assert_eq!(set.list()[0].2, Some(1));
        assert_eq!(
            set.apply("GET", "/redfish/v1/Systems", None).status,
            Some(503)
        );
        assert!(set.list().is_empty());
        assert_eq!(
            set.apply("GET", "/redfish/v1/Systems", None),
            Applied::default()
        );
    }

    #[test]
    fn invalid_rules_are_refused_with_the_reason() {
        let mut set = FaultSet::default();
        let err = set
            .add(FaultRule::status("GET", "/redfish/v1/Systems", 200))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an error status"), "{err}");
        let err = set
            .add(FaultRule::status("FETCH", "/x", 500))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown method"), "{err}");
        assert!(set.add(FaultRule::status("GET", "/a/*/b", 500)).is_err());
        assert!(
            set.add(FaultRule::status("GET", "/a", 500).times(0))
                .is_err()
        );
    }

    #[test]
    fn rules_and_profiles_read_from_scenario_json() {
        let rule: FaultRule = serde_json::from_value(serde_json::json!({
            "method": "POST", "path": "/redfish/v1/Systems/*", "resetType": "On",
            "effect": {"latency": {"delay": "90s"}}, "times": 1
        }))
        .unwrap();
        assert_eq!(
            rule.effect,
            FaultEffect::Latency {
                delay: Duration::from_secs(90)
            }
        );
        assert!(
            serde_json::from_value::<FaultRule>(
                serde_json::json!({"path": "/x", "effect": "ignoreAction", "typo": 1})
            )
            .is_err()
        );
        for profile in VendorProfile::ALL {
            assert_eq!(profile.name().parse::<VendorProfile>().unwrap(), profile);
        }
        assert!(
            "flaky"
                .parse::<VendorProfile>()
                .unwrap_err()
                .to_string()
                .contains("slow")
        );
    }
}
