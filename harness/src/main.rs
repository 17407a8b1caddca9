//! `rackproof`: the command-line front end over the harness library.

/// mimalloc rather than the system allocator: a simulated rollout allocates and frees millions of
/// small JSON values, and glibc's malloc spent a third of the 1,000-node benchmark consolidating
/// its free lists (docs/performance.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rackproof_harness::cli::run()
}
