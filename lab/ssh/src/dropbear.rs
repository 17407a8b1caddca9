//! Host keys from dropbear's own key files, for pinning a node before it ever answers.
//!
//! The node images' dropbear host key is generated once per image build (`ci/build-images` writes
//! `keys/ssh_host_ed25519_key`, and `images/build-slot` puts it into every slot's initramfs as
//! `etc/dropbear/dropbear_ed25519_host_key`), so whoever holds the build knows the key every node
//! booting any of its slots will present, out of band: read the file and pin its public half
//! ([`dropbear_host_key`]). No trust on first use is needed.
//!
//! dropbear's ed25519 key file is two SSH wire-format strings: the algorithm name
//! `ssh-ed25519`, then 64 bytes, the 32-byte private seed followed by the 32-byte public key.
//! Only the public half leaves this module; errors never include key bytes.

use russh::keys::PublicKey;
use russh::keys::ssh_key::public::{Ed25519PublicKey, KeyData};

use crate::target::HostKeyPin;

const ED25519: &[u8] = b"ssh-ed25519";
const ED25519_PAIR_LEN: usize = 64;

/// A dropbear key file that is not an ed25519 key dropbear would write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a dropbear ed25519 key file: {reason}")]
pub struct DropbearKeyError {
    /// What is wrong (never the key bytes).
    pub reason: String,
}

/// The public key of a dropbear ed25519 host key file's contents.
pub fn dropbear_host_key(file: &[u8]) -> Result<PublicKey, DropbearKeyError> {
    let bad = |reason: &str| DropbearKeyError {
        reason: reason.to_owned(),
    };
    let (algorithm, rest) =
        wire_string(file).ok_or_else(|| bad("the algorithm name is cut short"))?;
    if algorithm != ED25519 {
        let shown = String::from_utf8_lossy(&algorithm[..algorithm.len().min(32)]).into_owned();
        return Err(DropbearKeyError {
            reason: format!("algorithm {shown:?}, expected ssh-ed25519"),
        });
    }
    let (pair, rest) = wire_string(rest).ok_or_else(|| bad("the key is cut short"))?;
    if pair.len() != ED25519_PAIR_LEN {
        return Err(DropbearKeyError {
            reason: format!(
                "the key holds {} bytes, expected {ED25519_PAIR_LEN}",
                pair.len()
            ),
        });
    }
    if !rest.is_empty() {
        return Err(DropbearKeyError {
            reason: format!("{} bytes follow the key", rest.len()),
        });
    }
    let mut public = [0u8; 32];
    public.copy_from_slice(&pair[32..]);
    Ok(PublicKey::new(
        KeyData::Ed25519(Ed25519PublicKey(public)),
        "",
    ))
}

/// A pin for the key in a dropbear ed25519 host key file's contents.
pub fn dropbear_host_key_pin(file: &[u8]) -> Result<HostKeyPin, DropbearKeyError> {
    dropbear_host_key(file).map(HostKeyPin::Key)
}

/// A `uint32` length and that many bytes; `None` when the input is shorter.
fn wire_string(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = input.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use russh::keys::HashAlg;

    use super::*;

    /// A throwaway key file as `dropbearkey -t ed25519` wrote it, and what `dropbearkey -y` printed for it.
    const FILE_HEX: &str = "0000000b7373682d65643235353139000000405fd4e8085b589e7068fed66eb44276fe04287eea5204dd1a563402c75725d9709ca9dd13478eaac9db6804a7bb41e433d06c64e27b68722d3a12d47c692ede89";
    const PUBLIC: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJyp3RNHjqrJ22gEp7tB5DPQbGTie2hyLToS1HxpLt6J";
    const FINGERPRINT: &str = "SHA256:ZqbZQ3DPfowijKXUKer6RTRjCYzuxzon0OK1u06OZnw";

    fn file() -> Vec<u8> {
        (0..FILE_HEX.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&FILE_HEX[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn reads_the_public_half_dropbearkey_prints() {
        let key = dropbear_host_key(&file()).unwrap();
        assert_eq!(crate::hostkey::openssh_line(&key), PUBLIC);
        assert_eq!(key.fingerprint(HashAlg::Sha256).to_string(), FINGERPRINT);
        assert!(
            dropbear_host_key_pin(&file())
                .unwrap()
                .matches(&PublicKey::from_openssh(PUBLIC).unwrap())
        );
    }

    #[test]
    fn refuses_other_algorithms_short_files_and_trailing_bytes() {
        let file = file();
        let err = |bytes: &[u8]| dropbear_host_key(bytes).unwrap_err().to_string();
        assert_eq!(
            err(&file[..10]),
            "not a dropbear ed25519 key file: the algorithm name is cut short"
        );
        assert_eq!(
            err(&file[..file.len() - 1]),
            "not a dropbear ed25519 key file: the key is cut short"
        );
        let mut longer = file.clone();
        longer.push(0);
        assert_eq!(
            err(&longer),
            "not a dropbear ed25519 key file: 1 bytes follow the key"
        );
        let mut rsa = b"\0\0\0\x07ssh-rsa".to_vec();
        rsa.extend_from_slice(&file[15..]);
        assert_eq!(
            err(&rsa),
            "not a dropbear ed25519 key file: algorithm \"ssh-rsa\", expected ssh-ed25519"
        );
        let mut short_pair = file[..15].to_vec();
        short_pair.extend_from_slice(&[0, 0, 0, 2, 1, 2]);
        assert_eq!(
            err(&short_pair),
            "not a dropbear ed25519 key file: the key holds 2 bytes, expected 64"
        );
    }
}
