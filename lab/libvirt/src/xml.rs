//! Domain XML for a lab node (pure; no libvirt needed to render or test it).
//!
//! The domain, checked against libvirt 9.0 and QEMU 7.2 from Debian bookworm:
//! 1. `type='qemu'` (TCG), q35, OVMF: read-only pflash code and a per-node NVRAM copy whose
//!    `template` lets libvirt recreate it.
//! 2. `<features><tcg><tb-cache>` becomes `-accel tcg,tb-size=N`. (A `-accel` in
//!    `<qemu:commandline>` would come after libvirt's own `-accel tcg`, and QEMU uses the first.)
//! 3. `<sysinfo type='fwcfg'>` becomes `-fw_cfg name=opt/rackproof/identity,file=PATH`, and libvirt
//!    gives the file to the QEMU user as it does disks.
//! 4. Networking: QEMU user mode (slirp) with a virtio NIC, declared in `<qemu:commandline>` so
//!    it can carry `hostfwd` for SSH. libvirt 9.0's `<interface type='user'>` takes no
//!    `<portForward>` (that needs the passt backend, which 9.0 refuses as a backend type), so the
//!    NIC is not a libvirt device: it is placed at `pcie.0` slot `0x10`, clear of the root ports
//!    libvirt allocates from slot 1, and gets its boot position as `bootindex`.
//! 5. Serial port 0 is appended to a file (one log across power cycles, so readers keep their
//!    place); serial port 1 is a pty for interactive use (`virsh console --devname serial1`).

use std::fmt::Write as _;
use std::path::Path;

use crate::spec::{BootOrder, DomainSpec, IDENTITY_FW_CFG_NAME};

/// The namespace of Rackproof's element in a domain's `<metadata>`.
pub(crate) const METADATA_NAMESPACE: &str = "https://rackproof.dev/libvirt/1";
/// The attribute of that element naming the process that defined the domain (`PID STARTTIME`).
pub(crate) const OWNER_ATTRIBUTE: &str = "owner";
/// The attribute of that element naming the node's directory.
pub(crate) const DIR_ATTRIBUTE: &str = "dir";

/// The QEMU slot of the user-mode NIC on `pcie.0`.
const NIC_ADDR: &str = "0x10";

/// Renders `spec` as libvirt domain XML.
pub fn domain_xml(spec: &DomainSpec) -> String {
    let (disk_boot, nic_boot) = match spec.boot_order {
        BootOrder::DiskFirst => (1, 2),
        BootOrder::NetworkFirst => (2, 1),
    };
    let mut x = String::new();
    let w = &mut x;
    line(
        w,
        0,
        "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>",
    );
    line(w, 1, &format!("<name>{}</name>", esc(&spec.name)));
    if let Some(uuid) = &spec.uuid {
        line(w, 1, &format!("<uuid>{}</uuid>", esc(uuid)));
    }
    let owner = spec
        .owner
        .as_ref()
        .map(|owner| format!(" {OWNER_ATTRIBUTE}='{}'", esc(owner)))
        .unwrap_or_default();
    line(
        w,
        1,
        &format!(
            "<metadata><rackproof:node xmlns:rackproof='{METADATA_NAMESPACE}'{owner} {DIR_ATTRIBUTE}='{}'/></metadata>",
            path(&spec.dir)
        ),
    );
    line(
        w,
        1,
        &format!("<memory unit='MiB'>{}</memory>", spec.memory_mib),
    );
    line(w, 1, &format!("<vcpu>{}</vcpu>", spec.vcpus));
    if let Some(identity) = &spec.identity {
        line(w, 1, "<sysinfo type='fwcfg'>");
        line(
            w,
            2,
            &format!(
                "<entry name='{}' file='{}'/>",
                IDENTITY_FW_CFG_NAME,
                path(identity)
            ),
        );
        line(w, 1, "</sysinfo>");
    }
    line(w, 1, "<os>");
    line(w, 2, "<type arch='x86_64' machine='q35'>hvm</type>");
    line(
        w,
        2,
        &format!(
            "<loader readonly='yes' type='pflash'>{}</loader>",
            path(&spec.ovmf_code)
        ),
    );
    line(
        w,
        2,
        &format!(
            "<nvram template='{}'>{}</nvram>",
            path(&spec.ovmf_vars_template),
            path(&spec.nvram)
        ),
    );
    line(w, 1, "</os>");
    line(w, 1, "<features>");
    line(w, 2, "<acpi/>");
    line(
        w,
        2,
        &format!(
            "<tcg><tb-cache unit='MiB'>{}</tb-cache></tcg>",
            spec.tb_size_mib
        ),
    );
    line(w, 1, "</features>");
    line(w, 1, "<on_poweroff>destroy</on_poweroff>");
    line(w, 1, "<on_reboot>restart</on_reboot>");
    line(w, 1, "<on_crash>destroy</on_crash>");
    line(w, 1, "<devices>");
    line(w, 2, "<disk type='file' device='disk'>");
    line(w, 3, "<driver name='qemu' type='qcow2'/>");
    line(w, 3, &format!("<source file='{}'/>", path(&spec.disk)));
    line(w, 3, "<target dev='vda' bus='virtio'/>");
    line(w, 3, &format!("<boot order='{disk_boot}'/>"));
    line(w, 2, "</disk>");
    line(w, 2, "<serial type='file'>");
    line(
        w,
        3,
        &format!("<source path='{}' append='on'/>", path(&spec.serial_log)),
    );
    line(w, 3, "<target port='0'/>");
    line(w, 2, "</serial>");
    line(w, 2, "<serial type='pty'>");
    line(w, 3, "<target port='1'/>");
    line(w, 2, "</serial>");
    line(w, 2, "<memballoon model='none'/>");
    line(w, 1, "</devices>");
    line(w, 1, "<qemu:commandline>");
    for arg in nic_args(spec.ssh_port, nic_boot) {
        line(w, 2, &format!("<qemu:arg value='{}'/>", esc(&arg)));
    }
    line(w, 1, "</qemu:commandline>");
    line(w, 0, "</domain>");
    x
}

/// The QEMU arguments of the user-mode NIC.
fn nic_args(ssh_port: Option<u16>, bootindex: u32) -> Vec<String> {
    let mut netdev = "user,id=rpnet0".to_owned();
    if let Some(port) = ssh_port {
        let _ = write!(netdev, ",hostfwd=tcp:127.0.0.1:{port}-:22");
    }
    vec![
        "-netdev".to_owned(),
        netdev,
        "-device".to_owned(),
        format!("virtio-net-pci,netdev=rpnet0,bus=pcie.0,addr={NIC_ADDR},bootindex={bootindex}"),
    ]
}

fn line(out: &mut String, indent: usize, text: &str) {
    for _ in 0..indent {
        out.push_str("  ");
    }
    out.push_str(text);
    out.push('\n');
}

/// Paths are checked to be UTF-8 by [`crate::spec`]; a lossy conversion never changes them here.
fn path(p: &Path) -> String {
    esc(&p.to_string_lossy())
}

/// Escapes text for XML content and single- or double-quoted attributes.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::spec::MachineConfig;

    fn spec(boot: BootOrder) -> DomainSpec {
        let mut c = MachineConfig::new("n1", "/srv/rp/n1", "/srv/rp/n1/disk.qcow2");
        c.identity = Some(PathBuf::from("/srv/rp/n1/identity"));
        c.ssh_port = Some(2222);
        c.domain_spec(Some("b6d8b8f6-ed73-4160-b112-1c23e55782ce"), boot)
            .unwrap()
    }

    #[test]
    fn domain_is_tcg_q35_with_ovmf_and_a_per_node_nvram() {
        let xml = domain_xml(&spec(BootOrder::DiskFirst));
        assert!(xml.starts_with(
            "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
        ));
        assert!(xml.contains("<name>rackproof-n1</name>"));
        assert!(xml.contains("<uuid>b6d8b8f6-ed73-4160-b112-1c23e55782ce</uuid>"));
        assert!(xml.contains("<type arch='x86_64' machine='q35'>hvm</type>"));
        assert!(xml.contains(
            "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>"
        ));
        assert!(xml.contains(
            "<nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'>/srv/rp/n1/OVMF_VARS_4M.fd</nvram>"
        ));
        assert!(xml.contains("<memory unit='MiB'>256</memory>"));
        assert!(xml.contains("<tcg><tb-cache unit='MiB'>64</tb-cache></tcg>"));
    }

    #[test]
    fn disk_serial_and_identity_are_wired() {
        let xml = domain_xml(&spec(BootOrder::DiskFirst));
        assert!(xml.contains("<source file='/srv/rp/n1/disk.qcow2'/>"));
        assert!(xml.contains("<driver name='qemu' type='qcow2'/>"));
        assert!(xml.contains("<serial type='file'>\n      <source path='/srv/rp/n1/serial.log' append='on'/>\n      <target port='0'/>"));
        assert!(xml.contains("<serial type='pty'>\n      <target port='1'/>"));
        assert!(xml.contains("<entry name='opt/rackproof/identity' file='/srv/rp/n1/identity'/>"));
    }

    #[test]
    fn the_metadata_names_the_defining_process_and_the_node_directory() {
        let mut spec = spec(BootOrder::DiskFirst);
        spec.owner = Some("812 99031".to_owned());
        let xml = domain_xml(&spec);
        assert!(xml.contains("<metadata><rackproof:node xmlns:rackproof='https://rackproof.dev/libvirt/1' owner='812 99031' dir='/srv/rp/n1'/></metadata>"), "{xml}");
    }

    #[test]
    fn user_network_forwards_ssh_on_loopback() {
        let xml = domain_xml(&spec(BootOrder::DiskFirst));
        assert!(xml.contains("<qemu:arg value='user,id=rpnet0,hostfwd=tcp:127.0.0.1:2222-:22'/>"));
        assert!(xml.contains(
            "<qemu:arg value='virtio-net-pci,netdev=rpnet0,bus=pcie.0,addr=0x10,bootindex=2'/>"
        ));
        let mut plain = spec(BootOrder::DiskFirst);
        plain.ssh_port = None;
        plain.identity = None;
        let xml = domain_xml(&plain);
        assert!(xml.contains("<qemu:arg value='user,id=rpnet0'/>"));
        assert!(!xml.contains("sysinfo"));
    }

    #[test]
    fn boot_order_puts_the_chosen_device_first() {
        let disk_first = domain_xml(&spec(BootOrder::DiskFirst));
        assert!(disk_first.contains("<boot order='1'/>"));
        assert!(disk_first.contains("bootindex=2'"));
        let net_first = domain_xml(&spec(BootOrder::NetworkFirst));
        assert!(net_first.contains("<boot order='2'/>"));
        assert!(net_first.contains("bootindex=1'"));
    }

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(esc("a&b<c>'d\""), "a&amp;b&lt;c&gt;&apos;d&quot;");
        let mut s = spec(BootOrder::DiskFirst);
        s.disk = PathBuf::from("/srv/it's&<x>.qcow2");
        assert!(domain_xml(&s).contains("<source file='/srv/it&apos;s&amp;&lt;x&gt;.qcow2'/>"));
    }
}
