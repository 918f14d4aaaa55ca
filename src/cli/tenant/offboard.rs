//! `exo tenant offboard NAME [--direct]`: removes `manifests/NAME/` with a
//! commit (on `exo/offboard-NAME` for review by default, a pull request
//! when a forge is configured, see [`super::review`]); the operator then
//! runs the offboarding saga once it is merged. The namespace goes only after the
//! tenant's grace period, or at once after `exo tenant offboard NAME
//! --confirm`, which annotates the Tenant and changes nothing in git.

use clap::Args;
use kube::api::{Api, Patch, PatchParams};

use crate::cli::exit;
use crate::cli::release::cluster::{repo_root, with_client_for};
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::tenant::review::{self, Change, ReviewArgs};
use crate::crd::tenant::Tenant;
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
    #[command(flatten)]
    pub review: ReviewArgs,
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
    let message = format!(
        "Offboard tenant {}\n\nMerging this is the approval: the operator stops its Rollout, revokes its keys, keeps or deletes its data per storage.retention, and deletes its namespace after offboardGracePeriod (or `exo tenant offboard {} --confirm`). Restoring the folder before then brings the tenant back.",
        args.name, args.name
    );
    let done = format!("{rel}/ removed");
    review::commit(
        &Change {
            who: WHO,
            root: &repo_root(&fleet),
            changes: &[(rel, None)],
            message: &message,
            branch: format!("exo/offboard-{}", args.name),
            done: &done,
        },
        &args.review,
    )
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
