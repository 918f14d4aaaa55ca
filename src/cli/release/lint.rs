//! `exo release lint [release...]`: every release rule over the fleet (or
//! the named release files), one line per finding; exit 0 clean, 1 on
//! findings, 2 on unusable input. `--verify-signatures` also asks the
//! registries whether each image is signed by one of its release's keys.

use std::path::PathBuf;

use clap::Args;

use crate::cli::exit;
use crate::cli::release::common::{
    RegistryArgs, RootArg, check_signatures, load_fleet, registry_credentials, release_at,
};
use crate::release::lint;

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Release files to lint; default: everything in the repository.
    pub releases: Vec<PathBuf>,
    #[command(flatten)]
    pub root: RootArg,
    /// Print findings as JSON instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Also check in the registries that every image carries a cosign
    /// signature by one of its release's `signatures.keys`.
    #[arg(long)]
    pub verify_signatures: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub fn run(args: &LintArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "lint") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut selected = Vec::new();
    let mut findings = if args.releases.is_empty() {
        selected.extend(fleet.releases.iter());
        lint::lint_fleet(&fleet)
    } else {
        let mut all = Vec::new();
        for path in &args.releases {
            match release_at(&fleet, path) {
                Some(r) => {
                    selected.push(r);
                    all.extend(lint::lint_one(&fleet, r));
                }
                None => {
                    eprintln!(
                        "exo release lint: {}: not a release under {}/releases",
                        path.display(),
                        args.root.root.display()
                    );
                    return exit::UNUSABLE;
                }
            }
        }
        all
    };
    if args.verify_signatures {
        let creds = match registry_credentials("lint") {
            Ok(c) => c,
            Err(code) => return code,
        };
        let runtime = match super::cluster::runtime("exo release lint") {
            Ok(r) => r,
            Err(code) => return code,
        };
        let releases: Vec<_> = selected
            .iter()
            .map(|r| {
                let images = r.value.spec.components.iter().map(|c| c.image.clone());
                (*r, images.collect())
            })
            .collect();
        findings.extend(check_signatures(
            &fleet,
            &releases,
            &creds,
            &args.registry,
            &runtime,
            "lint",
        ));
    }
    if args.json {
        match serde_json::to_string_pretty(&findings) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("exo release lint: {e}");
                return exit::UNUSABLE;
            }
        }
    } else {
        for f in &findings {
            println!("{f}");
        }
    }
    if findings.is_empty() {
        eprintln!(
            "exo release lint: {} release(s), {} tenant(s), {} baseline source(s): clean",
            fleet.releases.len(),
            fleet.tenants.len(),
            fleet.baselines.len()
        );
        exit::OK
    } else {
        eprintln!("exo release lint: {} finding(s)", findings.len());
        exit::FINDINGS
    }
}
