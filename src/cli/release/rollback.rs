//! `exo release rollback --wave <wave>`: point a wave back at the newest
//! earlier release that every one of its tenants verified.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::cluster::{fleet_rollouts, repo_root, request_sync, runtime, with_client};
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::release::plane::one_cluster_cannot_vouch;
use crate::crd::Rollout;
use crate::fleet::WAVES_FILE;
use crate::release::{WaveName, waves_edit};
use crate::rollout::summary::{short_id, wave_of};

#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    #[arg(long)]
    pub wave: WaveName,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long)]
    pub no_push: bool,
    #[command(flatten)]
    pub plane: crate::cli::release::plane::PlaneArg,
}

pub fn run(args: &RollbackArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "rollback") {
        Ok(f) => f,
        Err(c) => return c,
    };
    let Some(pointers) = fleet.waves.clone() else {
        eprintln!("exo release rollback: releases/{WAVES_FILE} is missing");
        return exit::UNUSABLE;
    };
    match args.plane.plane("exo release rollback") {
        Ok(Some(plane)) => {
            let rt = match runtime("exo release rollback") {
                Ok(r) => r,
                Err(c) => return c,
            };
            rt.block_on(async {
                match plane.all_rollouts(&fleet, "exo release rollback").await {
                    Ok(all) => roll_back(args, &fleet, &pointers, &all).unwrap_or_else(|c| c),
                    Err(c) => c,
                }
            })
        }
        Ok(None) => {
            if let Err(c) = one_cluster_cannot_vouch(&fleet, "exo release rollback") {
                return c;
            }
            with_client(&args.kube, |client| async move {
                let all = match fleet_rollouts(&client, &fleet).await {
                    Ok(r) => r,
                    Err(code) => return code,
                };
                match roll_back(args, &fleet, &pointers, &all) {
                    Ok(code) => {
                        request_sync(&client).await;
                        code
                    }
                    Err(code) => code,
                }
            })
        }
        Err(c) => c,
    }
}

/// Commits the wave's pointer back to the newest release every tenant of
/// the wave verified, from `all` the fleet's Rollouts (of every cluster).
/// `Ok` once committed.
fn roll_back(
    args: &RollbackArgs,
    fleet: &crate::fleet::Fleet,
    pointers: &crate::fleet::Sourced<crate::fleet::release::WavePointers>,
    all: &[Rollout],
) -> Result<u8, u8> {
    let wave = args.wave;
    let in_wave: Vec<&Rollout> = all.iter().filter(|r| wave_of(r) == Some(wave)).collect();
    let current = pointers.value.spec.get(wave).clone();
    // The newest earlier release every tenant of the wave verified.
    let target = crate::rollout::gates::rollback_target(&current, &in_wave);
    let Some(target) = target else {
        eprintln!(
            "exo release rollback: wave {wave} has no earlier release that all its tenants verified (history: {})",
            if current.history.is_empty() {
                "empty".to_owned()
            } else {
                current.history.join(", ")
            }
        );
        return Err(exit::FINDINGS);
    };
    let next = waves_edit::rolled_back(&current, &target);
    let text = std::fs::read_to_string(&pointers.path).map_err(|e| {
        eprintln!("exo release rollback: {}: {e}", pointers.path.display());
        exit::UNUSABLE
    })?;
    let edited = waves_edit::set_pointer(&pointers.path, &text, &pointers.value, wave, &next)
        .map_err(|e| {
            eprintln!("exo release rollback: {e}");
            exit::UNUSABLE
        })?;
    let message = format!(
        "roll back the {wave} wave to {target}\n\nFrom: {}",
        current.release
    );
    match crate::fleet::repo::commit_file(
        &repo_root(fleet),
        &format!("releases/{WAVES_FILE}"),
        &edited,
        &message,
        !args.no_push,
    ) {
        Ok(id) => {
            println!(
                "rolled back {wave} from {} to {target} (commit {})",
                current.release,
                short_id(&id)
            );
            Ok(exit::OK)
        }
        Err(e) => {
            eprintln!("exo release rollback: {e}");
            Err(exit::UNUSABLE)
        }
    }
}
