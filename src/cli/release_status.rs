//! `exo release status`: where every tenant's saga is, per wave, and what
//! the Fleets it syncs from have applied.

use clap::Args;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::Output;
use crate::cli::release_cluster::{now_secs, rollouts, with_client};
use crate::cli::release_plan::table;
use crate::crd::{Fleet as FleetCr, Rollout, RolloutPhase, StepState};
use crate::release::WaveName;

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
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

pub fn run(args: &StatusArgs) -> u8 {
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
