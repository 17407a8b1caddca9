//! The rack's inventory for a run on backend `physical`: where it comes from, and what it must
//! say before the run starts.

use rackproof_lab::physical::InventoryFile;

use crate::load::LoadedScenario;

/// Why the rack's inventory cannot serve a run on backend `physical`.
#[derive(Debug, thiserror::Error)]
pub enum RackInventoryError {
    /// Neither the command line nor the scenario names an inventory.
    #[error(
        "it needs the rack's inventory: set `lab.inventory` in the scenario or give `rackproof run --inventory FILE`"
    )]
    NotGiven,
    /// The inventory file could not be read or parsed.
    #[error(transparent)]
    Load(#[from] rackproof_lab::physical::InventoryError),
    /// The inventory lacks a node the scenario names.
    #[error(transparent)]
    MissingNode(#[from] rackproof_lab::physical::UnknownNode),
    /// The inventory does not say where the nodes reach this machine.
    #[error(
        "inventory {} has no `harness` section; add `harness: {{address: IP-OR-NAME}}` with the address the nodes reach this machine at",
        path.display()
    )]
    NoHarness { path: std::path::PathBuf },
}

/// The rack's inventory for a run on backend `physical`: `command_line`'s, else the scenario's
/// `lab.inventory` (relative to the scenario file); it must list every node the scenario names.
pub fn rack_inventory(
    loaded: &LoadedScenario,
    command_line: Option<&std::path::Path>,
) -> Result<InventoryFile, RackInventoryError> {
    let path = match (command_line, &loaded.scenario.lab.inventory) {
        (Some(path), _) => path.to_owned(),
        (None, Some(path)) => loaded
            .path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(path),
        (None, None) => return Err(RackInventoryError::NotGiven),
    };
    let inventory = InventoryFile::load(&path)?;
    inventory.select(&loaded.scenario.lab.node_names())?;
    if inventory.inventory.harness.is_none() {
        return Err(RackInventoryError::NoHarness { path });
    }
    Ok(inventory)
}
