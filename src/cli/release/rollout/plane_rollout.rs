//! `exo release rollout --control-plane URL`: the same promotions, wave by
//! wave, waiting on every placed (tenant, cluster) pair through the
//! control plane's fleet view. A release that gives a wave an analysis is
//! refused up front: each cluster runs its own, and their runs are not in
//! the fleet view.

use std::time::{Duration, Instant};

use super::RolloutArgs;
use crate::cli::exit;
use crate::cli::release::cluster::{now_secs, runtime};
use crate::cli::release::common::load_fleet;
use crate::cli::release::plane::Plane;
use crate::cli::release::promotion::{Reader, promote};
use crate::release::WaveName;
use crate::rollout::gates::pairs::pair_standing;

const POLL: Duration = Duration::from_secs(2);

pub(super) fn run(args: &RolloutArgs, plane: &Plane, timeout: Duration) -> u8 {
    let verb = "exo release rollout";
    let rt = match runtime(verb) {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async {
        let stop = crate::shutdown::install();
        tokio::pin!(stop);
        for wave in WaveName::ORDER {
            let fleet = match load_fleet(&args.root.root, "rollout") {
                Ok(f) => f,
                Err(c) => return c,
            };
            if let Some(r) = fleet.release(&args.release)
                && r.value.spec.waves.iter().any(|w| !w.analysis.is_empty())
            {
                eprintln!(
                    "{verb}: {} gives a wave an analysis, whose runs live in each cluster and are not read through the control plane; roll it out with the waves' autoPromote, or per cluster",
                    args.release
                );
                return exit::UNUSABLE;
            }
            println!("== wave {wave}: promoting {}", args.release);
            if let Err(code) = promote(
                &fleet,
                Reader::Plane(plane),
                &args.release,
                wave,
                !args.no_push,
            )
            .await
            {
                println!("== wave {wave}: not promoted; earlier waves are left as they are");
                return code;
            }
            let waited = tokio::select! {
                r = wait(plane, &fleet, wave, &args.release, timeout) => r,
                sig = &mut stop => Err(format!(
                    "interrupted ({}); the clusters go on with the wave, `exo release status --control-plane` follows it",
                    sig.name()
                )),
            };
            match waited {
                Ok(()) => println!("== wave {wave}: verified on {} in every cluster", args.release),
                Err(why) => {
                    println!("== wave {wave}: {why}; stopping");
                    return exit::FINDINGS;
                }
            }
        }
        println!("release {} is verified in every wave and cluster", args.release);
        exit::OK
    })
}

/// Until every pair of `wave` is verified on `release`; a failed pair or
/// the timeout ends it with the reason. Each change of the waiting set is
/// printed once.
async fn wait(
    plane: &Plane,
    fleet: &crate::fleet::Fleet,
    wave: WaveName,
    release: &str,
    timeout: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let pairs = plane
            .pairs(fleet, wave, "exo release rollout")
            .await
            .map_err(|_| "cannot read the fleet view".to_owned())?;
        if pairs.placed.is_empty() {
            return Ok(());
        }
        let standing = pair_standing(release, &pairs, now_secs());
        if let Some(f) = standing.failed.first() {
            return Err(format!(
                "{} failed at {}: {}",
                f.tenant,
                f.step.as_deref().unwrap_or("?"),
                f.message.as_deref().unwrap_or("no message")
            ));
        }
        if standing.all_verified() {
            return Ok(());
        }
        let now: Vec<String> = standing.waiting.iter().map(ToString::to_string).collect();
        let line = now.join("; ");
        if line != last {
            println!("   waiting: {line}");
            last = line;
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "not verified within {}s ({last})",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}
