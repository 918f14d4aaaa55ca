//! `exo release diff <a> <b>` and `exo release plan <release> [--prune]`.

use std::fmt::Write as _;

use clap::Args;
use serde::Serialize;

use crate::cli::exit;
use crate::cli::release::{Output, RootArg, load_fleet};
use crate::cli::release_cluster::with_client;
use crate::cli::release_prune::{self, PrunePlan};
use crate::cli::table;
use crate::release::plan::{self, Change, Plan};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The release to compare from.
    pub from: String,
    /// The release to compare to.
    pub to: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The release to plan a rollout of.
    pub release: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
    /// Also list, per tenant, what the operator would prune: the objects
    /// its Rollout's inventory holds that manifests/<tenant>/ no longer
    /// has. Reads the cluster through the kubeconfig; without it plan is
    /// offline.
    #[arg(long)]
    pub prune: bool,
}

/// A plan with its `--prune` part (`-o json|yaml`: the plan's fields and
/// `prune`).
#[derive(Serialize)]
struct WithPrune<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    prune: &'a PrunePlan,
}

pub fn run_diff(args: &DiffArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "diff") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let (Some(a), Some(b)) = (fleet.release(&args.from), fleet.release(&args.to)) else {
        let missing = if fleet.release(&args.from).is_none() {
            &args.from
        } else {
            &args.to
        };
        eprintln!("exo release diff: no release {missing:?} in releases/");
        return exit::UNUSABLE;
    };
    emit(&plan::diff(&fleet, &a.value, &b.value), args.output)
}

pub fn run_plan(args: &PlanArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "plan") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let Some(r) = fleet.release(&args.release) else {
        eprintln!(
            "exo release plan: no release {:?} in releases/",
            args.release
        );
        return exit::UNUSABLE;
    };
    let p = plan::plan(&fleet, &r.value);
    if !args.prune {
        return emit(&p, args.output);
    }
    with_client(&args.kube, |client| async move {
        let prune = match release_prune::read(&client, &fleet).await {
            Ok(x) => x,
            Err(code) => return code,
        };
        let both = WithPrune {
            plan: &p,
            prune: &prune,
        };
        print_or_fail(format(&both, args.output, || {
            format!("{}\n{}", render_table(&p), release_prune::render(&prune))
        }))
    })
}

fn emit(p: &Plan, output: Output) -> u8 {
    print_or_fail(format(p, output, || render_table(p)))
}

/// `value` as `output` asks: the table `table` draws, or JSON or YAML.
fn format<T: Serialize>(
    value: &T,
    output: Output,
    table: impl FnOnce() -> String,
) -> Result<String, String> {
    match output {
        Output::Table => Ok(table()),
        Output::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml => crate::fleet::yaml::to_string(value).map_err(|e| e.to_string()),
    }
}

fn print_or_fail(text: Result<String, String>) -> u8 {
    match text {
        Ok(t) => {
            print!("{t}");
            exit::OK
        }
        Err(e) => {
            eprintln!("exo release: {e}");
            exit::UNUSABLE
        }
    }
}

fn render_table(p: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Release {}{}\n",
        p.release,
        p.from
            .as_ref()
            .map(|f| format!(" (from {f})"))
            .unwrap_or_else(|| " (from the fleet's manifests)".into())
    );
    let rows: Vec<Vec<String>> = p
        .components
        .iter()
        .map(|c| {
            let change = match c.change {
                Change::Added => "added",
                Change::Removed => "removed",
                Change::Changed => "changed",
                Change::Unchanged => "-",
            };
            vec![
                c.name.clone(),
                c.layer.to_string(),
                c.from
                    .as_ref()
                    .map(|v| v.short())
                    .unwrap_or_else(|| "-".into()),
                c.to.as_ref()
                    .map(|v| v.short())
                    .unwrap_or_else(|| "-".into()),
                change.into(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["COMPONENT (apply order)", "LAYER", "FROM", "TO", "CHANGE"],
        &rows,
    ));
    out.push('\n');
    let rows: Vec<Vec<String>> = p
        .config_maps
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.from.clone().unwrap_or_else(|| "-".into()),
                c.to.clone().unwrap_or_else(|| "-".into()),
                if c.create {
                    "create (immutable)".into()
                } else {
                    "-".into()
                },
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["CONFIGMAP", "FROM", "TO", "ACTION"],
        &rows,
    ));
    out.push('\n');
    let mut rows = Vec::new();
    for w in &p.waves {
        for t in &w.tenants {
            if t.steps.is_empty() {
                rows.push(vec![
                    w.wave.to_string(),
                    t.tenant.clone(),
                    "-".into(),
                    "-".into(),
                    "up to date".into(),
                ]);
            }
            for (i, s) in t.steps.iter().enumerate() {
                rows.push(vec![
                    w.wave.to_string(),
                    t.tenant.clone(),
                    format!("{}", i + 1),
                    format!("{}/{}", s.kind, s.name),
                    s.changes.join("; "),
                ]);
            }
        }
    }
    out.push_str(&table::render(
        &["WAVE", "TENANT", "STEP", "RE-POINT", "CHANGES"],
        &rows,
    ));
    out
}
