//! `exo release …`: one module per verb (`suspend` serves `resume` too:
//! the same flags, the other value of `spec.suspend`), and what the verbs
//! share: [`common`] (flags, output, loading the fleet, the plan's table),
//! [`cluster`] (a client and what they read and ask of the cluster) and
//! [`promotion`] (the gated commit both `promote` and `rollout` make),
//! [`plane`] (`--control-plane`: every cluster's Rollouts). A
//! verb module imports those, never another verb.

use clap::Subcommand;

pub mod cluster;
pub mod common;
pub mod diff;
pub mod lint;
pub mod pin;
pub mod plan;
pub mod plane;
pub mod promote;
pub mod promotion;
pub mod rollback;
pub mod rollout;
pub mod status;
pub mod suspend;

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Check releases, wave pointers and manifests; one line per problem.
    /// Exit 0 clean, 1 findings, 2 unusable input.
    Lint(lint::LintArgs),
    /// Resolve every image tag in a release to its digest and write it back.
    Pin(pin::PinArgs),
    /// What changes between two releases, per wave and tenant.
    Diff(diff::DiffArgs),
    /// What rolling out a release changes from the fleet's current state.
    Plan(plan::PlanArgs),
    /// Point a wave at a release (a commit to releases/waves.yaml), if the
    /// previous wave's gates pass.
    Promote(promote::PromoteArgs),
    /// Promote a release through canary, low-risk and fleet, waiting for
    /// each wave to be verified; stops at the first failed gate.
    Rollout(rollout::RolloutArgs),
    /// Wave x tenant x step: where every tenant's saga is.
    Status(status::StatusArgs),
    /// Point a wave back at its last release that every tenant verified.
    Rollback(rollback::RollbackArgs),
    /// Stop the operator applying, pruning and healing a Fleet (fetching
    /// and status go on) until `exo release resume`.
    Suspend(suspend::SuspendArgs),
    /// Let a suspended Fleet apply, prune and heal again.
    Resume(suspend::SuspendArgs),
}

pub fn run(cmd: ReleaseCommand) -> u8 {
    match cmd {
        ReleaseCommand::Lint(args) => lint::run(&args),
        ReleaseCommand::Pin(args) => pin::run(&args),
        ReleaseCommand::Diff(args) => diff::run(&args),
        ReleaseCommand::Plan(args) => plan::run(&args),
        ReleaseCommand::Promote(args) => promote::run(&args),
        ReleaseCommand::Rollout(args) => rollout::run(&args),
        ReleaseCommand::Status(args) => status::run(&args),
        ReleaseCommand::Rollback(args) => rollback::run(&args),
        ReleaseCommand::Suspend(args) => suspend::run_suspend(&args),
        ReleaseCommand::Resume(args) => suspend::run_resume(&args),
    }
}
