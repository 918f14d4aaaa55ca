//! `exo incident show ID [-n NAMESPACE] [-o json|yaml]`.

use clap::Args;
use kube::api::Api;

use super::view::{IncidentView, detail_text};
use crate::cli::exit;
use crate::cli::release::cluster::with_client_for;
use crate::cli::release::common::{Output, emit};
use crate::crd::Incident;

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The incident's id (`inc-…`), as `exo incident list` and the agent's
    /// answer give it.
    pub id: String,
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The operator's namespace, where incidents are kept.
    #[arg(long, short = 'n', default_value = super::DEFAULT_NAMESPACE)]
    pub namespace: String,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

pub fn run(args: &ShowArgs) -> u8 {
    if !crate::incident::valid_id(&args.id) {
        eprintln!(
            "exo incident show: {:?} is not an incident id (inc- and 24 hex digits)",
            args.id
        );
        return exit::UNUSABLE;
    }
    with_client_for("exo incident show", &args.kube, |client| async move {
        match Api::<Incident>::namespaced(client, &args.namespace)
            .get_opt(&args.id)
            .await
        {
            Ok(Some(inc)) => {
                let v = IncidentView::of(&inc);
                emit(&v, args.output, || detail_text(&v), "exo incident show")
            }
            Ok(None) => {
                eprintln!(
                    "exo incident show: no incident {} in {}",
                    args.id, args.namespace
                );
                exit::UNUSABLE
            }
            Err(e) => {
                eprintln!(
                    "exo incident show: cannot read Incident {}/{}: {e}",
                    args.namespace, args.id
                );
                exit::UNUSABLE
            }
        }
    })
}
