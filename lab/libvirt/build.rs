//! With the `libvirt` feature, checks that libvirt's development files are there before the
//! `virt` crate's own build script fails with a bare pkg-config error, and says how to install them.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LIBVIRT").is_none() {
        return;
    }
    let found = std::process::Command::new("pkg-config")
        .args(["--exists", "libvirt", "libvirt-qemu"])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!(
            "error: the `libvirt` feature of rackproof-libvirt needs libvirt's development files and pkg-config.\n\
             Install them (and start libvirtd) with `ci/start-libvirtd`, or: apt-get install -y libvirt-dev pkg-config"
        );
        std::process::exit(1);
    }
}
