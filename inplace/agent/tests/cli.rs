//! The `rackproof-agent` binary: the os-update exit contract and the signing subcommands.

use std::process::Command;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rackproof-agent"))
}

#[test]
fn os_update_with_bad_arguments_exits_1() {
    let out = agent().args(["os-update", "--bogus"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid arguments"));
}

#[test]
fn os_update_without_the_trusted_key_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = agent()
        .args([
            "os-update",
            "--version",
            "2.0.0",
            "--image-server",
            "http://127.0.0.1:9/slots",
            "--public-key",
        ])
        .arg(dir.path().join("missing.pub"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn keygen_and_sign_slot_produce_a_manifest_the_public_key_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = (dir.path().join("slot.key"), dir.path().join("slot.pub"));
    let out = agent()
        .arg("keygen")
        .arg("--private")
        .arg(&private)
        .arg("--public")
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.path().join("vmlinuz"), b"kernel").unwrap();
    let out = agent()
        .args([
            "sign-slot",
            "--version",
            "3.1.0",
            "--linux",
            "vmlinuz",
            "--options",
            "console=ttyS0",
        ])
        .arg("--key")
        .arg(&private)
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = inplace_agent::manifest::SlotManifest::parse(
        &std::fs::read(dir.path().join("manifest.json")).unwrap(),
    )
    .unwrap();
    let key =
        inplace_agent::manifest::public_key_from_pem(&std::fs::read_to_string(&public).unwrap())
            .unwrap();
    manifest.verify(&key).unwrap();
    assert_eq!(manifest.version, "3.1.0");
}
