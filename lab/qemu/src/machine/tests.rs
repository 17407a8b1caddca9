//! A direct boot's command line, and the names QEMU's files and processes get.

use super::*;

#[test]
fn a_direct_boot_replaces_the_firmware_with_the_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = tmp.path().join("disk.raw");
    std::fs::write(&disk, b"disk").unwrap();
    let boot = DirectBoot {
        kernel: "/k/vmlinuz".into(),
        initrd: Some("/k/initrd.img".into()),
        append: "console=ttyS0 panic=5".into(),
    };
    let direct =
        QemuMachine::create_direct(QemuConfig::new("n1", &disk), Clock::wall(), boot).unwrap();
    let args = direct.args();
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .map(|i| args[i + 1].as_str())
    };
    assert_eq!(after("-kernel"), Some("/k/vmlinuz"));
    assert_eq!(after("-initrd"), Some("/k/initrd.img"));
    assert_eq!(after("-append"), Some("console=ttyS0 panic=5"));
    assert!(
        !args
            .iter()
            .any(|a| a.contains("pflash") || a.contains("bootindex")),
        "{args:?}"
    );
    let uefi = QemuMachine::create(QemuConfig::new("n2", &disk), Clock::wall())
        .unwrap()
        .args();
    assert!(
        uefi.iter().any(|a| a.contains("pflash")) && !uefi.iter().any(|a| a == "-kernel"),
        "{uefi:?}"
    );
}

#[test]
fn names_are_sanitized_for_files_and_processes() {
    assert_eq!(sanitize("node a/1"), "node_a_1");
}
