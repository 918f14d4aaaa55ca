//! What the `exo release` verbs share apart from the cluster
//! ([`super::cluster`]): the `--root` and `-o` flags, loading the fleet,
//! finding a release by its file, printing a value as a table, JSON or
//! YAML, and the table of a [`Plan`] (`diff` and `plan` both print one).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::cli::{exit, table};
use crate::fleet::{self, Fleet, Sourced};
use crate::release::Release;
use crate::release::plan::{Change, Plan};

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct RootArg {
    /// The fleet repository's root.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
}

/// How the verbs that ask registries ask them (`pin`, `lint
/// --verify-signatures`).
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Most registry requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub max_in_flight: usize,
    /// Registries (host:port) to reach over plain HTTP; loopback ones always are.
    #[arg(long = "plain-http")]
    pub plain_http: Vec<String>,
}

impl RegistryArgs {
    pub fn options(&self) -> crate::fleet::pin::ResolverOptions {
        crate::fleet::pin::ResolverOptions {
            max_in_flight: self.max_in_flight,
            plain_http: self.plain_http.iter().cloned().collect(),
            ..Default::default()
        }
    }
}

/// The docker config's registry credentials, or why they are unusable.
pub fn registry_credentials(verb: &str) -> Result<crate::fleet::pin::Credentials, u8> {
    crate::fleet::pin::Credentials::from_docker_config().map_err(|e| {
        eprintln!("exo release {verb}: {e}");
        exit::UNUSABLE
    })
}

/// Checks the signatures of each release's `images` (per component: its
/// own pin, or the digest `pin` just resolved) against the release's keys, on
/// `runtime`: one finding per image that does not verify, and one per
/// release that names no keys. Prints what it checked.
pub fn check_signatures(
    fleet: &Fleet,
    releases: &[(&Sourced<Release>, Vec<String>)],
    creds: &crate::fleet::pin::Credentials,
    registry: &RegistryArgs,
    runtime: &tokio::runtime::Runtime,
    verb: &str,
) -> Vec<crate::release::lint::Finding> {
    use crate::release::lint::signatures as rules;
    let mut findings = Vec::new();
    let mut sets = Vec::new();
    let mut checked = Vec::new();
    for (r, images) in releases {
        match rules::keys_for(fleet, r) {
            Ok(keys) => {
                let distinct: std::collections::BTreeSet<&String> = images.iter().collect();
                sets.push((keys, distinct.into_iter().cloned().collect::<Vec<_>>()));
                checked.push((*r, images));
            }
            Err(Some(f)) => findings.push(f),
            // Keys that do not parse: lint's own findings say which.
            Err(None) => {}
        }
    }
    let images: usize = sets.iter().map(|(_, i)| i.len()).sum();
    eprintln!(
        "exo release {verb}: verifying the signatures of {images} image(s) of {} release(s), at most {} at a time",
        sets.len(),
        registry.max_in_flight
    );
    let results = runtime.block_on(crate::signatures::verify_sets(
        &sets,
        creds,
        &registry.options(),
    ));
    for ((r, images), res) in checked.iter().zip(&results) {
        findings.extend(rules::findings(fleet, r, images, res));
    }
    findings
}

/// Loads the fleet or prints why it is unusable.
pub fn load_fleet(root: &Path, verb: &str) -> Result<Fleet, u8> {
    fleet::load(root).map_err(|e| {
        for line in e.to_string().lines() {
            eprintln!("exo release {verb}: {line}");
        }
        exit::UNUSABLE
    })
}

/// The fleet's release whose file is `path` (compared as canonical paths,
/// so `./releases/x.yaml` and an absolute path both match).
pub fn release_at<'a>(fleet: &'a Fleet, path: &Path) -> Option<&'a Sourced<Release>> {
    let wanted = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    fleet
        .releases
        .iter()
        .find(|r| std::fs::canonicalize(&r.path).is_ok_and(|p| p == wanted))
}

/// Prints `value` as `output` asks (the text `table` draws, or JSON or
/// YAML); a value that cannot be written ends the verb with `who: why`.
pub fn emit<T: Serialize>(
    value: &T,
    output: Output,
    table: impl FnOnce() -> String,
    who: &str,
) -> u8 {
    let text = match output {
        Output::Table => Ok(table()),
        Output::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml => crate::yaml::to_string(value).map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => {
            print!("{t}");
            exit::OK
        }
        Err(e) => {
            eprintln!("{who}: {e}");
            exit::UNUSABLE
        }
    }
}

/// A plan or diff as three tables: components in apply order, baseline
/// ConfigMaps, and each tenant's re-points by wave.
pub fn plan_table(p: &Plan) -> String {
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
    if !p.clusters.is_empty() {
        let rows: Vec<Vec<String>> = p
            .clusters
            .iter()
            .map(|c| {
                vec![
                    c.cluster.clone(),
                    c.tenants.len().to_string(),
                    if c.changing.is_empty() {
                        "-".into()
                    } else {
                        c.changing.join(", ")
                    },
                    c.repoints.to_string(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table::render(
            &["CLUSTER", "TENANTS", "CHANGING", "RE-POINTS"],
            &rows,
        ));
    }
    out
}
