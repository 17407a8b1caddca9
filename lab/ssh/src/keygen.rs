//! Client key pairs for lab nodes: an ed25519 private key in OpenSSH format (mode 0600) and its
//! public line in `KEY.pub`, as `ssh-keygen -t ed25519` writes them, so the same files work with
//! OpenSSH's `ssh -i`. An emulated rack (`rackproof lab bmc-serve --machine qemu`) makes one for
//! the inventory it writes; its nodes authorize the public line.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use rand::RngCore as _;
use russh::keys::PrivateKey;
use russh::keys::ssh_key::LineEnding;
use russh::keys::ssh_key::private::Ed25519Keypair;

/// A key pair could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum KeygenError {
    #[error("encoding the new key for {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: russh::keys::ssh_key::Error,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes a fresh ed25519 key pair to `private` and `private` + `.pub`, replacing what is there,
/// and returns the public line (`ssh-ed25519 AAAA... COMMENT`).
pub fn generate_client_key(private: &Path, comment: &str) -> Result<String, KeygenError> {
    let mut seed = [0u8; 32];
    rand::rng().fill_bytes(&mut seed);
    let mut key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    key.set_comment(comment);
    let encode = |source| KeygenError::Encode {
        path: private.to_owned(),
        source,
    };
    let private_text = key.to_openssh(LineEnding::LF).map_err(encode)?;
    let public_line = key.public_key().to_openssh().map_err(encode)?;
    write(private, private_text.as_bytes(), 0o600)?;
    write(
        &public_path(private),
        format!("{public_line}\n").as_bytes(),
        0o644,
    )?;
    Ok(public_line)
}

/// `KEY.pub` next to `KEY`.
pub fn public_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeygenError> {
    let fail = |source| KeygenError::Write {
        path: path.to_owned(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.flush().map_err(fail)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_written_pair_loads_and_matches_its_public_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab_ed25519");
        let line = generate_client_key(&path, "rackproof-lab").unwrap();
        assert!(
            line.starts_with("ssh-ed25519 ") && line.ends_with(" rackproof-lab"),
            "{line}"
        );
        let loaded = russh::keys::load_secret_key(&path, None).unwrap();
        assert_eq!(loaded.public_key().to_openssh().unwrap(), line);
        assert_eq!(
            std::fs::read_to_string(public_path(&path)).unwrap().trim(),
            line
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = generate_client_key(&path, "rackproof-lab").unwrap();
        assert_ne!(again, line, "a second key is a new key");
    }
}
