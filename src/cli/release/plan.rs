//! `exo release plan <release> [--prune]`: what rolling out a release
//! changes from the fleet's manifests; with `--prune`, also what the
//! operator would delete ([`prune`], the only part that reads the cluster).

use clap::Args;
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::cluster::with_client;
use crate::cli::release::common::{Output, RootArg, emit, load_fleet, plan_table};
use crate::release::plan::{self, Plan};

pub mod prune;

use prune::PrunePlan;

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The release to plan a rollout of.
    pub release: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
    /// Also list, per tenant, what the operator would prune: the objects
    /// its Rollout's inventory holds that manifests/<tenant>/ no longer
    /// has. Reads the cluster through the kubeconfig; without it plan is
    /// offline.
    #[arg(long)]
    pub prune: bool,
}

/// A plan with its `--prune` part (`-o json|yaml`: the plan's fields and
/// `prune`).
#[derive(Serialize)]
struct WithPrune<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    prune: &'a PrunePlan,
}

pub fn run(args: &PlanArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "plan") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let Some(r) = fleet.release(&args.release) else {
        eprintln!(
            "exo release plan: no release {:?} in releases/",
            args.release
        );
        return exit::UNUSABLE;
    };
    let p = plan::plan(&fleet, &r.value);
    if !args.prune {
        return emit(&p, args.output, || plan_table(&p), "exo release");
    }
    with_client(&args.kube, |client| async move {
        let prune = match prune::read(&client, &fleet).await {
            Ok(x) => x,
            Err(code) => return code,
        };
        let both = WithPrune {
            plan: &p,
            prune: &prune,
        };
        emit(
            &both,
            args.output,
            || format!("{}\n{}", plan_table(&p), prune::render(&prune)),
            "exo release",
        )
    })
}
