//! `exo tenant offboard NAME [--direct]`: removes `manifests/NAME/` with a
//! commit (on `exo/offboard-NAME` for review by default); the operator
//! then runs the offboarding saga. The namespace goes only after the
//! tenant's grace period, or at once after `exo tenant offboard NAME
//! --confirm`, which annotates the Tenant and changes nothing in git.

use clap::Args;
use kube::api::{Api, Patch, PatchParams};

use crate::cli::exit;
use crate::cli::release::cluster::{repo_root, with_client_for};
use crate::cli::release::common::{RootArg, load_fleet};
use crate::crd::tenant::Tenant;
use crate::fleet::repo::{Target, commit_changes};
use crate::meta::ANNOTATION_OFFBOARD_CONFIRM;

const WHO: &str = "exo tenant offboard";

#[derive(Debug, Args)]
pub struct OffboardArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The tenant.
    pub name: String,
    #[command(flatten)]
    pub root: RootArg,
    /// Commit on the checked-out branch instead of a review branch.
    #[arg(long)]
    pub direct: bool,
    /// Commit only; do not push to origin.
    #[arg(long)]
    pub no_push: bool,
    /// Let the namespace of a tenant being offboarded go now, before its
    /// grace period ends (its keys are revoked first either way).
    #[arg(long)]
    pub confirm: bool,
}

pub fn run(args: &OffboardArgs) -> u8 {
    if args.confirm {
        return confirm(args);
    }
    let fleet = match load_fleet(&args.root.root, "tenant offboard") {
        Ok(f) => f,
        Err(c) => return c,
    };
    if !fleet.tenants.contains_key(&args.name) {
        eprintln!(
            "{WHO}: the fleet has no tenant {:?} (no manifests/{}/)",
            args.name, args.name
        );
        return exit::UNUSABLE;
    }
    let rel = format!("manifests/{}", args.name);
    let target = if args.direct {
        Target::Current
    } else {
        Target::Branch(format!("exo/offboard-{}", args.name))
    };
    let message = format!(
        "Offboard tenant {}\n\nMerging this is the approval: the operator stops its Rollout, revokes its keys, keeps or deletes its data per storage.retention, and deletes its namespace after offboardGracePeriod (or `exo tenant offboard {} --confirm`). Restoring the folder before then brings the tenant back.",
        args.name, args.name
    );
    match commit_changes(
        &repo_root(&fleet),
        &[(rel.clone(), None)],
        &message,
        &target,
        !args.no_push,
    ) {
        Ok(id) => {
            let short = &id[..id.len().min(12)];
            match target {
                Target::Current => println!("{rel}/ removed ({short})"),
                Target::Branch(b) => println!(
                    "{rel}/ removed ({short}) on branch {b}: open a pull request from it; merging it is the approval"
                ),
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("{WHO}: {e}");
            exit::UNUSABLE
        }
    }
}

fn confirm(args: &OffboardArgs) -> u8 {
    with_client_for(WHO, &args.kube, |client| async move {
        let api = Api::<Tenant>::all(client);
        let t = match api.get_opt(&args.name).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                eprintln!("{WHO}: no Tenant {:?} in the cluster", args.name);
                return exit::UNUSABLE;
            }
            Err(e) => {
                eprintln!("{WHO}: cannot read Tenant {}: {e}", args.name);
                return exit::UNUSABLE;
            }
        };
        if !t.spec.offboarding {
            eprintln!(
                "{WHO}: tenant {} is not being offboarded (its folder is still in git); remove it first",
                args.name
            );
            return exit::UNUSABLE;
        }
        let patch =
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_OFFBOARD_CONFIRM: "true"}}});
        match api
            .patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                println!(
                    "tenant {}: offboarding confirmed; its namespace goes once its keys are revoked",
                    args.name
                );
                exit::OK
            }
            Err(e) => {
                eprintln!("{WHO}: cannot annotate Tenant {}: {e}", args.name);
                exit::UNUSABLE
            }
        }
    })
}
