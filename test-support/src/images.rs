//! The node images the QEMU tests boot.

use rackproof_qemu::Images;

/// The images `ci/build-images` built in this workspace; panics saying what is missing (QEMU,
/// OVMF, the images) and how to get it.
pub fn node_images() -> Images {
    if let Err(e) = rackproof_qemu::Prerequisites::find() {
        panic!("{e}");
    }
    Images::build(&crate::workspace_root())
        .unwrap_or_else(|e| panic!("{e}\n(build the images with: ci/build-images)"))
}
