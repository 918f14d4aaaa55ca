//! `exo release rollout <release>`: promote through canary, low-risk and
//! fleet, waiting for each wave to be verified, with live progress; stops at
//! the first failed gate or wave. Where the release gives a wave an
//! analysis, it waits for the wave's run to end: a pass with `autoPromote`
//! is followed (the operator commits the next promotion), a pass without
//! is promoted here (with `--auto`: left to a person), a failure, a hold or
//! an abort stops it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::cli::exit;
use crate::cli::release::cluster::{
    now_secs, of_fleet, repo_root, run_of, transient, try_analysis_runs, try_rollouts, with_client,
};
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::release::plane::PlaneArg;
use crate::cli::release::promotion::{Reader, promote};
use crate::crd::{AnalysisPhase, Fleet as FleetCr};
use crate::fleet::Fleet;
use crate::release::WaveName;
use crate::rollout::summary::{TenantState, TenantSummary, summarize_all, wave_of};

#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The release to roll out through canary, low-risk and fleet.
    pub release: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long)]
    pub no_push: bool,
    /// Give up on a wave that is not verified within this long (e.g. 15m);
    /// a wave's analysis gets this long again.
    #[arg(long, default_value = "15m")]
    pub timeout: String,
    /// Promote only the canary; then follow what each wave's analysis
    /// decides (the operator promotes or rolls back) instead of promoting.
    #[arg(long)]
    pub auto: bool,
    #[command(flatten)]
    pub plane: PlaneArg,
}

/// How a wave's analysis ended, for the rollout.
enum Judged {
    /// The release gives the wave no analysis.
    NotAnalysed,
    /// Passed; whether the operator promotes the next wave.
    Passed { auto_promote: bool },
}

/// Promotes and waits, wave by wave; stops at the first failed gate or wave.
pub fn run(args: &RolloutArgs) -> u8 {
    let timeout = match crate::release::parse_duration(&args.timeout) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("exo release rollout: --timeout {e}");
            return exit::UNUSABLE;
        }
    };
    match args.plane.plane("exo release rollout") {
        Ok(Some(plane)) => return plane_rollout::run(args, &plane, timeout),
        Ok(None) => {}
        Err(c) => return c,
    }
    with_client(&args.kube, |client| async move {
        let mp = MultiProgress::new();
        let say = |line: String| {
            if mp.is_hidden() {
                println!("{line}");
            } else {
                let _ = mp.println(line);
            }
        };
        // A signal during a promotion waits for its push to finish; one
        // while waiting for a wave stops the wait (the cluster goes on).
        let stop = crate::shutdown::install();
        tokio::pin!(stop);
        let waves_bar = mp.add(ProgressBar::new(3));
        waves_bar.set_style(
            ProgressStyle::with_template("waves   [{bar:20}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Set when the operator promoted this wave itself (autoPromote).
        let mut promoted_by_operator = false;
        for wave in WaveName::ORDER {
            // Re-read the repository each wave: promotion commits change it.
            let fleet = match load_fleet(&args.root.root, "rollout") {
                Ok(f) => f,
                Err(c) => return c,
            };
            waves_bar.set_message(format!("{wave}"));
            if std::mem::take(&mut promoted_by_operator) {
                say(format!(
                    "== wave {wave}: promoted to {} by the operator",
                    args.release
                ));
            } else {
                say(format!("== wave {wave}: promoting {}", args.release));
                if let Err(code) = promote(
                    &fleet,
                    Reader::Cluster(&client),
                    &args.release,
                    wave,
                    !args.no_push,
                )
                .await
                {
                    say(format!(
                        "== wave {wave}: not promoted; earlier waves are left as they are"
                    ));
                    return code;
                }
            }
            let waited = tokio::select! {
                r = wait_for_wave(&client, &fleet, &mp, wave, &args.release, timeout, &say) => r,
                sig = &mut stop => Err(format!(
                    "interrupted ({}); the cluster goes on with the wave, `exo release status` follows it",
                    sig.name()
                )),
            };
            match waited {
                Ok(()) => say(format!("== wave {wave}: verified on {}", args.release)),
                Err(why) => {
                    say(format!("== wave {wave}: {why}; stopping"));
                    waves_bar.abandon();
                    return exit::FINDINGS;
                }
            }
            let judged = tokio::select! {
                r = wait_for_analysis(&client, &fleet, wave, &args.release, timeout, &say) => r,
                sig = &mut stop => Err(format!(
                    "interrupted ({}); the analysis goes on in the cluster, `exo release status` shows it",
                    sig.name()
                )),
            };
            let next = wave.next();
            match judged {
                Ok(Judged::NotAnalysed) => {}
                Ok(Judged::Passed { auto_promote }) => {
                    say(format!(
                        "== wave {wave}: analysis passed on {}",
                        args.release
                    ));
                    if let Some(next) = next {
                        if auto_promote {
                            if let Err(why) =
                                wait_for_pointer(&client, next, &args.release, timeout, &say).await
                            {
                                say(format!("== wave {next}: {why}; stopping"));
                                waves_bar.abandon();
                                return exit::FINDINGS;
                            }
                            promoted_by_operator = true;
                            // The operator's commit is on the remote: take
                            // it, so the next promotion here builds on it.
                            match crate::fleet::repo::fast_forward(&repo_root(&fleet)) {
                                Ok(true) => say(format!(
                                    "   {next}: pulled the operator's promotion into the checkout"
                                )),
                                Ok(false) => {}
                                Err(e) => {
                                    say(format!(
                                        "== wave {next}: cannot take the operator's commit: {e}; stopping"
                                    ));
                                    waves_bar.abandon();
                                    return exit::UNUSABLE;
                                }
                            }
                        } else if args.auto {
                            say(format!(
                                "== wave {wave}: its analysis does not promote by itself (no autoPromote); `exo release promote {} --wave {next}` goes on",
                                args.release
                            ));
                            waves_bar.abandon();
                            return exit::OK;
                        }
                    }
                }
                Err(why) => {
                    say(format!("== wave {wave}: {why}; stopping"));
                    waves_bar.abandon();
                    return exit::FINDINGS;
                }
            }
            waves_bar.inc(1);
        }
        waves_bar.finish_with_message("all waves verified");
        say(format!(
            "release {} is verified in every wave",
            args.release
        ));
        exit::OK
    })
}

/// Waits for the analysis of `wave` on `release`, when the release gives
/// the wave one: its run is created once the wave is verified, and ends
/// passed, failed (the operator rolls the wave back), held or aborted.
async fn wait_for_analysis(
    client: &kube::Client,
    fleet: &Fleet,
    wave: WaveName,
    release: &str,
    timeout: Duration,
    say: &impl Fn(String),
) -> Result<Judged, String> {
    let analysed = fleet
        .release(release)
        .and_then(|r| r.value.spec.wave(wave).map(|w| !w.analysis.is_empty()))
        .unwrap_or(false);
    if !analysed {
        return Ok(Judged::NotAnalysed);
    }
    say(format!(
        "   {wave}: waiting for the wave's analysis of {release}"
    ));
    let start = Instant::now();
    let mut last_message = String::new();
    loop {
        match try_analysis_runs(client).await {
            Ok(runs) => {
                if let Some(run) = run_of(&runs, fleet, wave, release)
                    && let Some(status) = run.current_status()
                {
                    let message = status.message.clone().unwrap_or_default();
                    if message != last_message {
                        say(format!("   {wave}: analysis {}: {message}", status.phase));
                        last_message = message;
                    }
                    let action = status
                        .action
                        .as_ref()
                        .map(|a| format!(" ({:?} {} {})", a.kind, a.wave, a.release))
                        .unwrap_or_default();
                    match status.phase {
                        AnalysisPhase::Running => {}
                        AnalysisPhase::Passed => {
                            return Ok(Judged::Passed {
                                auto_promote: run.spec.auto_promote,
                            });
                        }
                        AnalysisPhase::Failed => {
                            return Err(format!(
                                "analysis failed{action}: {}",
                                status.message.as_deref().unwrap_or("-")
                            ));
                        }
                        AnalysisPhase::Paused => {
                            return Err(format!(
                                "analysis held (Paused): {}",
                                status.message.as_deref().unwrap_or("-")
                            ));
                        }
                        AnalysisPhase::Aborted => {
                            return Err(format!(
                                "analysis aborted: {}",
                                status.message.as_deref().unwrap_or("-")
                            ));
                        }
                    }
                }
            }
            Err(e) if transient(&e) => {}
            Err(e) => return Err(format!("cannot read AnalysisRuns: {e}")),
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "the analysis of {release} did not end within {}s",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until a Fleet applied a commit that points `wave` at `release`
/// (the operator's promotion).
async fn wait_for_pointer(
    client: &kube::Client,
    wave: WaveName,
    release: &str,
    timeout: Duration,
    say: &impl Fn(String),
) -> Result<(), String> {
    say(format!(
        "   {wave}: waiting for the operator to promote {release}"
    ));
    let start = Instant::now();
    loop {
        match kube::Api::<FleetCr>::all(client.clone())
            .list(&kube::api::ListParams::default())
            .await
        {
            Ok(list) => {
                if list.items.iter().any(|f| {
                    f.status
                        .as_ref()
                        .and_then(|s| s.waves.get(wave.as_str()))
                        .is_some_and(|r| r == release)
                }) {
                    return Ok(());
                }
            }
            Err(e) if transient(&e) => {}
            Err(e) => return Err(format!("cannot read Fleets: {e}")),
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "the operator did not promote {release} within {}s",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Where one tenant of the wave stands on the release being rolled out.
enum Progress {
    /// Its current status verified the release, and no live re-check
    /// disagrees.
    Verified,
    /// Its saga failed on the release: why.
    Failed(String),
    /// Anything else: what it is doing (a status for an older spec, a step
    /// running, another release, content drift).
    Waiting(String),
}

fn progress(t: &TenantSummary, release: &str) -> Progress {
    match &t.state {
        TenantState::Stale(why) => Progress::Waiting(format!("stale: {why}")),
        _ if !t.runs(release) => Progress::Waiting(format!(
            "{} on {}",
            t.state,
            t.applied_release.as_deref().unwrap_or("no release yet")
        )),
        TenantState::Failed { .. } => {
            Progress::Failed(t.message.clone().unwrap_or_else(|| "no message".into()))
        }
        TenantState::Verified => match &t.content_drift {
            Some(m) => Progress::Waiting(format!("Verified, but content drift: {m}")),
            None => Progress::Verified,
        },
        state => Progress::Waiting(format!(
            "{state} {}{}",
            state.step().unwrap_or_default(),
            t.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
    }
}

async fn wait_for_wave(
    client: &kube::Client,
    fleet: &Fleet,
    mp: &MultiProgress,
    wave: WaveName,
    release: &str,
    timeout: Duration,
    say: &impl Fn(String),
) -> Result<(), String> {
    let start = Instant::now();
    let mut bars: BTreeMap<String, ProgressBar> = BTreeMap::new();
    let style = ProgressStyle::with_template("  {prefix:<12} [{bar:20}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut unreachable = false;
    loop {
        // The wave goes on in the cluster whether or not we can see it: an
        // apiserver that is down or restarting is waited for (within the
        // wave's timeout), saying so once; a refusal ends the wait.
        let mut all = match try_rollouts(client).await {
            Ok(all) => {
                if std::mem::take(&mut unreachable) {
                    say(format!("   {wave}: the cluster answers again"));
                }
                all
            }
            Err(e) if transient(&e) && start.elapsed() <= timeout => {
                if !unreachable {
                    say(format!(
                        "   {wave}: cannot read Rollouts ({e}); retrying until the wave's timeout"
                    ));
                }
                unreachable = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => return Err(format!("cannot read Rollouts: {e}")),
        };
        of_fleet(&mut all, fleet);
        all.retain(|r| wave_of(r) == Some(wave));
        let rows = summarize_all(&all, now_secs());
        let mut waiting = Vec::new();
        for t in &rows {
            let bar = bars.entry(t.tenant.clone()).or_insert_with(|| {
                let b = mp.add(ProgressBar::new(1));
                b.set_style(style.clone());
                b.set_prefix(t.tenant.clone());
                b
            });
            let p = progress(t, release);
            bar.set_length(t.steps_total.max(1) as u64);
            bar.set_position(if t.runs(release) {
                t.steps_done as u64
            } else {
                0
            });
            match p {
                Progress::Verified => {
                    bar.set_message("Verified");
                    if reported.insert(t.tenant.clone()) {
                        say(format!(
                            "   {wave}/{}: verified ({} steps)",
                            t.tenant, t.steps_total
                        ));
                    }
                }
                Progress::Failed(why) => {
                    for b in bars.values() {
                        b.abandon();
                    }
                    return Err(format!("tenant {} failed: {why}", t.tenant));
                }
                Progress::Waiting(what) => {
                    bar.set_message(what.clone());
                    waiting.push(format!("{} {what}", t.tenant));
                }
            }
        }
        if !rows.is_empty() && waiting.is_empty() {
            for b in bars.values() {
                b.finish_and_clear();
            }
            return Ok(());
        }
        if start.elapsed() > timeout {
            if rows.is_empty() {
                waiting.push(format!("no tenant of wave {wave} has a Rollout"));
            }
            return Err(format!(
                "not verified within {}s: {}",
                timeout.as_secs(),
                waiting.join("; ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

mod plane_rollout;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{RolloutPhase, StepState};
    use crate::rollout::summary::fixtures::{RolloutExt, rollout};
    use crate::rollout::summary::summarize;

    #[test]
    fn only_a_current_verified_status_counts() {
        let cases: Vec<(&str, crate::crd::Rollout, &str)> = vec![
            (
                "current, verified",
                rollout("a", "canary", "r2").current(RolloutPhase::Verified),
                "verified",
            ),
            (
                "verified on r2 for the previous commit",
                rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r2"),
                "waiting: stale: status is for generation 1 (hash h-r2), spec is generation 2 (hash h-r2)",
            ),
            (
                "the spec has not moved to r2 yet",
                rollout("a", "canary", "r1").current(RolloutPhase::Verified),
                "waiting: Verified on r1",
            ),
            (
                "a step running",
                rollout("a", "canary", "r2")
                    .current(RolloutPhase::Progressing)
                    .step("pods-rolled", StepState::Running)
                    .message("1 of 2 pods"),
                "waiting: Progressing pods-rolled: 1 of 2 pods",
            ),
            (
                "verified, with content drift",
                rollout("a", "canary", "r2")
                    .current(RolloutPhase::Verified)
                    .drifting("pod x differs"),
                "waiting: Verified, but content drift: pod x differs",
            ),
            (
                "failed on r2",
                rollout("a", "canary", "r2")
                    .current(RolloutPhase::Failed)
                    .message("live content of pod x"),
                "failed: live content of pod x",
            ),
            (
                "a failure for the previous commit is not this rollout's",
                rollout("a", "canary", "r2").stale(RolloutPhase::Failed, "r2"),
                "waiting: stale: status is for generation 1 (hash h-r2), spec is generation 2 (hash h-r2)",
            ),
        ];
        for (name, r, want) in cases {
            let got = match progress(&summarize(&r, 0), "r2") {
                Progress::Verified => "verified".to_owned(),
                Progress::Failed(m) => format!("failed: {m}"),
                Progress::Waiting(m) => format!("waiting: {m}"),
            };
            assert_eq!(got, want, "{name}");
        }
    }
}
