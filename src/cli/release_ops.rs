//! `exo release promote|rollout|status|rollback`: moving waves through git,
//! gated on what the cluster has verified.
//!
//! The CLI reads the cluster through the kubeconfig: the `Rollout` of every
//! tenant (the durable saga state) and the `Fleet` it syncs from.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::{Output, RootArg, load_fleet};
use crate::cli::release_plan::table;
use crate::crd::{Fleet as FleetCr, Rollout, RolloutPhase, StepState};
use crate::fleet::{Fleet, WAVES_FILE};
use crate::release::{WaveName, lint, waves_edit};
use crate::rollout::engine::ANNOTATION_SYNC_REQUESTED;
use crate::rollout::gates;

#[derive(Debug, Args)]
pub struct PromoteArgs {
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

#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[arg(long)]
    pub wave: WaveName,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long)]
    pub no_push: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("exo release: cannot start the async runtime: {e}");
            exit::UNUSABLE
        })
}

/// Runs `f` with a kube client from the kubeconfig on a fresh runtime; an
/// unusable runtime or cluster ends the verb with a message.
fn with_client<F, Fut>(f: F) -> u8
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = u8>,
{
    let rt = match runtime() {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async {
        match client().await {
            Ok(c) => f(c).await,
            Err(code) => code,
        }
    })
}

async fn client() -> Result<kube::Client, u8> {
    kube::Client::try_default().await.map_err(|e| {
        eprintln!("exo release: cannot reach the cluster (set KUBECONFIG): {e}");
        exit::UNUSABLE
    })
}

async fn rollouts(client: &kube::Client) -> Result<Vec<Rollout>, u8> {
    Api::<Rollout>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| {
            eprintln!("exo release: cannot list Rollouts: {e}");
            exit::UNUSABLE
        })
}

/// The Rollouts of this fleet's tenants (a cluster may follow several fleets).
async fn fleet_rollouts(client: &kube::Client, fleet: &Fleet) -> Result<Vec<Rollout>, u8> {
    let mut all = rollouts(client).await?;
    all.retain(|r| {
        fleet.tenants.contains_key(&r.spec.tenant)
            && r.metadata.namespace.as_deref() == Some(r.spec.tenant.as_str())
    });
    Ok(all)
}

/// Asks every Fleet to sync now (best effort: the interval catches up anyway).
async fn request_sync(client: &kube::Client) {
    let Ok(list) = Api::<FleetCr>::all(client.clone())
        .list(&ListParams::default())
        .await
    else {
        return;
    };
    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
    for f in list.items {
        let ns = f.metadata.namespace.clone().unwrap_or_default();
        let name = f.metadata.name.clone().unwrap_or_default();
        let patch =
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_SYNC_REQUESTED: stamp}}});
        let _ = Api::<FleetCr>::namespaced(client.clone(), &ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }
}

fn now_secs() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// Checks gates and commits the wave pointer. Prints why it refuses.
async fn promote(
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
    let root = if fleet.root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        fleet.root.clone()
    };
    let message = format!(
        "promote {release} to the {wave} wave\n\nPrevious: {}",
        current.release
    );
    match crate::fleet::repo::commit_file(&root, &rel, &edited, &message, push) {
        Ok(id) => {
            println!(
                "promoted {release} to {wave} (commit {})",
                &id[..id.len().min(12)]
            );
            request_sync(client).await;
            Ok(())
        }
        Err(e) => {
            eprintln!("exo release promote: {e}");
            Err(exit::UNUSABLE)
        }
    }
}

pub fn run_promote(args: &PromoteArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "promote") {
        Ok(f) => f,
        Err(c) => return c,
    };
    with_client(|client| async move {
        match promote(&fleet, &client, &args.release, args.wave, !args.no_push).await {
            Ok(()) => exit::OK,
            Err(code) => code,
        }
    })
}

pub fn run_rollback(args: &RollbackArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "rollback") {
        Ok(f) => f,
        Err(c) => return c,
    };
    let Some(pointers) = fleet.waves.clone() else {
        eprintln!("exo release rollback: releases/{WAVES_FILE} is missing");
        return exit::UNUSABLE;
    };
    with_client(|client| async move {
        let all = match fleet_rollouts(&client, &fleet).await {
            Ok(r) => r,
            Err(code) => return code,
        };
        let wave = args.wave;
        let in_wave: Vec<&Rollout> = all
            .iter()
            .filter(|r| r.spec.wave == wave.as_str())
            .collect();
        let current = pointers.value.spec.get(wave).clone();
        // The newest earlier release every tenant of the wave verified.
        let target = current.history.iter().find(|h| {
            !in_wave.is_empty()
                && in_wave.iter().all(|r| {
                    r.status
                        .as_ref()
                        .is_some_and(|s| s.verified_releases.contains(h))
                })
        });
        let Some(target) = target.cloned() else {
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
        let root = if fleet.root.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            fleet.root.clone()
        };
        let message = format!(
            "roll back the {wave} wave to {target}\n\nFrom: {}",
            current.release
        );
        match crate::fleet::repo::commit_file(
            &root,
            &format!("releases/{WAVES_FILE}"),
            &edited,
            &message,
            !args.no_push,
        ) {
            Ok(id) => {
                println!(
                    "rolled back {wave} from {} to {target} (commit {})",
                    current.release,
                    &id[..id.len().min(12)]
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

fn age(secs: Option<i64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) => format!("{}h", s / 3600),
    }
}

pub fn render_status(rows: &[TenantStatus]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|t| {
            vec![
                t.wave.clone(),
                t.tenant.clone(),
                t.release.clone(),
                t.phase.clone(),
                format!("{}/{}", t.steps_done, t.steps_total),
                t.step.clone().unwrap_or_else(|| "-".into()),
                age(t.age_seconds),
                t.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "WAVE", "TENANT", "RELEASE", "PHASE", "STEPS", "STEP", "AGE", "MESSAGE",
        ],
        &cells,
    )
}

pub fn run_status(args: &StatusArgs) -> u8 {
    with_client(|client| async move {
        let all = match rollouts(&client).await {
            Ok(r) => r,
            Err(code) => return code,
        };
        let rows = summarize(&all);
        let fleets = Api::<FleetCr>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        match args.output {
            Output::Json => match serde_json::to_string_pretty(&serde_json::json!({
                "fleets": fleets.iter().map(|f| serde_json::json!({
                    "name": f.metadata.name, "namespace": f.metadata.namespace, "url": f.spec.url,
                    "status": f.status,
                })).collect::<Vec<_>>(),
                "tenants": rows,
            })) {
                Ok(j) => println!("{j}"),
                Err(e) => {
                    eprintln!("exo release status: {e}");
                    return exit::UNUSABLE;
                }
            },
            Output::Yaml => match crate::fleet::yaml::to_string(&rows) {
                Ok(y) => print!("{y}"),
                Err(e) => {
                    eprintln!("exo release status: {e}");
                    return exit::UNUSABLE;
                }
            },
            Output::Table => {
                for f in &fleets {
                    let st = f.status.clone().unwrap_or_default();
                    let ready = st.conditions.iter().find(|c| c.type_ == "Ready");
                    println!(
                        "Fleet {}/{}: {} at {} ({})",
                        f.metadata.namespace.as_deref().unwrap_or_default(),
                        f.metadata.name.as_deref().unwrap_or_default(),
                        f.spec.url,
                        st.applied_commit
                            .as_deref()
                            .map(|c| &c[..c.len().min(12)])
                            .unwrap_or("-"),
                        ready
                            .map(|c| format!("{}: {}", c.reason, c.message))
                            .unwrap_or_else(|| "not synced yet".into()),
                    );
                }
                print!("{}", render_status(&rows));
            }
        }
        exit::OK
    })
}

/// Promotes and waits, wave by wave; stops at the first failed gate or wave.
pub fn run_rollout(args: &RolloutArgs) -> u8 {
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
