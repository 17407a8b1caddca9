//! systemd-boot boot counting over two slots, modelled exactly on systemd-boot 252, and shared by
//! the node agent (a real ESP), the simulated machine and the image tests so that all three agree.
//!
//! - [`name`]: entry file names `NAME+LEFT-DONE.conf` / `NAME+LEFT.conf` / `NAME.conf`;
//! - [`entry`] and [`loader_conf`]: file contents;
//! - [`menu`]: entry order and default selection (including the `default`-pattern pitfall);
//! - [`boot`]: what the loader does on the ESP at each boot (select, bump the counter, variables);
//! - [`update`]: what the agent does (install with `+3`, make room, bless, mark bad, booted entry);
//! - [`esp`] and [`mem_esp`]: storage, on a directory or in memory with a power-cut fault point.

pub mod boot;
pub mod entry;
pub mod esp;
mod lines;
pub mod loader_conf;
pub mod mem_esp;
pub mod menu;
pub mod name;
pub mod pattern;
pub mod update;
pub mod version;

pub use boot::{BootRecord, Bump, ENTRIES_DIR, boot, entry_files, entry_path, load_menu};
pub use entry::EntryConf;
pub use esp::{DirEntry, DirEsp, Esp, EspError};
pub use loader_conf::{LOADER_CONF_PATH, LoaderConf, Timeout};
pub use mem_esp::MemEsp;
pub use menu::{DefaultReason, LoaderVars, Menu, MenuEntry};
pub use name::{Counter, EntryName, NameError};
pub use update::{
    DEFAULT_TRIES, NewEntry, PAYLOAD_DIR, UpdateError, bless, booted_entry, collect_garbage,
    install_entry, make_room, mark_bad, write_loader_conf,
};
