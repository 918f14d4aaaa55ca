use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = exo::cli::Cli::parse();
    exo::cli::run(cli)
}
