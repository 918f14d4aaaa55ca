//! `exo tenant list [-o json|yaml]`.

use clap::Args;
use kube::api::{Api, ListParams};

use super::view::{TenantView, list_table};
use crate::cli::exit;
use crate::cli::release::cluster::with_client_for;
use crate::cli::release::common::{Output, emit};
use crate::crd::tenant::Tenant;

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

pub fn run(args: &ListArgs) -> u8 {
    with_client_for("exo tenant list", &args.kube, |client| async move {
        match Api::<Tenant>::all(client)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => {
                let views: Vec<TenantView> = list.items.iter().map(TenantView::of).collect();
                emit(
                    &views,
                    args.output,
                    || list_table(&views),
                    "exo tenant list",
                )
            }
            Err(e) => {
                eprintln!("exo tenant list: cannot list Tenants: {e}");
                exit::UNUSABLE
            }
        }
    })
}
