//! The broken variants that boot (silent, rollback) and the total failure (every entry fails).

use std::time::Duration;

use rackproof_driver::{Power, ResetAction};
use rackproof_qemu::images::{BASE_VERSION, NEW_VERSION};
use rackproof_test_support::node_images;
use tokio::io::AsyncReadExt as _;

use super::{
    BOOT, Node, agent_started, any_init, base_blessed, boot_model, entries, marker, model_of,
    predict, re,
};

/// The first bytes the guest's SSH server sends through the forwarded port.
async fn ssh_banner(node: &Node) -> String {
    let read = async {
        let mut stream =
            tokio::net::TcpStream::connect(("127.0.0.1", node.machine.ssh_port())).await?;
        let mut buf = [0u8; 64];
        let mut got = 0;
        while got < 8 || !buf[..got].contains(&b'\n') {
            let n = stream.read(&mut buf[got..]).await?;
            if n == 0 || got + n == buf.len() {
                got += n;
                break;
            }
            got += n;
        }
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf[..got]).into_owned())
    };
    match node.clock.timeout(Duration::from_secs(30), read).await {
        Ok(Ok(banner)) => banner,
        Ok(Err(e)) => panic!(
            "SSH port {} of the guest: {e}; artifacts in {}",
            node.machine.ssh_port(),
            node.dir.display()
        ),
        Err(_) => panic!(
            "SSH port {} of the guest sent no banner; artifacts in {}",
            node.machine.ssh_port(),
            node.dir.display()
        ),
    }
}

/// `silent`: boots fully and answers SSH, but no agent ever starts, so nothing blesses the
/// entry: it stays on trial, exactly as after one boot of the model.
#[tokio::test]
async fn a_silent_version_boots_and_answers_ssh_but_never_starts_the_agent() {
    let images = node_images();
    let node = Node::new("variant_silent", &images.disk(BASE_VERSION).unwrap());
    let esp = node.machine.esp();
    images
        .slot(&format!("{NEW_VERSION}-silent"))
        .unwrap()
        .install(&esp, Some(3), false)
        .unwrap();
    let model = model_of(&esp);
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &marker(NEW_VERSION, "ssh up")).await;
    node.wait(mark, &re(r"^rackproof-agent: disabled")).await;
    let banner = ssh_banner(&node).await;
    assert!(
        banner.starts_with("SSH-2.0-dropbear"),
        "SSH banner: {banner:?}"
    );
    node.power_button(NEW_VERSION).await;
    let console = node.machine.console();
    assert_eq!(console.count_since(mark, &agent_started()), 0);
    assert_eq!(console.count_since(mark, &any_init()), 1);
    assert_eq!(console.count_since(mark, &marker(NEW_VERSION, "up")), 1);
    let actual = entries(&esp);
    assert_eq!(actual, predict(&model, 1));
    assert_eq!(
        actual,
        [base_blessed(), format!("rackproof-{NEW_VERSION}+2-1.conf")]
    );
    node.finish().await;
}

/// `rollback`: NEW's entry boots (its kernel option and systemd-boot's LoaderEntrySelected name
/// it, as the model selects it), but its os-release says BASE: the console shows BASE.
#[tokio::test]
async fn a_rollback_version_boots_the_new_entry_but_reports_the_old_version() {
    let images = node_images();
    let node = Node::new("variant_rollback", &images.disk(BASE_VERSION).unwrap());
    let esp = node.machine.esp();
    let slot = images.slot(&format!("{NEW_VERSION}-rollback")).unwrap();
    assert_eq!(slot.version, NEW_VERSION);
    slot.install(&esp, Some(3), false).unwrap();
    let model = model_of(&esp);
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    let booted = node.wait(mark, &marker(BASE_VERSION, "booted entry")).await;
    node.wait(mark, &agent_started()).await;
    node.power_button(BASE_VERSION).await;

    let records = boot_model(&model, 1);
    let expected = format!(
        "rackproof-os {BASE_VERSION}: booted entry {} (loader: {})",
        slot.stem(),
        records[0].loader_entry_selected
    );
    assert_eq!(booted, expected);
    assert_eq!(records[0].entry.conf.version.as_deref(), Some(NEW_VERSION));
    let console = node.machine.console();
    assert_eq!(
        console.count_since(mark, &marker(NEW_VERSION, "")),
        0,
        "the rollback slot printed {NEW_VERSION}"
    );
    assert_eq!(console.count_since(mark, &marker(BASE_VERSION, "up")), 1);
    let actual = entries(&esp);
    assert_eq!(actual, entries(&model));
    assert_eq!(
        actual,
        [base_blessed(), format!("rackproof-{NEW_VERSION}+2-1.conf")]
    );
    node.finish().await;
}

/// Total failure: the fallback slot is corrupt (its initrd is garbage, so the kernel panics
/// without an init) and the new slot panics. NEW is tried three times, then the loader falls
/// back to BASE, which fails too, and the node reboots again and again: never up, never an
/// agent. The ESP ends as the model predicts: NEW marked bad, BASE still blessed.
#[tokio::test]
async fn with_every_entry_failing_the_node_reboots_forever() {
    const BOOTS: usize = 6;
    let images = node_images();
    let node = Node::new(
        "total_failure",
        &images.disk(&format!("{BASE_VERSION}-corrupt")).unwrap(),
    );
    let esp = node.machine.esp();
    images
        .slot(&format!("{NEW_VERSION}-panic"))
        .unwrap()
        .install(&esp, Some(3), false)
        .unwrap();
    let model = model_of(&esp);
    let kernel_panic = re(r"Kernel panic - not syncing");
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    let deadline = node.clock.instant() + BOOT * BOOTS as u32;
    while node.machine.console().count_since(mark, &kernel_panic) < BOOTS {
        assert!(
            node.clock.instant() < deadline,
            "fewer than {BOOTS} kernel panics within {:?}; artifacts in {}",
            BOOT * BOOTS as u32,
            node.dir.display()
        );
        node.clock.sleep(Duration::from_secs(1)).await;
    }
    node.machine.shutdown().await.unwrap();

    let console = node.machine.console();
    let boots = node.machine.boots().await as usize;
    assert!(boots >= BOOTS, "{boots} boots");
    assert_eq!(
        console.count_since(mark, &marker(NEW_VERSION, "panicking")),
        3
    );
    assert_eq!(
        console.count_since(mark, &any_init()),
        3,
        "only NEW's initramfs ever ran"
    );
    assert_eq!(console.count_since(mark, &re(r"^rackproof-os \S+: up")), 0);
    assert_eq!(console.count_since(mark, &agent_started()), 0);
    let records = boot_model(&model, boots);
    let selected: Vec<Option<&str>> = records
        .iter()
        .map(|r| r.entry.conf.version.as_deref())
        .collect();
    let mut expected = vec![Some(NEW_VERSION); 3];
    expected.resize(boots, Some(BASE_VERSION));
    assert_eq!(selected, expected, "the model's boot sequence");
    let actual = entries(&esp);
    assert_eq!(actual, entries(&model));
    assert_eq!(
        actual,
        [base_blessed(), format!("rackproof-{NEW_VERSION}+0-3.conf")]
    );
    node.finish().await;
}
