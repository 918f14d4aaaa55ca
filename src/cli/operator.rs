//! `exo operator ...`: the in-cluster operator's verbs.

use clap::Subcommand;

use crate::cli::operator_connect;

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Run only the upstream connection (watch and stream to the control plane).
    Connect(operator_connect::ConnectArgs),
}

pub fn run(cmd: OperatorCommand) -> u8 {
    match cmd {
        OperatorCommand::Connect(args) => operator_connect::run(args),
    }
}
