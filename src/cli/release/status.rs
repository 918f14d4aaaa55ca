//! `exo release status`: per Fleet what it applied, per tenant whether it is
//! in sync with git and why not, from the typed summary
//! ([`crate::rollout::summary`]); `-o json|yaml` carry the same values.

use std::fmt::Write as _;

use clap::Args;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::cluster::{analysis_runs, now_secs, rollouts, with_client};
use crate::cli::release::common::{Output, emit};
use crate::cli::table;
use crate::crd::Fleet as FleetCr;
use crate::rollout::summary::analysis::{AnalysisSummary, check_line, newest, summarize_run};
use crate::rollout::summary::{
    FleetSummary, TenantState, TenantSummary, abbrev, short_id, summarize_all, summarize_fleet,
};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
    #[command(flatten)]
    pub plane: crate::cli::release::plane::PlaneArg,
}

/// `--control-plane`: every cluster's tenants, as the control plane has
/// them (`-o json|yaml` print it).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    pub clusters: Vec<crate::wire::fleet::ClusterState>,
    /// One per (tenant, cluster) pair a cluster reports.
    pub pairs: Vec<PairStatus>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairStatus {
    pub cluster: String,
    /// Its cluster's operator is connected now; when not, the state is
    /// its last report and the pair counts as unknown.
    pub online: bool,
    #[serde(flatten)]
    pub tenant: TenantSummary,
}

/// The pairs' table: an offline cluster's pairs say `unknown`.
pub fn render_pairs(s: &FleetStatus) -> String {
    let mut out = String::new();
    let rows: Vec<Vec<String>> = s
        .clusters
        .iter()
        .map(|c| {
            vec![
                c.deployment.clone(),
                if c.online { "online" } else { "offline" }.into(),
                c.last_seen.clone().unwrap_or_else(|| "never".into()),
                s.pairs
                    .iter()
                    .filter(|p| p.cluster == c.deployment)
                    .count()
                    .to_string(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["CLUSTER", "CONNECTED", "LAST SEEN", "TENANTS"],
        &rows,
    ));
    out.push('\n');
    let rows: Vec<Vec<String>> = s
        .pairs
        .iter()
        .map(|p| {
            let t = &p.tenant;
            vec![
                t.wave.clone(),
                t.tenant.clone(),
                p.cluster.clone(),
                t.release.clone(),
                if p.online {
                    state_cell(t)
                } else {
                    format!("unknown (offline; last {})", state_cell(t))
                },
                sync_cell(t),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["WAVE", "TENANT", "CLUSTER", "RELEASE", "STATE", "IN SYNC"],
        &rows,
    ));
    out
}

fn run_plane(args: &StatusArgs, plane: &crate::cli::release::plane::Plane) -> u8 {
    let verb = "exo release status";
    let rt = match crate::cli::release::cluster::runtime(verb) {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async {
        let view = match plane.view(verb).await {
            Ok(v) => v,
            Err(c) => return c,
        };
        let now = now_secs();
        let online = |d: &str| view.cluster(d).is_some_and(|c| c.online);
        let mut pairs: Vec<PairStatus> = view
            .rollouts
            .iter()
            .filter_map(|r| {
                let ro = crate::cli::release::plane::to_rollout(&r.resource)?;
                Some(PairStatus {
                    cluster: r.deployment.clone(),
                    online: online(&r.deployment),
                    tenant: crate::rollout::summary::summarize(&ro, now),
                })
            })
            .collect();
        pairs.sort_by(|a, b| {
            (&a.tenant.wave, &a.tenant.tenant, &a.cluster).cmp(&(
                &b.tenant.wave,
                &b.tenant.tenant,
                &b.cluster,
            ))
        });
        let status = FleetStatus {
            clusters: view.clusters.clone(),
            pairs,
        };
        emit(&status, args.output, || render_pairs(&status), verb)
    })
}

/// The whole answer, as `-o json|yaml` print it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub fleets: Vec<FleetSummary>,
    pub tenants: Vec<TenantSummary>,
    /// The newest analysis run of each Fleet's waves.
    pub analyses: Vec<AnalysisSummary>,
}

/// A run's lines: the phase (or that its status is stale), the message,
/// each check's counts, the action.
fn analysis_lines(a: &AnalysisSummary) -> String {
    let phase = a.phase.map_or_else(
        || "stale (no status for this run's spec yet)".to_owned(),
        |p| p.to_string(),
    );
    let mut out = format!(
        "analysis {}/{} of wave {} on {}: {phase}",
        a.namespace, a.name, a.wave, a.release
    );
    if let Some(age) = a.age_seconds {
        let _ = write!(out, ", started {} ago", table::age(Some(age)));
    }
    out.push('\n');
    if let Some(m) = &a.message {
        let _ = writeln!(out, "  {m}");
    }
    for c in &a.checks {
        let _ = writeln!(out, "  {}", check_line(c));
    }
    if let Some(act) = &a.action {
        let _ = writeln!(out, "  {act}");
    }
    out
}

/// Two lines: which Fleet and where it syncs from; what it applied.
fn fleet_lines(f: &FleetSummary) -> String {
    let mut out = format!("Fleet {}/{}: {} ({})", f.namespace, f.name, f.url, f.branch);
    if f.suspended {
        out.push_str(", suspended");
    }
    if !f.prune {
        out.push_str(", pruning off");
    }
    let _ = write!(
        out,
        "\n  applied {}",
        f.applied_commit.as_deref().map_or("-", short_id)
    );
    if f.fetched_commit.is_some() && f.fetched_commit != f.applied_commit {
        let _ = write!(
            out,
            " (fetched {}, not applied)",
            f.fetched_commit.as_deref().map_or("-", short_id)
        );
    }
    let _ = match f.ready {
        None => write!(out, ", not synced yet"),
        Some(ready) => write!(
            out,
            ", {} {} ago: {}: {}",
            if ready { "Ready" } else { "not Ready" },
            table::age(f.last_sync_age_seconds),
            f.reason.as_deref().unwrap_or("-"),
            f.message.as_deref().unwrap_or("-")
        ),
    };
    out.push('\n');
    out
}

/// STATE: the phase with steps done and the step it is at.
fn state_cell(t: &TenantSummary) -> String {
    match &t.state {
        TenantState::Stale(_) => "stale".into(),
        TenantState::Verified => format!("Verified {}/{}", t.steps_done, t.steps_total),
        state => {
            let mut cell = format!("{state} {}/{}", t.steps_done, t.steps_total);
            if let Some(step) = state.step() {
                let _ = write!(cell, " {step}");
            }
            cell
        }
    }
}

fn sync_cell(t: &TenantSummary) -> String {
    if t.in_sync {
        return "yes".into();
    }
    let why: Vec<&str> = t.out_of_sync.iter().map(|o| o.as_str()).collect();
    format!("no: {}", why.join(", "))
}

fn live_cell(t: &TenantSummary) -> String {
    let last = match &t.last_live_check {
        None => "-".to_owned(),
        Some(c) => format!(
            "{} {}",
            if c.ok { "ok" } else { "mismatch" },
            table::age(c.age_seconds)
        ),
    };
    match t.last_full_check_age_seconds {
        None => last,
        full => format!("{last}, all pods {}", table::age(full)),
    }
}

/// The lines under the table: what does not fit a cell.
fn notes(t: &TenantSummary) -> Vec<String> {
    let mut out = Vec::new();
    match &t.state {
        TenantState::Stale(why) => out.push(format!("stale: {why}")),
        TenantState::Verified => {}
        state => {
            if let Some(m) = &t.message {
                out.push(format!("{}: {m}", state.to_string().to_lowercase()));
            }
        }
    }
    if let Some(m) = &t.content_drift {
        out.push(format!("content drift: {m}"));
    }
    if !t.pending_prunes.is_empty() {
        let names: Vec<String> = t
            .pending_prunes
            .iter()
            .map(|p| format!("{}/{} ({})", p.kind, p.name, p.reason))
            .collect();
        out.push(format!(
            "{} pending prune(s): {}",
            t.pending_prunes.len(),
            names.join(", ")
        ));
    }
    if let Some(d) = &t.last_drift {
        out.push(format!(
            "drift reverted {} ago: {} ({})",
            table::age(d.age_seconds),
            d.object,
            d.fields.join(", ")
        ));
    }
    if let Some(c) = t.last_live_check.as_ref().filter(|c| !c.ok) {
        out.push(format!(
            "live re-check of {} pod(s) {} ago: {}",
            c.pods,
            table::age(c.age_seconds),
            c.message.as_deref().unwrap_or("mismatch")
        ));
    }
    out
}

pub fn render(status: &Status) -> String {
    let mut out = String::new();
    for f in &status.fleets {
        out.push_str(&fleet_lines(f));
    }
    if !status.fleets.is_empty() {
        out.push('\n');
    }
    if status.tenants.is_empty() {
        out.push_str("no Rollouts in the cluster yet\n");
        return out;
    }
    let cells: Vec<Vec<String>> = status
        .tenants
        .iter()
        .map(|t| {
            vec![
                t.wave.clone(),
                t.tenant.clone(),
                t.release.clone(),
                t.applied_commit
                    .as_deref()
                    .map_or_else(|| "-".into(), |c| abbrev(c, 7).to_owned()),
                state_cell(t),
                sync_cell(t),
                live_cell(t),
                table::age(t.age_seconds),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "WAVE", "TENANT", "RELEASE", "COMMIT", "STATE", "IN SYNC", "LIVE", "AGE",
        ],
        &cells,
    ));
    let notes: Vec<String> = status
        .tenants
        .iter()
        .flat_map(|t| {
            notes(t)
                .into_iter()
                .map(move |n| format!("  {}/{}: {n}", t.wave, t.tenant))
        })
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    for a in &status.analyses {
        out.push('\n');
        out.push_str(&analysis_lines(a));
    }
    out
}

pub fn run(args: &StatusArgs) -> u8 {
    match args.plane.plane("exo release status") {
        Ok(Some(plane)) => return run_plane(args, &plane),
        Ok(None) => {}
        Err(c) => return c,
    }
    with_client(&args.kube, |client| async move {
        let all = match rollouts(&client).await {
            Ok(r) => r,
            Err(code) => return code,
        };
        let fleets = match Api::<FleetCr>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                eprintln!("exo release status: cannot list Fleets: {e}");
                return exit::UNUSABLE;
            }
        };
        let runs = match analysis_runs(&client).await {
            Ok(r) => r,
            Err(code) => return code,
        };
        let now = now_secs();
        let status = Status {
            fleets: fleets.iter().map(|f| summarize_fleet(f, now)).collect(),
            tenants: summarize_all(&all, now),
            analyses: newest(&runs)
                .into_iter()
                .map(|r| summarize_run(r, now))
                .collect(),
        };
        emit(
            &status,
            args.output,
            || render(&status),
            "exo release status",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{DriftRecord, InventoryKind, LiveCheck, RolloutPhase, StepState};
    use crate::rollout::summary::fixtures::{RolloutExt, rollout, time};
    use crate::rollout::summary::summarize;

    const NOW: i64 = 1_000_000;

    #[test]
    fn the_table_says_why_a_tenant_is_not_in_sync_within_120_columns() {
        let mut drifted = rollout("globex", "low-risk", "2026.11.1")
            .current(RolloutPhase::Verified)
            .verified_at(NOW - 4000)
            .step("configmaps-published", StepState::Done)
            .drifting("pod agent-analyst: /mnt/baseline/AGENTS.md is not the release's")
            .prune_blocked(InventoryKind::Agent, "old-bot", "finalizer autonomic.sh/fs");
        drifted.status_mut().last_drift = Some(DriftRecord {
            at: Some(time(NOW - 300)),
            object: "Agent/analyst".into(),
            fields: vec!["spec.runtime.image".into()],
        });
        drifted.status_mut().last_live_check = Some(LiveCheck {
            at: Some(time(NOW - 90)),
            pods: 2,
            ok: false,
            message: Some("pod agent-analyst: content differs".into()),
        });
        let mut verified = rollout("platform", "canary", "2026.11.1")
            .current(RolloutPhase::Verified)
            .verified_at(NOW - 600);
        verified.status_mut().last_live_check = Some(LiveCheck {
            at: Some(time(NOW - 30)),
            pods: 3,
            ok: true,
            message: None,
        });
        let tenants = [
            verified,
            rollout("acme", "low-risk", "2026.11.1")
                .current(RolloutPhase::Progressing)
                .started_at(NOW - 20)
                .step("configmaps-published", StepState::Done)
                .step("verified/agent-runtime", StepState::Running)
                .message("1 of 2 pods checked"),
            drifted,
            rollout("umbrella", "fleet", "2026.11.1").stale(RolloutPhase::Verified, "2026.11.0"),
        ];
        let status = Status {
            fleets: vec![FleetSummary {
                namespace: "exo-system".into(),
                name: "example".into(),
                url: "git://127.0.0.1:9418/exo-demo-fleet.git".into(),
                branch: "main".into(),
                applied_commit: Some("0123456789abcdef0123".into()),
                fetched_commit: Some("0123456789abcdef0123".into()),
                ready: Some(true),
                reason: Some("Applied".into()),
                message: Some("5 tenants".into()),
                suspended: true,
                prune: true,
                waves: Default::default(),
                last_sync_age_seconds: Some(10),
            }],
            tenants: tenants.iter().map(|r| summarize(r, NOW)).collect(),
            analyses: vec![AnalysisSummary {
                namespace: "exo-system".into(),
                name: "example-canary-2026.11.1".into(),
                fleet: "example".into(),
                wave: "canary".into(),
                release: "2026.11.1".into(),
                phase: Some(crate::crd::AnalysisPhase::Running),
                message: Some("2 of 6 measurements; next at 12:00:10".into()),
                checks: vec![crate::rollout::summary::analysis::CheckSummary {
                    check: "crashloops".into(),
                    measured: 2,
                    passed: 2,
                    failed: 0,
                    inconclusive: 0,
                    last: Some((
                        crate::analysis::Verdict::Pass,
                        "0 workloads in a crash loop (within the max 0)".into(),
                    )),
                }],
                action: None,
                age_seconds: Some(20),
            }],
        };
        let text = render(&status);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("WAVE"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 5, "{text}");
        for line in table {
            assert!(line.chars().count() <= 120, "{} wide: {line}", line.len());
        }
        println!("{text}");
        let want = [
            "Fleet exo-system/example: git://127.0.0.1:9418/exo-demo-fleet.git (main), suspended\n  applied 0123456789ab, Ready 10s ago: Applied: 5 tenants\n",
            "platform  2026.11.1  c-2026.  Verified 0/0",
            "yes",
            "ok 30s",
            "acme      2026.11.1  c-2026.  Progressing 1/2 verified/agent-runtime  no: progressing",
            "no: drift, prune  mismatch 90s  66m",
            "umbrella  2026.11.1  -        stale",
            "no: stale",
            "  low-risk/acme: progressing: 1 of 2 pods checked",
            "  low-risk/globex: content drift: pod agent-analyst: /mnt/baseline/AGENTS.md is not the release's",
            "  low-risk/globex: 1 pending prune(s): Agent/old-bot (finalizer autonomic.sh/fs)",
            "  low-risk/globex: drift reverted 5m ago: Agent/analyst (spec.runtime.image)",
            "  low-risk/globex: live re-check of 2 pod(s) 90s ago: pod agent-analyst: content differs",
            "  fleet/umbrella: stale: status is for generation 1",
            "analysis exo-system/example-canary-2026.11.1 of wave canary on 2026.11.1: Running, started 20s ago\n  2 of 6 measurements; next at 12:00:10\n  crashloops: 2 measured, 2 passed, 0 failed, 0 inconclusive; last Pass: 0 workloads in a crash loop (within the max 0)\n",
        ];
        for w in want {
            assert!(text.contains(w), "missing {w:?} in\n{text}");
        }
    }
}
