//! `exo release promote <release> --wave <wave>`: point a wave at a release
//! with a commit to `releases/waves.yaml`, once the previous wave's gates
//! pass on what the cluster has verified.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::cluster::with_client;
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::release::promotion::promote;
use crate::release::WaveName;

#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The release to promote.
    pub release: String,
    /// The wave to point at it.
    #[arg(long)]
    pub wave: WaveName,
    #[command(flatten)]
    pub root: RootArg,
    /// Commit only; do not push to origin.
    #[arg(long)]
    pub no_push: bool,
}

pub fn run(args: &PromoteArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "promote") {
        Ok(f) => f,
        Err(c) => return c,
    };
    with_client(&args.kube, |client| async move {
        match promote(&fleet, &client, &args.release, args.wave, !args.no_push).await {
            Ok(()) => exit::OK,
            Err(code) => code,
        }
    })
}
