//! Message layouts of IPMI over LAN, as pure functions from bytes to typed values and back.
//!
//! Nothing here knows about sockets, keys or machines: the session and crypto logic lives in
//! [`crate::crypto`] and [`crate::secure`], the command semantics in [`crate::handler`]. Every
//! decoder returns a [`CodecError`] for malformed input and never panics (a proptest feeds
//! random bytes through each of them).
//!
//! The layers, outermost first:
//!
//! 1. [`rmcp`]: the 4-byte RMCP header, and ASF presence ping/pong.
//! 2. [`session`]: the IPMI v1.5 session wrapper (pre-session Get Channel Authentication
//!    Capabilities only) and the IPMI v2.0 / RMCP+ wrapper (payload type, session ID, sequence
//!    number, payload, integrity trailer).
//! 3. [`rakp`]: the RMCP+ Open Session and RAKP 1–4 payloads.
//! 4. [`message`]: the IPMI LAN request/response message with its two checksums.
//! 5. [`command`]: the commands this crate speaks, as typed requests and responses.

pub mod command;
pub mod message;
pub mod rakp;
pub mod rmcp;
pub mod session;

/// A datagram or field that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Fewer bytes than the layout needs.
    #[error("{what} is truncated: needs {needed} bytes, got {got}")]
    Truncated {
        what: &'static str,
        needed: usize,
        got: usize,
    },
    /// A field holds a value the layout does not allow.
    #[error("{what} has invalid value {value:#x}")]
    InvalidValue { what: &'static str, value: u32 },
    /// A field is valid IPMI but not something this crate implements.
    #[error("{what} {value:#x} is not supported")]
    Unsupported { what: &'static str, value: u32 },
    /// An IPMI message checksum does not add up.
    #[error("{which} checksum of the IPMI message is wrong")]
    Checksum { which: &'static str },
    /// Bytes left over after a fixed-size layout.
    #[error("{what} has {extra} unexpected trailing bytes")]
    TrailingBytes { what: &'static str, extra: usize },
}

/// A cursor over a byte slice whose reads fail with [`CodecError::Truncated`] instead of panicking.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self {
            bytes,
            position: 0,
            what,
        }
    }

    pub(crate) fn take(&mut self, count: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .position
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(CodecError::Truncated {
                what: self.what,
                needed: self.position.saturating_add(count),
                got: self.bytes.len(),
            })?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16_le(&mut self) -> Result<u16, CodecError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32_le(&mut self) -> Result<u32, CodecError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.position..];
        self.position = self.bytes.len();
        rest
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// Fails when bytes remain.
    pub(crate) fn finish(&self) -> Result<(), CodecError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(CodecError::TrailingBytes {
                what: self.what,
                extra,
            }),
        }
    }
}
