//! Sealing and opening the packets of an active RMCP+ session: both sides (BMC and console)
//! encrypt every payload with K2 and authenticate every packet with K1.
//!
//! Sequence-number checking is the receiver's job (see [`SequenceWindow`]): this module only
//! proves a packet came from the key holder and recovers its payload.

use crate::codec::CodecError;
use crate::codec::session::{self, PayloadType, SIGNED_FROM, V20Header, V20Packet};
use crate::crypto::{CryptoError, SessionKeys};

/// Why a packet of an active session was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("packet is not both authenticated and encrypted")]
    NotProtected,
    #[error("packet trailer is malformed")]
    Trailer(#[source] CodecError),
    #[error("packet auth code does not match")]
    Integrity,
    #[error("packet payload does not decrypt")]
    Decrypt(#[source] CryptoError),
}

/// Seals a payload for an active session.
pub fn seal(
    keys: &SessionKeys,
    payload_type: PayloadType,
    session_id: u32,
    sequence: u32,
    plaintext: &[u8],
    iv: [u8; 16],
) -> Result<Vec<u8>, CodecError> {
    let header = V20Header {
        payload_type,
        encrypted: true,
        authenticated: true,
        session_id,
        sequence,
    };
    let ciphertext = keys.encrypt(iv, plaintext);
    let mut datagram = session::encode_v20(&header, &ciphertext)?;
    let code = keys.auth_code(&datagram[SIGNED_FROM..]);
    datagram.extend_from_slice(&code);
    Ok(datagram)
}

/// Verifies and decrypts a packet of an active session.
pub fn open(keys: &SessionKeys, packet: &V20Packet<'_>) -> Result<Vec<u8>, OpenError> {
    if !(packet.header.authenticated && packet.header.encrypted) {
        return Err(OpenError::NotProtected);
    }
    let (signed, code) = packet
        .integrity(keys.suite.truncated_len())
        .map_err(OpenError::Trailer)?;
    if !keys.verify_auth_code(signed, code) {
        return Err(OpenError::Integrity);
    }
    keys.decrypt(packet.payload).map_err(OpenError::Decrypt)
}

/// The receiver's record of inbound session sequence numbers: accepts each number once, within
/// 16 of the highest seen (IPMI v2.0 section 6.12.13), and never zero.
#[derive(Debug, Clone, Default)]
pub struct SequenceWindow {
    highest: Option<u32>,
    /// Bit `n` set: `highest - n` has been seen.
    seen: u32,
}

impl SequenceWindow {
    const WIDTH: u32 = 16;

    /// Records `sequence`; false if it is zero, a replay, or outside the window.
    pub fn accept(&mut self, sequence: u32) -> bool {
        if sequence == 0 {
            return false;
        }
        let Some(highest) = self.highest else {
            self.highest = Some(sequence);
            self.seen = 1;
            return true;
        };
        let ahead = sequence.wrapping_sub(highest);
        if ahead != 0 && ahead <= Self::WIDTH {
            self.seen = self.seen.checked_shl(ahead).unwrap_or(0) | 1;
            self.highest = Some(sequence);
            return true;
        }
        let behind = highest.wrapping_sub(sequence);
        if behind < Self::WIDTH && self.seen & (1 << behind) == 0 {
            self.seen |= 1 << behind;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::rmcp;
    use crate::codec::session::SessionPacket;
    use crate::crypto::{Handshake, SUITE_3, SUITE_17, UserKey};

    fn keys(suite: crate::crypto::CipherSuite) -> SessionKeys {
        let handshake = Handshake {
            suite,
            console_session_id: 1,
            bmc_session_id: 2,
            console_random: [3; 16],
            bmc_random: [4; 16],
            bmc_guid: [5; 16],
            role: 4,
            username: b"u".to_vec(),
        };
        SessionKeys::derive(
            suite,
            &handshake.session_integrity_key(&UserKey::from_password(b"p")),
        )
    }

    fn open_datagram(keys: &SessionKeys, datagram: &[u8]) -> Result<Vec<u8>, OpenError> {
        let (_, body) = rmcp::split(datagram).unwrap();
        let SessionPacket::V20(packet) = session::decode(body).unwrap() else {
            panic!("v2.0 expected")
        };
        open(keys, &packet)
    }

    #[test]
    fn sealed_packets_open_with_the_same_keys_only() {
        for suite in [SUITE_3, SUITE_17] {
            let k = keys(suite);
            for len in [0usize, 1, 7, 15, 16, 31] {
                let payload: Vec<u8> = (0..len as u8).collect();
                let datagram = seal(&k, PayloadType::Ipmi, 7, 1, &payload, [8; 16]).unwrap();
                assert_eq!(open_datagram(&k, &datagram).unwrap(), payload);
            }
            let datagram = seal(&k, PayloadType::Ipmi, 7, 1, b"x", [8; 16]).unwrap();
            let mut tampered = datagram.clone();
            tampered[20] ^= 1;
            assert_eq!(open_datagram(&k, &tampered), Err(OpenError::Integrity));
            let other = keys(if suite == SUITE_3 { SUITE_17 } else { SUITE_3 });
            assert!(open_datagram(&other, &datagram).is_err());
        }
    }

    #[test]
    fn sequence_window_accepts_each_number_once() {
        let mut window = SequenceWindow::default();
        assert!(!window.accept(0));
        assert!(window.accept(5));
        assert!(!window.accept(5), "replay");
        assert!(window.accept(7));
        assert!(window.accept(6), "late but new");
        assert!(!window.accept(6));
        assert!(!window.accept(7 + 17), "too far ahead");
        assert!(window.accept(7 + 16));
        assert!(!window.accept(7), "fell out of the window");
        let mut wrapping = SequenceWindow::default();
        assert!(wrapping.accept(u32::MAX));
        assert!(wrapping.accept(1));
    }
}
