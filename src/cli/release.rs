//! `exo release …`: lint, pin, diff and plan release manifests.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::cli::exit;
use crate::fleet::{self, Fleet};
use crate::release::lint;

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Check releases, wave pointers and manifests; one line per problem.
    /// Exit 0 clean, 1 findings, 2 unusable input.
    Lint(LintArgs),
    /// Resolve every image tag in a release to its digest and write it back.
    Pin(super::release_pin::PinArgs),
    /// What changes between two releases, per wave and tenant.
    Diff(super::release_plan::DiffArgs),
    /// What rolling out a release changes from the fleet's current state.
    Plan(super::release_plan::PlanArgs),
    /// Point a wave at a release (a commit to releases/waves.yaml), if the
    /// previous wave's gates pass.
    Promote(super::release_promote::PromoteArgs),
    /// Promote a release through canary, low-risk and fleet, waiting for
    /// each wave to be verified; stops at the first failed gate.
    Rollout(super::release_rollout::RolloutArgs),
    /// Wave x tenant x step: where every tenant's saga is.
    Status(super::release_status::StatusArgs),
    /// Point a wave back at its last release that every tenant verified.
    Rollback(super::release_rollback::RollbackArgs),
    /// Stop the operator applying, pruning and healing a Fleet (fetching
    /// and status go on) until `exo release resume`.
    Suspend(super::release_suspend::SuspendArgs),
    /// Let a suspended Fleet apply, prune and heal again.
    Resume(super::release_suspend::SuspendArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct RootArg {
    /// The fleet repository's root.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Release files to lint; default: everything in the repository.
    pub releases: Vec<PathBuf>,
    #[command(flatten)]
    pub root: RootArg,
    /// Print findings as JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ReleaseCommand) -> u8 {
    match cmd {
        ReleaseCommand::Lint(args) => run_lint(&args),
        ReleaseCommand::Pin(args) => super::release_pin::run(&args),
        ReleaseCommand::Diff(args) => super::release_plan::run_diff(&args),
        ReleaseCommand::Plan(args) => super::release_plan::run_plan(&args),
        ReleaseCommand::Promote(args) => super::release_promote::run(&args),
        ReleaseCommand::Rollout(args) => super::release_rollout::run(&args),
        ReleaseCommand::Status(args) => super::release_status::run(&args),
        ReleaseCommand::Rollback(args) => super::release_rollback::run(&args),
        ReleaseCommand::Suspend(args) => super::release_suspend::run_suspend(&args),
        ReleaseCommand::Resume(args) => super::release_suspend::run_resume(&args),
    }
}

/// Loads the fleet or prints why it is unusable.
pub fn load_fleet(root: &std::path::Path, verb: &str) -> Result<Fleet, u8> {
    fleet::load(root).map_err(|e| {
        for line in e.to_string().lines() {
            eprintln!("exo release {verb}: {line}");
        }
        exit::UNUSABLE
    })
}

fn run_lint(args: &LintArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "lint") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let findings = if args.releases.is_empty() {
        lint::lint_fleet(&fleet)
    } else {
        let mut all = Vec::new();
        for path in &args.releases {
            let wanted = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            match fleet
                .releases
                .iter()
                .find(|r| std::fs::canonicalize(&r.path).is_ok_and(|p| p == wanted))
            {
                Some(r) => all.extend(lint::lint_one(&fleet, r)),
                None => {
                    eprintln!(
                        "exo release lint: {}: not a release under {}/releases",
                        path.display(),
                        args.root.root.display()
                    );
                    return exit::UNUSABLE;
                }
            }
        }
        all
    };
    if args.json {
        match serde_json::to_string_pretty(&findings) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("exo release lint: {e}");
                return exit::UNUSABLE;
            }
        }
    } else {
        for f in &findings {
            println!("{f}");
        }
    }
    if findings.is_empty() {
        eprintln!(
            "exo release lint: {} release(s), {} tenant(s), {} baseline source(s): clean",
            fleet.releases.len(),
            fleet.tenants.len(),
            fleet.baselines.len()
        );
        exit::OK
    } else {
        eprintln!("exo release lint: {} finding(s)", findings.len());
        exit::FINDINGS
    }
}
