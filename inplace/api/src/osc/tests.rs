//! Tests of the OSC document and its Secret encoding.

use super::secret::{
    DATA_KEY, OscSecretError, checksum, decode_secret, encode_secret, secret_name,
};
use super::*;
use crate::keys::{ANNOTATION_CHECKSUM_DOWNLOADED_OSC, LABEL_WORKER_POOL};

const GEP_OSC: &str = r#"
apiVersion: rackproof.dev/v1alpha1
kind: OperatingSystemConfig
spec:
  pool: pool-01
  inPlaceUpdates:
    operatingSystemVersion: "1631.0"
    kubelet:
      version: 1.30.4
    credentialsRotation:
      certificateAuthorities:
        lastInitiationTime: "2024-01-01T12:30:00Z"
      serviceAccountKey:
        lastInitiationTime: "2024-01-01T12:30:00Z"
  files:
  - path: /etc/motd
    permissions: 420
    content:
      inline:
        encoding: ""
        data: hello
status:
  inPlaceUpdates:
    osUpdate:
      command: /opt/gardener/bin/inplace-update.sh
      args: ["--version", "1631.0", "--repo", "registry.lab/gardenlinux"]
"#;

fn gep_osc() -> OperatingSystemConfig {
    serde_saphyr::from_str(GEP_OSC).unwrap()
}

#[test]
fn gep_example_reads() {
    let osc = gep_osc();
    let in_place = osc.spec.in_place_updates.as_ref().unwrap();
    assert_eq!(in_place.operating_system_version, "1631.0");
    assert_eq!(in_place.kubelet.version, "1.30.4");
    assert!(
        in_place
            .credentials_rotation
            .as_ref()
            .unwrap()
            .service_account_key_initiated()
            .is_some()
    );
    let update = osc.os_update().unwrap();
    assert_eq!(update.command, "/opt/gardener/bin/inplace-update.sh");
    assert_eq!(update.args[..2], ["--version", "1631.0"]);
    assert_eq!(osc.spec.files[0].bytes().unwrap(), b"hello");
}

#[test]
fn secret_round_trips_the_document() {
    let osc = gep_osc();
    let secret = encode_secret(
        &osc,
        "gardener-node-agent-pool-01-0123456789abcdef",
        "kube-system",
    )
    .unwrap();
    assert_eq!(
        secret.metadata.labels.as_ref().unwrap()[LABEL_WORKER_POOL],
        "pool-01"
    );
    let data = &secret.data.as_ref().unwrap()[DATA_KEY].0;
    assert_eq!(
        secret.metadata.annotations.as_ref().unwrap()[ANNOTATION_CHECKSUM_DOWNLOADED_OSC],
        checksum(data)
    );
    let decoded = decode_secret(&secret).unwrap();
    assert_eq!(decoded.osc, osc);
    assert_eq!(decoded.checksum, checksum(data));
    assert_eq!(decoded.checksum.len(), 64);
}

#[test]
fn changed_document_changes_the_checksum() {
    let osc = gep_osc();
    let mut newer = osc.clone();
    newer
        .spec
        .in_place_updates
        .as_mut()
        .unwrap()
        .operating_system_version = "1632.0".to_owned();
    let a = decode_secret(&encode_secret(&osc, "s", "ns").unwrap())
        .unwrap()
        .checksum;
    let b = decode_secret(&encode_secret(&newer, "s", "ns").unwrap())
        .unwrap()
        .checksum;
    assert_ne!(a, b);
}

#[test]
fn tampered_data_is_refused() {
    let mut secret = encode_secret(&gep_osc(), "s", "ns").unwrap();
    let data = secret.data.as_mut().unwrap().get_mut(DATA_KEY).unwrap();
    data.0.extend_from_slice(b"\n# edited\n");
    assert!(matches!(
        decode_secret(&secret),
        Err(OscSecretError::ChecksumMismatch { .. })
    ));
}

#[test]
fn missing_or_garbled_data_is_a_clear_error() {
    let mut secret = encode_secret(&gep_osc(), "osc-a", "ns").unwrap();
    secret.metadata.annotations = None;
    secret.data.as_mut().unwrap().insert(
        DATA_KEY.to_owned(),
        k8s_openapi::ByteString(b"spec: [".to_vec()),
    );
    let err = decode_secret(&secret).unwrap_err();
    assert!(matches!(err, OscSecretError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("osc-a"));
    secret.data = None;
    assert!(matches!(
        decode_secret(&secret),
        Err(OscSecretError::MissingData { .. })
    ));
}

#[test]
fn secret_name_carries_pool_and_short_hash() {
    let hash = crate::hash::PoolHash::from_hex(
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    );
    assert_eq!(
        secret_name("pool-a", &hash),
        "gardener-node-agent-pool-a-0123456789abcdef"
    );
}

#[test]
fn files_decode_base64_and_refuse_unknown_encodings() {
    let file = File::inline("/etc/kubelet.conf", Some(0o600), b"\x00binary\xff");
    assert_eq!(file.bytes().unwrap(), b"\x00binary\xff");
    let mut odd = file.clone();
    odd.content.inline.encoding = "gzip".to_owned();
    assert!(matches!(
        odd.bytes(),
        Err(FileError::UnknownEncoding { .. })
    ));
    let mut broken = file;
    broken.content.inline.data = "!!!".to_owned();
    assert!(matches!(broken.bytes(), Err(FileError::Base64 { .. })));
}

#[test]
fn in_place_inputs_are_taken_from_the_pool() {
    let spec: crate::crd::WorkerPoolSpec = serde_saphyr::from_str(
        r#"
minimum: 1
maximum: 1
updateStrategy: AutoInPlaceUpdate
machine: { type: m5.large, image: { name: gardenlinux, version: "1631.0" } }
kubernetes: { kubelet: { cpuManagerPolicy: static } }
"#,
    )
    .unwrap();
    let v = crate::version::KubeVersion::parse("1.30.4").unwrap();
    let in_place = InPlaceUpdates::for_pool(&spec, &v);
    assert_eq!(in_place.operating_system_version, "1631.0");
    assert_eq!(in_place.kubelet.version, "1.30.4");
    assert_eq!(
        in_place.kubelet.cpu_manager_policy.as_deref(),
        Some("static")
    );
}
