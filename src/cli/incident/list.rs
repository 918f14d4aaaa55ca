//! `exo incident list [-n NAMESPACE] [--tenant T] [-o json|yaml]`.

use clap::Args;
use kube::api::{Api, ListParams};

use super::view::{IncidentView, list_table};
use crate::cli::exit;
use crate::cli::release::cluster::with_client_for;
use crate::cli::release::common::{Output, emit};
use crate::crd::Incident;
use crate::meta::LABEL_TENANT;

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The operator's namespace, where incidents are kept.
    #[arg(long, short = 'n', default_value = super::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Only this tenant's incidents.
    #[arg(long)]
    pub tenant: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

pub fn run(args: &ListArgs) -> u8 {
    if let Some(t) = &args.tenant
        && !crate::names::is_dns1123_label(t)
    {
        eprintln!("exo incident list: --tenant {t:?} is not a tenant name (a DNS label)");
        return exit::UNUSABLE;
    }
    with_client_for("exo incident list", &args.kube, |client| async move {
        let mut params = ListParams::default();
        if let Some(t) = &args.tenant {
            params = params.labels(&format!("{LABEL_TENANT}={t}"));
        }
        match Api::<Incident>::namespaced(client, &args.namespace)
            .list(&params)
            .await
        {
            Ok(list) => {
                let mut views: Vec<IncidentView> =
                    list.items.iter().map(IncidentView::of).collect();
                views.sort_by(|a, b| b.received_at.cmp(&a.received_at).then(a.id.cmp(&b.id)));
                emit(
                    &views,
                    args.output,
                    || list_table(&views),
                    "exo incident list",
                )
            }
            Err(e) => {
                eprintln!(
                    "exo incident list: cannot list Incidents in {}: {e}",
                    args.namespace
                );
                exit::UNUSABLE
            }
        }
    })
}
