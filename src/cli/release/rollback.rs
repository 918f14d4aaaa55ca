//! `exo release rollback --wave <wave>`: point a wave back at the newest
//! earlier release that every one of its tenants verified.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::cluster::{fleet_rollouts, repo_root, request_sync, with_client};
use crate::cli::release::common::{RootArg, load_fleet};
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
    with_client(&args.kube, |client| async move {
        let all = match fleet_rollouts(&client, &fleet).await {
            Ok(r) => r,
            Err(code) => return code,
        };
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
            return exit::FINDINGS;
        };
        let next = waves_edit::rolled_back(&current, &target);
        let text = match std::fs::read_to_string(&pointers.path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("exo release rollback: {}: {e}", pointers.path.display());
                return exit::UNUSABLE;
            }
        };
        let edited =
            match waves_edit::set_pointer(&pointers.path, &text, &pointers.value, wave, &next) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("exo release rollback: {e}");
                    return exit::UNUSABLE;
                }
            };
        let message = format!(
            "roll back the {wave} wave to {target}\n\nFrom: {}",
            current.release
        );
        match crate::fleet::repo::commit_file(
            &repo_root(&fleet),
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
                request_sync(&client).await;
                exit::OK
            }
            Err(e) => {
                eprintln!("exo release rollback: {e}");
                exit::UNUSABLE
            }
        }
    })
}
