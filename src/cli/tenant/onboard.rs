//! `exo tenant onboard NAME --tier T --wave W [--models a,b]
//! [--capabilities c] [--workspace SIZE] [--direct]`: writes `manifests/NAME/tenant.yaml`
//! (with a free uid range) and commits it. By default on the branch
//! `exo/onboard-NAME`, pushed for review, and opened as a pull request when
//! a forge is configured (`--forge`, see [`super::review`]): the merge is
//! the approval. With `--direct`, on the checked-out branch. The fleet is linted with the new
//! file first; a finding refuses the commit and nothing is written.

use std::path::Path;

use clap::Args;

use crate::cli::exit;
use crate::cli::release::common::{RootArg, load_fleet};
use crate::cli::tenant::review::{self, Change, ReviewArgs};
use crate::crd::tenant::TENANT_FILE;
use crate::release::WaveName;
use crate::tenant::declare::{NewTenant, default_wave, free_uid_range, tenant_yaml};

const WHO: &str = "exo tenant onboard";

#[derive(Debug, Args)]
pub struct OnboardArgs {
    /// The tenant: a DNS label, its folder's and namespace's name.
    pub name: String,
    /// A tier of manifests/tiers.yaml.
    #[arg(long)]
    pub tier: String,
    /// The wave it rolls with: canary, low-risk or fleet (default: the wave
    /// the releases give every tenant they do not name). A wave whose
    /// releases name their tenants needs the tenant added there too; lint
    /// says which files.
    #[arg(long)]
    pub wave: Option<WaveName>,
    /// Models its virtual key may call (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Capabilities its broker token grants (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub capabilities: Vec<String>,
    /// Give it an AgentFS named `workspace` of this size (`5Gi`), made by
    /// the onboarding saga.
    #[arg(long, value_name = "SIZE")]
    pub workspace: Option<String>,
    #[command(flatten)]
    pub root: RootArg,
    #[command(flatten)]
    pub review: ReviewArgs,
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Lint findings of the fleet at `root` with `rel` written as `content`,
/// on a copy (the checkout is not touched).
fn lint_with(root: &Path, rel: &str, content: &str) -> Result<Vec<String>, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("no scratch folder: {e}"))?;
    for d in ["manifests", "releases", "configmaps"] {
        let from = root.join(d);
        if from.is_dir() {
            copy_dir(&from, &scratch.path().join(d))
                .map_err(|e| format!("{}: {e}", from.display()))?;
        }
    }
    let path = scratch.path().join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&path, content).map_err(|e| e.to_string())?;
    let fleet = crate::fleet::load(scratch.path()).map_err(|e| e.to_string())?;
    Ok(crate::release::lint::lint_fleet(&fleet)
        .iter()
        .map(ToString::to_string)
        .collect())
}

pub fn run(args: &OnboardArgs) -> u8 {
    if !crate::names::is_dns1123_label(&args.name) {
        eprintln!(
            "{WHO}: tenant name {:?} is not a DNS label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)",
            args.name
        );
        return exit::UNUSABLE;
    }
    let fleet = match load_fleet(&args.root.root, "tenant onboard") {
        Ok(f) => f,
        Err(c) => return c,
    };
    if fleet.tenants.contains_key(&args.name) {
        eprintln!("{WHO}: manifests/{}/ exists already", args.name);
        return exit::UNUSABLE;
    }
    let Some(wave) = args.wave.or_else(|| default_wave(&fleet)) else {
        eprintln!(
            "{WHO}: the releases the waves point at give no common wave to tenants they do not name; say --wave"
        );
        return exit::UNUSABLE;
    };
    let new = NewTenant {
        tier: args.tier.clone(),
        wave: wave.as_str().to_owned(),
        models: args.models.clone(),
        capabilities: args.capabilities.clone(),
        workspace: args.workspace.clone(),
        uid_range: free_uid_range(&fleet),
    };
    let rel = format!("manifests/{}/{TENANT_FILE}", args.name);
    let content = tenant_yaml(&args.name, &new);
    let root = crate::cli::release::cluster::repo_root(&fleet);
    match lint_with(&root, &rel, &content) {
        Ok(findings) if findings.is_empty() => {}
        Ok(findings) => {
            for f in findings {
                eprintln!("{WHO}: {f}");
            }
            eprintln!("{WHO}: nothing was written");
            return exit::FINDINGS;
        }
        Err(e) => {
            eprintln!("{WHO}: the fleet with {rel} does not load: {e}; nothing was written");
            return exit::UNUSABLE;
        }
    }
    let message = format!(
        "Onboard tenant {}: tier {}, wave {}, uids {}-{}\n\nModels: {}\nCapabilities: {}\n\nMerging this is the approval: the operator then runs the onboarding saga.",
        args.name,
        new.tier,
        new.wave,
        new.uid_range.start,
        new.uid_range.end().unwrap_or(new.uid_range.start),
        if new.models.is_empty() {
            "none".into()
        } else {
            new.models.join(", ")
        },
        if new.capabilities.is_empty() {
            "none".into()
        } else {
            new.capabilities.join(", ")
        },
    );
    let done = format!("{rel} committed");
    review::commit(
        &Change {
            who: WHO,
            root: &root,
            changes: &[(rel, Some(content))],
            message: &message,
            branch: format!("exo/onboard-{}", args.name),
            done: &done,
        },
        &args.review,
    )
}
