//! `rackproof`: the command-line front end over the harness library.

fn main() -> std::process::ExitCode {
    rackproof_harness::cli::run()
}
