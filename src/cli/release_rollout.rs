//! `exo release rollout <release>`: promote through canary, low-risk and
//! fleet, waiting for each wave to be verified, with live progress; stops at
//! the first failed gate or wave.

use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::{RootArg, load_fleet};
use crate::cli::release_cluster::now_secs;
use crate::cli::release_cluster::{fleet_rollouts, with_client};
use crate::cli::release_promote::promote;
use crate::crd::{Rollout, RolloutPhase, StepState};
use crate::fleet::Fleet;
use crate::release::WaveName;

#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The release to roll out through canary, low-risk and fleet.
    pub release: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long)]
    pub no_push: bool,
    /// Give up on a wave that is not verified within this long (e.g. 15m).
    #[arg(long, default_value = "15m")]
    pub timeout: String,
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
    with_client(|client| async move {
        let mp = MultiProgress::new();
        let say = |line: String| {
            if mp.is_hidden() {
                println!("{line}");
            } else {
                let _ = mp.println(line);
            }
        };
        let waves_bar = mp.add(ProgressBar::new(3));
        waves_bar.set_style(
            ProgressStyle::with_template("waves   [{bar:20}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        for wave in WaveName::ORDER {
            // Re-read the repository each wave: promotion commits change it.
            let fleet = match load_fleet(&args.root.root, "rollout") {
                Ok(f) => f,
                Err(c) => return c,
            };
            waves_bar.set_message(format!("{wave}"));
            say(format!("== wave {wave}: promoting {}", args.release));
            if let Err(code) = promote(&fleet, &client, &args.release, wave, !args.no_push).await {
                say(format!(
                    "== wave {wave}: not promoted; earlier waves are left as they are"
                ));
                return code;
            }
            match wait_for_wave(&client, &fleet, &mp, wave, &args.release, timeout, &say).await {
                Ok(()) => say(format!("== wave {wave}: verified on {}", args.release)),
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
    let mut bars: std::collections::BTreeMap<String, ProgressBar> =
        std::collections::BTreeMap::new();
    let style = ProgressStyle::with_template("  {prefix:<12} [{bar:20}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let mut reported: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    loop {
        let all = fleet_rollouts(client, fleet)
            .await
            .map_err(|_| "cannot read Rollouts".to_owned())?;
        let rows: Vec<TenantStatus> = summarize(&all)
            .into_iter()
            .filter(|t| t.wave == wave.as_str())
            .collect();
        let mut done = !rows.is_empty();
        for t in &rows {
            let bar = bars.entry(t.tenant.clone()).or_insert_with(|| {
                let b = mp.add(ProgressBar::new(1));
                b.set_style(style.clone());
                b.set_prefix(t.tenant.clone());
                b
            });
            let on = t.release == release;
            bar.set_length(t.steps_total.max(1) as u64);
            bar.set_position(if on { t.steps_done as u64 } else { 0 });
            bar.set_message(format!(
                "{} {}",
                t.phase,
                t.step.clone().unwrap_or_default()
            ));
            if on && t.phase == "Verified" && reported.insert(t.tenant.clone()) {
                say(format!(
                    "   {wave}/{}: verified ({} steps)",
                    t.tenant, t.steps_total
                ));
            }
            if on && t.phase == "Failed" {
                for b in bars.values() {
                    b.abandon();
                }
                return Err(format!(
                    "tenant {} failed: {}",
                    t.tenant,
                    t.message.clone().unwrap_or_default()
                ));
            }
            if !(on && t.phase == "Verified") {
                done = false;
            }
        }
        if done {
            for b in bars.values() {
                b.finish_and_clear();
            }
            return Ok(());
        }
        if start.elapsed() > timeout {
            let waiting: Vec<String> = rows
                .iter()
                .filter(|t| t.phase != "Verified")
                .map(|t| {
                    format!(
                        "{} {} ({})",
                        t.tenant,
                        t.phase,
                        t.message.clone().unwrap_or_default()
                    )
                })
                .collect();
            return Err(format!(
                "not verified within {}s: {}",
                timeout.as_secs(),
                waiting.join("; ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    pub wave: String,
    pub tenant: String,
    pub release: String,
    pub phase: String,
    pub step: Option<String>,
    pub steps_done: usize,
    pub steps_total: usize,
    /// Seconds since the saga started, or since it was verified.
    pub age_seconds: Option<i64>,
    pub message: Option<String>,
}

fn wave_rank(w: &str) -> usize {
    WaveName::ORDER
        .iter()
        .position(|x| x.as_str() == w)
        .unwrap_or(9)
}

pub fn summarize(all: &[Rollout]) -> Vec<TenantStatus> {
    let now = now_secs();
    let mut out: Vec<TenantStatus> = all
        .iter()
        .map(|r| {
            let s = r.status.clone().unwrap_or_default();
            let since = match s.phase {
                Some(RolloutPhase::Verified) => s.verified_at.as_ref(),
                _ => s.started_at.as_ref(),
            };
            TenantStatus {
                wave: r.spec.wave.clone(),
                tenant: r.spec.tenant.clone(),
                release: s.release.clone().unwrap_or_else(|| r.spec.release.clone()),
                phase: s
                    .phase
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "Pending".into()),
                step: s.current_step.clone(),
                steps_done: s
                    .steps
                    .iter()
                    .filter(|x| x.state == StepState::Done)
                    .count(),
                steps_total: s.steps.len(),
                age_seconds: since.map(|t| now - t.0.as_second()),
                message: s.message.clone(),
            }
        })
        .collect();
    out.sort_by(|a, b| (wave_rank(&a.wave), &a.tenant).cmp(&(wave_rank(&b.wave), &b.tenant)));
    out
}
