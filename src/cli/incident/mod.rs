//! `exo incident …`: the incidents agents reported, as the platform sees
//! them (the technical detail included, which their tenants never see).
//! One module per verb, and [`view`], what they print.

use clap::Subcommand;

pub mod list;
pub mod show;
pub mod view;

#[derive(Debug, Subcommand)]
pub enum IncidentCommand {
    /// Every incident: tenant, agent, severity, state, lane, age, summary.
    List(list::ListArgs),
    /// One incident, with the detail support reads (secrets masked).
    Show(show::ShowArgs),
}

pub fn run(cmd: IncidentCommand) -> u8 {
    match cmd {
        IncidentCommand::List(a) => list::run(&a),
        IncidentCommand::Show(a) => show::run(&a),
    }
}

/// Where incidents are kept by default: the operator's namespace.
pub const DEFAULT_NAMESPACE: &str = "exo-system";
