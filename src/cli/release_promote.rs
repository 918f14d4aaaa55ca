//! `exo release promote <release> --wave <wave>`: point a wave at a release
//! with a commit to `releases/waves.yaml`, once the previous wave's gates
//! pass on what the cluster has verified.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::{RootArg, load_fleet};
use crate::cli::release_cluster::{fleet_rollouts, now_secs, repo_root, request_sync, with_client};
use crate::fleet::{Fleet, WAVES_FILE};
use crate::release::{WaveName, lint, waves_edit};
use crate::rollout::gates;
use crate::rollout::summary::short_id;

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

/// Checks gates and commits the wave pointer. Prints why it refuses.
pub async fn promote(
    fleet: &Fleet,
    client: &kube::Client,
    release: &str,
    wave: WaveName,
    push: bool,
) -> Result<(), u8> {
    let Some(r) = fleet.release(release) else {
        eprintln!("exo release promote: no release {release:?} in releases/");
        return Err(exit::UNUSABLE);
    };
    let findings = lint::lint_one(fleet, r);
    if !findings.is_empty() {
        for f in &findings {
            eprintln!("{f}");
        }
        eprintln!("exo release promote: {release} does not lint clean; refusing");
        return Err(exit::FINDINGS);
    }
    let Some(pointers) = &fleet.waves else {
        eprintln!("exo release promote: releases/{WAVES_FILE} is missing");
        return Err(exit::UNUSABLE);
    };
    let current = pointers.value.spec.get(wave);
    if current.release == release {
        eprintln!("wave {wave} already runs {release}");
        return Ok(());
    }
    let gate = r
        .value
        .spec
        .waves
        .iter()
        .find(|w| w.name == wave)
        .map(|w| w.gates.clone())
        .unwrap_or_default();
    let all = fleet_rollouts(client, fleet).await?;
    if let Err(g) = gates::check(wave, release, &gate, &all, now_secs()) {
        eprintln!("exo release promote: refusing to promote {release} to {wave}: {g}");
        return Err(exit::FINDINGS);
    }
    let next = waves_edit::promoted(current, release);
    let text = std::fs::read_to_string(&pointers.path).map_err(|e| {
        eprintln!("exo release promote: {}: {e}", pointers.path.display());
        exit::UNUSABLE
    })?;
    let edited = waves_edit::set_pointer(&pointers.path, &text, &pointers.value, wave, &next)
        .map_err(|e| {
            eprintln!("exo release promote: {e}");
            exit::UNUSABLE
        })?;
    let rel = format!("releases/{WAVES_FILE}");
    let message = format!(
        "promote {release} to the {wave} wave\n\nPrevious: {}",
        current.release
    );
    match crate::fleet::repo::commit_file(&repo_root(fleet), &rel, &edited, &message, push) {
        Ok(id) => {
            println!("promoted {release} to {wave} (commit {})", short_id(&id));
            request_sync(client).await;
            Ok(())
        }
        Err(e) => {
            eprintln!("exo release promote: {e}");
            Err(exit::UNUSABLE)
        }
    }
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
