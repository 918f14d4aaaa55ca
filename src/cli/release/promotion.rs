//! The gated promotion `exo release promote` makes and `exo release
//! rollout` makes wave by wave: the release lints clean, the previous
//! wave's gates pass on what the cluster has verified, then one commit to
//! `releases/waves.yaml` and a sync request. Its messages name `promote`
//! whichever verb runs it.

use crate::cli::exit;
use crate::cli::release::cluster::{
    analysis_runs, fleet_rollouts, now_secs, repo_root, request_sync, run_of,
};
use crate::cli::release::plane::{Plane, one_cluster_cannot_vouch};
use crate::fleet::{Fleet, WAVES_FILE};
use crate::release::{WaveName, lint, waves_edit};
use crate::rollout::gates;
use crate::rollout::summary::short_id;

/// Where the gate reads the Rollouts: the kubeconfig's cluster, or every
/// cluster through the control plane.
#[derive(Clone, Copy)]
pub enum Reader<'a> {
    Cluster(&'a kube::Client),
    Plane(&'a Plane),
}

/// Checks gates and commits the wave pointer. Prints why it refuses.
pub async fn promote(
    fleet: &Fleet,
    reader: Reader<'_>,
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
    let analysed = wave.previous().filter(|prev| {
        r.value
            .spec
            .wave(*prev)
            .is_some_and(|w| !w.analysis.is_empty())
    });
    let gated = match reader {
        Reader::Cluster(client) => {
            one_cluster_cannot_vouch(fleet, "exo release promote")?;
            let all = fleet_rollouts(client, fleet).await?;
            // The gating wave's analysis, when the release gives it one.
            let runs;
            let analysis = match analysed {
                Some(prev) => {
                    runs = analysis_runs(client).await?;
                    gates::Analysis::Run(run_of(&runs, fleet, prev, release))
                }
                None => gates::Analysis::None,
            };
            gates::check(wave, release, &gate, &all, analysis, now_secs())
        }
        Reader::Plane(plane) => {
            if let Some(prev) = analysed {
                // Each cluster runs its own analysis of the wave; their
                // runs are not in the fleet view, so none is taken as passed.
                eprintln!(
                    "exo release promote: refusing to promote {release} to {wave}: gate analysis: wave {prev} has an analysis, whose runs live in each cluster and are not read through the control plane; promote it with the wave's autoPromote, or per cluster"
                );
                return Err(exit::FINDINGS);
            }
            match wave.previous() {
                None => Ok(()),
                Some(prev) => {
                    let pairs = plane.pairs(fleet, prev, "exo release promote").await?;
                    gates::pairs::check_pairs(
                        wave,
                        release,
                        &gate,
                        &pairs,
                        gates::Analysis::None,
                        now_secs(),
                    )
                }
            }
        }
    };
    if let Err(g) = gated {
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
            match reader {
                Reader::Cluster(client) => request_sync(client).await,
                Reader::Plane(_) => println!(
                    "each cluster's operator applies it at its next sync (or at once with a push hook)"
                ),
            }
            Ok(())
        }
        Err(e) => {
            eprintln!("exo release promote: {e}");
            Err(exit::UNUSABLE)
        }
    }
}
