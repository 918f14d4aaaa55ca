//! `exo release promote <release> --wave <wave>`: point a wave at a release
//! with a commit to `releases/waves.yaml`, once the previous wave's gates
//! pass on what the cluster has verified.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::cluster::{runtime, with_client};
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::release::plane::PlaneArg;
use crate::cli::release::promotion::{Reader, promote};
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
    #[command(flatten)]
    pub plane: PlaneArg,
}

pub fn run(args: &PromoteArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "promote") {
        Ok(f) => f,
        Err(c) => return c,
    };
    let plane = match args.plane.plane("exo release promote") {
        Ok(p) => p,
        Err(c) => return c,
    };
    if let Some(plane) = plane {
        let rt = match runtime("exo release promote") {
            Ok(r) => r,
            Err(c) => return c,
        };
        return rt.block_on(async {
            let reader = Reader::Plane(&plane);
            match promote(&fleet, reader, &args.release, args.wave, !args.no_push).await {
                Ok(()) => exit::OK,
                Err(code) => code,
            }
        });
    }
    with_client(&args.kube, |client| async move {
        let reader = Reader::Cluster(&client);
        match promote(&fleet, reader, &args.release, args.wave, !args.no_push).await {
            Ok(()) => exit::OK,
            Err(code) => code,
        }
    })
}
