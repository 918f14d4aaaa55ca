use std::process::ExitCode;

use clap::Parser;

/// jemalloc, tuned in `.cargo/config.toml` to give freed memory back to
/// the system soon (ARCHITECTURE.md, the dependency note on
/// tikv-jemallocator).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = exo::cli::Cli::parse();
    exo::cli::run(cli)
}
