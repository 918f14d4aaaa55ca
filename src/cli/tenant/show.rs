//! `exo tenant show NAME [-o json|yaml]`.

use clap::Args;
use kube::api::Api;

use super::view::{TenantView, show_text};
use crate::cli::exit;
use crate::cli::release::cluster::with_client_for;
use crate::cli::release::common::{Output, emit};
use crate::crd::tenant::Tenant;

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The tenant (its folder's name).
    pub name: String,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

pub fn run(args: &ShowArgs) -> u8 {
    with_client_for("exo tenant show", &args.kube, |client| async move {
        match Api::<Tenant>::all(client).get_opt(&args.name).await {
            Ok(Some(t)) => {
                let v = TenantView::of(&t);
                emit(&v, args.output, || show_text(&v), "exo tenant show")
            }
            Ok(None) => {
                eprintln!(
                    "exo tenant show: no Tenant {:?} in the cluster (exo tenant list shows them)",
                    args.name
                );
                exit::UNUSABLE
            }
            Err(e) => {
                eprintln!("exo tenant show: cannot read Tenant {}: {e}", args.name);
                exit::UNUSABLE
            }
        }
    })
}
