//! The BMC's session table: sessions by BMC session ID, each walking Opened → Challenged →
//! Active, and expiring after a period without traffic.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::codec::command::Privilege;
use crate::crypto::{CipherSuite, Handshake, SessionKeys};
use crate::secure::SequenceWindow;

/// One session as the BMC sees it.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) console_session_id: u32,
    pub(crate) suite: CipherSuite,
    /// The highest privilege the Open Session exchange granted.
    pub(crate) max_privilege: Privilege,
    pub(crate) last_activity: Instant,
    pub(crate) stage: Stage,
}

#[derive(Debug)]
pub(crate) enum Stage {
    /// Open Session answered; waiting for RAKP 1.
    Opened,
    /// RAKP 2 sent; waiting for RAKP 3.
    Challenged {
        handshake: Handshake,
        limit: Privilege,
    },
    /// RAKP 4 sent: IPMI messages flow.
    Active(Active),
}

/// An active session's keys, privilege and sequence numbers.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) keys: SessionKeys,
    pub(crate) privilege: Privilege,
    /// The privilege requested in RAKP 1: the ceiling for Set Session Privilege Level.
    pub(crate) limit: Privilege,
    pub(crate) inbound: SequenceWindow,
    pub(crate) outbound: u32,
}

impl Active {
    /// The next outbound session sequence number (never zero).
    pub(crate) fn next_outbound(&mut self) -> u32 {
        self.outbound = self.outbound.wrapping_add(1);
        if self.outbound == 0 {
            self.outbound = 1;
        }
        self.outbound
    }
}

/// All sessions of one BMC.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: HashMap<u32, Session>,
}

impl Sessions {
    /// Drops sessions idle for longer than `timeout`.
    pub(crate) fn expire(&mut self, now: Instant, timeout: Duration) {
        self.by_id.retain(|id, session| {
            let keep = now.saturating_duration_since(session.last_activity) <= timeout;
            if !keep {
                tracing::debug!(session = format_args!("{id:#010x}"), "IPMI session expired");
            }
            keep
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(crate) fn active(&self) -> usize {
        self.by_id
            .values()
            .filter(|s| matches!(s.stage, Stage::Active(_)))
            .count()
    }

    /// A fresh, non-zero session ID not in use.
    pub(crate) fn unused_id(&self) -> u32 {
        loop {
            let id: u32 = rand::random();
            if id != 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    pub(crate) fn insert(&mut self, id: u32, session: Session) {
        self.by_id.insert(id, session);
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Session> {
        self.by_id.get_mut(&id)
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<Session> {
        self.by_id.remove(&id)
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.by_id.contains_key(&id)
    }
}
