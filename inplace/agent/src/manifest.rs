//! The slot manifest: what a slot artifact for one OS version consists of, and its signature.
//!
//! A slot is the set of files systemd-boot needs to boot one OS version: a kernel and an optional
//! initramfs. The image builder publishes, per version, a
//! `manifest.json` next to the files on the image server:
//!
//! ```text
//! {image-server}/{version}/manifest.json
//! {image-server}/{version}/{file name}      for every file listed in the manifest
//! ```
//!
//! The manifest (JSON, unknown fields refused) names the version, each file with its size and
//! SHA-256, how the boot entry uses the files (`boot`), and an ed25519 signature. The signature
//! covers the domain string `rackproof-slot-manifest-v1` followed by a NUL byte and the
//! manifest's canonical JSON without the `signature` field (fields in declaration order, no
//! whitespace), so a verifier re-serialises the parsed manifest and never trusts the received
//! bytes' layout. Keys are stored as PEM: PKCS#8 for the private key, SubjectPublicKeyInfo for the
//! public key (the formats `openssl genpkey -algorithm ed25519` writes).
//!
//! Guarantees: [`SlotManifest::parse_verified`] checks the signature before the manifest's
//! structure, so nothing in an unsigned manifest is interpreted; [`SlotManifest::verify`] accepts a manifest only when the signature matches the
//! given public key; [`FileEntry::check`] accepts file content only when size and SHA-256 match.
//! File names are single path components (no `/`, `\`, `..`, control characters), so a hostile
//! manifest cannot write outside the slot.

use std::fmt;

use base64::Engine as _;
use ed25519_dalek::pkcs8::{
    DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _,
};
use ed25519_dalek::{Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The value of [`SlotManifest::format`] this crate writes and accepts.
pub const MANIFEST_FORMAT: &str = "rackproof-slot/v1";

const SIGNATURE_DOMAIN: &[u8] = b"rackproof-slot-manifest-v1\0";

/// A signed description of one slot artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotManifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// The OS version the slot boots (what its `/etc/os-release` says).
    pub version: String,
    /// The files of the slot, downloaded from `{image-server}/{version}/{name}`.
    pub files: Vec<FileEntry>,
    /// How the boot entry uses the files.
    pub boot: BootSpec,
    /// Base64 of the ed25519 signature over [`SlotManifest::signed_bytes`]; empty when unsigned.
    #[serde(default)]
    pub signature: String,
}

/// One file of a slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// File name (one path component).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
}

/// How the slot boots: a kernel, an optional initrd and a command line (a Type #1 entry; what
/// `inplace_boot::install_entry` installs).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootSpec {
    /// The kernel file (a name from `files`).
    pub linux: String,
    /// The initrd file (a name from `files`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initrd: Option<String>,
    /// The kernel command line (`options`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub options: String,
}

/// What is wrong with a manifest, a key or a file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The JSON did not parse into a manifest.
    #[error("failed to parse slot manifest")]
    Parse(#[source] serde_json::Error),
    /// The manifest is well-formed JSON but breaks a rule.
    #[error("invalid slot manifest for version {version:?}: {problem}")]
    Invalid {
        /// The manifest's version field.
        version: String,
        /// What is wrong.
        problem: String,
    },
    /// The manifest carries no signature or an undecodable one.
    #[error("slot manifest for version {version:?} has no valid signature encoding")]
    SignatureEncoding {
        /// The manifest's version field.
        version: String,
    },
    /// The signature does not match the key.
    #[error("slot manifest for version {version:?} is not signed by the trusted key")]
    BadSignature {
        /// The manifest's version field.
        version: String,
    },
    /// A file's size or checksum differs from the manifest.
    #[error("file {name:?} of version {version:?} does not match the manifest: {problem}")]
    FileMismatch {
        /// The manifest's version field.
        version: String,
        /// The file name.
        name: String,
        /// Size or checksum details.
        problem: String,
    },
    /// A key could not be decoded.
    #[error("failed to decode ed25519 {kind} key (PEM)")]
    Key {
        /// `private` or `public`.
        kind: &'static str,
    },
}

impl SlotManifest {
    /// Builds an unsigned manifest for `version` from in-memory files.
    pub fn describe(
        version: &str,
        files: &[(String, Vec<u8>)],
        boot: BootSpec,
    ) -> Result<Self, ManifestError> {
        let manifest = Self {
            format: MANIFEST_FORMAT.to_owned(),
            version: version.to_owned(),
            files: files
                .iter()
                .map(|(name, data)| FileEntry::of(name, data))
                .collect(),
            boot,
            signature: String::new(),
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses and validates (not verifies) a manifest.
    pub fn parse(bytes: &[u8]) -> Result<Self, ManifestError> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(ManifestError::Parse)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses a manifest received from elsewhere: decodes the JSON, verifies the signature
    /// against `key`, and only then checks the structural rules ([`SlotManifest::validate`]).
    pub fn parse_verified(bytes: &[u8], key: &VerifyingKey) -> Result<Self, ManifestError> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(ManifestError::Parse)?;
        manifest.verify(key)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The manifest as pretty JSON (what the image server serves).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("a manifest always serialises");
        out.push(b'\n');
        out
    }

    /// Checks the structural rules: format, version, file names, boot references.
    pub fn validate(&self) -> Result<(), ManifestError> {
        let invalid = |problem: String| ManifestError::Invalid {
            version: self.version.clone(),
            problem,
        };
        if self.format != MANIFEST_FORMAT {
            return Err(invalid(format!(
                "format is {:?}, expected {MANIFEST_FORMAT:?}",
                self.format
            )));
        }
        validate_version(&self.version).map_err(|problem| invalid(problem.to_owned()))?;
        if self.files.is_empty() {
            return Err(invalid("lists no files".to_owned()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for file in &self.files {
            validate_file_name(&file.name)
                .map_err(|problem| invalid(format!("file name {:?} {problem}", file.name)))?;
            if !seen.insert(file.name.as_str()) {
                return Err(invalid(format!("file {:?} is listed twice", file.name)));
            }
            if file.sha256.len() != 64
                || !file
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(invalid(format!(
                    "file {:?} has a malformed sha256 {:?}",
                    file.name, file.sha256
                )));
            }
        }
        for name in std::iter::once(&self.boot.linux).chain(self.boot.initrd.iter()) {
            if !seen.contains(name.as_str()) {
                return Err(invalid(format!(
                    "boot refers to {name:?}, which is not among the files"
                )));
            }
        }
        if self.boot.options.contains(['\n', '\r']) {
            return Err(invalid("boot options contain a line break".to_owned()));
        }
        Ok(())
    }

    /// The bytes the signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let unsigned = Self {
            signature: String::new(),
            ..self.clone()
        };
        let mut bytes = SIGNATURE_DOMAIN.to_vec();
        bytes.extend(serde_json::to_vec(&unsigned).expect("a manifest always serialises"));
        bytes
    }

    /// Signs the manifest in place with `key`.
    pub fn sign(&mut self, key: &SigningKey) {
        let signature = key.sign(&self.signed_bytes());
        self.signature = base64::engine::general_purpose::STANDARD.encode(signature.to_bytes());
    }

    /// Verifies the signature against `key`.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), ManifestError> {
        let encoding = || ManifestError::SignatureEncoding {
            version: self.version.clone(),
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(self.signature.trim())
            .map_err(|_| encoding())?;
        let raw: [u8; 64] = raw.try_into().map_err(|_| encoding())?;
        let signature = ed25519_dalek::Signature::from_bytes(&raw);
        key.verify(&self.signed_bytes(), &signature)
            .map_err(|_| ManifestError::BadSignature {
                version: self.version.clone(),
            })
    }

    /// The entry for file `name`, if listed.
    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|file| file.name == name)
    }
}

impl FileEntry {
    /// Describes `data` under `name`.
    pub fn of(name: &str, data: &[u8]) -> Self {
        Self {
            name: name.to_owned(),
            size: data.len() as u64,
            sha256: sha256_hex(data),
        }
    }

    /// Checks that `data` is this file (size and SHA-256).
    pub fn check(&self, version: &str, data: &[u8]) -> Result<(), ManifestError> {
        let mismatch = |problem: String| ManifestError::FileMismatch {
            version: version.to_owned(),
            name: self.name.clone(),
            problem,
        };
        if data.len() as u64 != self.size {
            return Err(mismatch(format!(
                "size {} instead of {}",
                data.len(),
                self.size
            )));
        }
        let actual = sha256_hex(data);
        if actual != self.sha256 {
            return Err(mismatch(format!(
                "sha256 {actual} instead of {}",
                self.sha256
            )));
        }
        Ok(())
    }
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Checks an OS version string: non-empty, at most 64 characters of `[A-Za-z0-9._~-]`, so it is
/// safe as a URL path segment and inside a boot entry file name.
pub fn validate_version(version: &str) -> Result<(), &'static str> {
    if version.is_empty() {
        return Err("version is empty");
    }
    if version.len() > 64 {
        return Err("version is longer than 64 characters");
    }
    if !version
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
    {
        return Err("version may contain only letters, digits, '.', '_', '~' and '-'");
    }
    if version.starts_with('.') {
        return Err("version must not start with '.'");
    }
    Ok(())
}

fn validate_file_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name == "." || name == ".." {
        return Err("is empty or a directory reference");
    }
    if name.len() > 128 {
        return Err("is longer than 128 characters");
    }
    if name
        .chars()
        .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        return Err("must be one path component without control characters");
    }
    Ok(())
}

/// An ed25519 key pair for signing slot manifests.
pub struct SlotKeyPair {
    key: SigningKey,
}

impl fmt::Debug for SlotKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotKeyPair")
            .field("public", &hex::encode(self.key.verifying_key().as_bytes()))
            .finish()
    }
}

impl SlotKeyPair {
    /// Generates a fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut seed);
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// A deterministic key from a 32-byte seed (tests and reproducible labs).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// Reads a PKCS#8 PEM private key.
    pub fn from_pem(pem: &str) -> Result<Self, ManifestError> {
        let key =
            SigningKey::from_pkcs8_pem(pem).map_err(|_| ManifestError::Key { kind: "private" })?;
        Ok(Self { key })
    }

    /// The private key as PKCS#8 PEM.
    pub fn private_pem(&self) -> String {
        self.key
            .to_pkcs8_pem(Default::default())
            .expect("an ed25519 key always encodes as PKCS#8")
            .to_string()
    }

    /// The public key as SubjectPublicKeyInfo PEM (what goes onto nodes).
    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .expect("an ed25519 public key always encodes as SPKI")
    }

    /// The public key.
    pub fn public(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The signing key.
    pub fn signing(&self) -> &SigningKey {
        &self.key
    }
}

/// Describes and signs the slot files in `dir` (the kernel `boot.linux` and the optional
/// `boot.initrd`), writes `dir/manifest.json` and returns the manifest (`rackproof-agent sign-slot`).
pub fn sign_directory(
    dir: &std::path::Path,
    version: &str,
    boot: BootSpec,
    key: &SlotKeyPair,
) -> Result<SlotManifest, SignError> {
    let mut files = Vec::new();
    for name in std::iter::once(&boot.linux).chain(boot.initrd.iter()) {
        let path = dir.join(name);
        let data = std::fs::read(&path).map_err(|source| SignError::Read {
            path: path.clone(),
            source,
        })?;
        files.push((name.clone(), data));
    }
    let mut manifest =
        SlotManifest::describe(version, &files, boot).map_err(SignError::Manifest)?;
    manifest.sign(key.signing());
    let target = dir.join("manifest.json");
    crate::store::write_atomic(&target, &manifest.to_json(), Some(0o644)).map_err(|e| {
        SignError::Write {
            path: target,
            detail: e.to_string(),
        }
    })?;
    Ok(manifest)
}

/// Signing a slot directory failed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// A slot file could not be read.
    #[error("failed to read slot file {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The manifest breaks a rule.
    #[error("failed to describe the slot")]
    Manifest(#[source] ManifestError),
    /// The manifest could not be written.
    #[error("failed to write {path}: {detail}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// What happened.
        detail: String,
    },
}

/// Reads a SubjectPublicKeyInfo PEM public key.
pub fn public_key_from_pem(pem: &str) -> Result<VerifyingKey, ManifestError> {
    VerifyingKey::from_public_key_pem(pem).map_err(|_| ManifestError::Key { kind: "public" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SlotManifest {
        let files = vec![
            ("vmlinuz".to_owned(), b"kernel".to_vec()),
            ("initrd.img".to_owned(), b"initrd".to_vec()),
        ];
        let boot = BootSpec {
            linux: "vmlinuz".into(),
            initrd: Some("initrd.img".into()),
            options: "console=ttyS0".into(),
        };
        SlotManifest::describe("1.2.0", &files, boot).unwrap()
    }

    #[test]
    fn a_signed_manifest_round_trips_and_verifies() {
        let pair = SlotKeyPair::from_seed([7; 32]);
        let mut manifest = sample();
        manifest.sign(pair.signing());
        let parsed = SlotManifest::parse(&manifest.to_json()).unwrap();
        assert_eq!(parsed, manifest);
        parsed.verify(&pair.public()).unwrap();
    }

    #[test]
    fn a_changed_field_or_another_key_fails_verification() {
        let pair = SlotKeyPair::from_seed([7; 32]);
        let mut manifest = sample();
        manifest.sign(pair.signing());
        let mut tampered = manifest.clone();
        tampered.files[0].sha256 = sha256_hex(b"evil");
        assert!(matches!(
            tampered.verify(&pair.public()),
            Err(ManifestError::BadSignature { .. })
        ));
        let other = SlotKeyPair::from_seed([8; 32]);
        assert!(matches!(
            manifest.verify(&other.public()),
            Err(ManifestError::BadSignature { .. })
        ));
        let mut unsigned = manifest.clone();
        unsigned.signature = "not base64!".into();
        assert!(matches!(
            unsigned.verify(&pair.public()),
            Err(ManifestError::SignatureEncoding { .. })
        ));
    }

    #[test]
    fn keys_round_trip_through_pem() {
        let pair = SlotKeyPair::from_seed([9; 32]);
        let again = SlotKeyPair::from_pem(&pair.private_pem()).unwrap();
        assert_eq!(again.public(), pair.public());
        assert_eq!(
            public_key_from_pem(&pair.public_pem()).unwrap(),
            pair.public()
        );
        assert!(public_key_from_pem("garbage").is_err());
        assert!(SlotKeyPair::from_pem("garbage").is_err());
        assert_ne!(
            SlotKeyPair::generate().public(),
            SlotKeyPair::generate().public()
        );
    }

    #[test]
    fn file_checks_catch_size_and_checksum() {
        let entry = FileEntry::of("vmlinuz", b"kernel");
        entry.check("1", b"kernel").unwrap();
        let err = entry.check("1", b"kernex").unwrap_err().to_string();
        assert!(err.contains("sha256"), "{err}");
        let err = entry.check("1", b"kern").unwrap_err().to_string();
        assert!(err.contains("size 4 instead of 6"), "{err}");
    }

    #[test]
    fn a_signed_directory_verifies_with_the_public_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("vmlinuz"), b"kernel").unwrap();
        std::fs::write(dir.path().join("initrd.img"), b"initrd").unwrap();
        let pair = SlotKeyPair::from_seed([3; 32]);
        let boot = BootSpec {
            linux: "vmlinuz".into(),
            initrd: Some("initrd.img".into()),
            options: String::new(),
        };
        sign_directory(dir.path(), "2.0.0", boot.clone(), &pair).unwrap();
        let manifest =
            SlotManifest::parse(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
        manifest.verify(&pair.public()).unwrap();
        assert_eq!(
            manifest.file("vmlinuz").unwrap().sha256,
            sha256_hex(b"kernel")
        );
        let missing = BootSpec {
            linux: "absent".into(),
            ..boot
        };
        assert!(matches!(
            sign_directory(dir.path(), "2.0.0", missing, &pair),
            Err(SignError::Read { .. })
        ));
    }

    #[test]
    fn hostile_manifests_are_refused() {
        let mut manifest = sample();
        manifest.files[0].name = "../../EFI/evil".into();
        manifest.boot.linux = "../../EFI/evil".into();
        assert!(manifest.validate().is_err());
        let mut manifest = sample();
        manifest.version = "1 2".into();
        assert!(manifest.validate().is_err());
        let mut manifest = sample();
        manifest.boot.linux = "missing".into();
        assert!(manifest.validate().is_err());
        let json = br#"{"format":"rackproof-slot/v1","version":"1","files":[],"boot":{"linux":"k"},"extra":1}"#;
        assert!(matches!(
            SlotManifest::parse(json),
            Err(ManifestError::Parse(_))
        ));
        assert!(matches!(
            SlotManifest::parse(b"{"),
            Err(ManifestError::Parse(_))
        ));
    }
}
