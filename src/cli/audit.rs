//! `exo audit`: the tenant isolation audit against the cluster of the
//! kubeconfig; the same checks the operator runs on a schedule.
//! Exit 0 when clean, 1 on findings, 2 when the cluster could not be read.

use std::collections::BTreeSet;
use std::time::Instant;

use clap::{Args, ValueEnum};

use crate::audit::{self, Rule, report};
use crate::cli::exit;
use crate::cli::release::cluster::with_client_for;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RuleArg {
    Placement,
    Network,
    Credentials,
    Mounts,
    Immutability,
}

impl From<RuleArg> for Rule {
    fn from(r: RuleArg) -> Rule {
        match r {
            RuleArg::Placement => Rule::Placement,
            RuleArg::Network => Rule::Network,
            RuleArg::Credentials => Rule::Credentials,
            RuleArg::Mounts => Rule::Mounts,
            RuleArg::Immutability => Rule::Immutability,
        }
    }
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// Only these tenant namespaces (repeatable; default: every namespace
    /// with a Rollout).
    #[arg(short = 'n', long = "namespace")]
    pub namespaces: Vec<String>,
    /// Only these rules (repeatable; default: all).
    #[arg(long = "rule", value_enum)]
    pub rules: Vec<RuleArg>,
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Also print how many API requests the audit made, and how long it took
    /// (on stderr).
    #[arg(long)]
    pub stats: bool,
}

pub fn run(args: AuditArgs) -> u8 {
    with_client_for("exo audit", &args.kube, |client| async move {
        let started = Instant::now();
        let (snap, requests) = match audit::collect(&client).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("exo audit: {e}");
                return exit::UNUSABLE;
            }
        };
        let only: BTreeSet<String> = args.namespaces.iter().cloned().collect();
        let rules: BTreeSet<Rule> = args.rules.iter().map(|r| Rule::from(*r)).collect();
        let findings = audit::check(&snap, &only, &rules);
        let tenants = audit::tenants(&snap, &only);
        match args.output {
            Output::Table => print!("{}", report::table(tenants, &findings)),
            Output::Json => {
                match serde_json::to_string_pretty(&report::Report::new(tenants, &findings)) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("exo audit: cannot encode the report: {e}");
                        return exit::UNUSABLE;
                    }
                }
            }
        }
        if args.stats {
            eprintln!(
                "exo audit: {} LIST request(s), {} pods, {} secrets, {:.3} s",
                requests.lists,
                snap.pods.len(),
                snap.secrets.len(),
                started.elapsed().as_secs_f64()
            );
        }
        if findings.is_empty() {
            exit::OK
        } else {
            exit::FINDINGS
        }
    })
}
