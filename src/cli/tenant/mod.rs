//! `exo tenant …`: one module per verb, and [`view`], what `list` and
//! `show` print (the saga's steps with their owners and states, and
//! whether the status is about the spec the cluster has now).

use clap::Subcommand;

pub mod list;
pub mod offboard;
pub mod onboard;
pub mod review;
pub mod show;
pub mod view;

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Every tenant: phase, saga, current step, wave and tier.
    List(list::ListArgs),
    /// One tenant's saga: each step, its owner, state and message.
    Show(show::ShowArgs),
    /// Declare a new tenant in the fleet repository (its tenant.yaml), on a
    /// branch for review, or on the current branch with --direct.
    Onboard(onboard::OnboardArgs),
    /// Remove a tenant's folder from the fleet repository (the operator
    /// offboards it), or --confirm the namespace's deletion before the
    /// grace period ends.
    Offboard(offboard::OffboardArgs),
}

pub fn run(cmd: TenantCommand) -> u8 {
    match cmd {
        TenantCommand::List(a) => list::run(&a),
        TenantCommand::Show(a) => show::run(&a),
        TenantCommand::Onboard(a) => onboard::run(&a),
        TenantCommand::Offboard(a) => offboard::run(&a),
    }
}
