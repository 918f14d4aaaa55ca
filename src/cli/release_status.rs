//! `exo release status`: where every tenant's saga is, per wave, and what
//! the Fleets it syncs from have applied.

use clap::Args;
use kube::api::{Api, ListParams};

use crate::cli::exit;
use crate::cli::release::Output;
use crate::cli::release_cluster::{now_secs, rollouts, with_client};
use crate::cli::release_plan::table;
use crate::crd::Fleet as FleetCr;
use crate::rollout::summary::{TenantState, TenantSummary, summarize_all};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

fn age(secs: Option<i64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) => format!("{}h", s / 3600),
    }
}

pub fn render_status(rows: &[TenantSummary]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|t| {
            let message = match &t.state {
                TenantState::Stale(why) => why.to_string(),
                _ => t.message.clone().unwrap_or_default(),
            };
            vec![
                t.wave.clone(),
                t.tenant.clone(),
                t.applied_release
                    .clone()
                    .unwrap_or_else(|| t.release.clone()),
                t.state.to_string(),
                format!("{}/{}", t.steps_done, t.steps_total),
                t.state.step().unwrap_or("-").to_owned(),
                age(t.age_seconds),
                message,
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
        let rows = summarize_all(&all, now_secs());
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
