//! How `exo tenant onboard` and `exo tenant offboard` commit their change:
//! on a review branch pushed to origin (the default), opened as a pull
//! request when a forge is configured (`--forge`/`EXO_FORGE_URL`), or on
//! the checked-out branch with `--direct`. The forge's settings are
//! checked before anything is committed. Running again once the branch
//! exists (say the forge was down) pushes it and opens, or finds, its pull
//! request instead of refusing.

use std::path::Path;

use clap::Args;

use crate::cli::exit;
use crate::fleet::repo::{self, RepoError, Target, commit_changes};
use crate::forge::{Gitea, NewPull, RepoName, Settings};

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Commit on the checked-out branch instead of a review branch.
    #[arg(long)]
    pub direct: bool,
    /// Commit only; do not push to origin (nor open a pull request).
    #[arg(long)]
    pub no_push: bool,
    /// A Gitea-compatible forge to open the review branch's pull request
    /// on. Its token: EXO_FORGE_TOKEN, or EXO_FORGE_TOKEN_FILE naming a
    /// file; the repository: EXO_FORGE_REPO=owner/name, or origin's URL.
    #[arg(long = "forge", value_name = "URL", env = crate::forge::URL_VAR)]
    pub forge: Option<String>,
}

/// One change to commit.
pub struct Change<'a> {
    pub who: &'static str,
    pub root: &'a Path,
    /// Paths and their new content, `None` to remove.
    pub changes: &'a [(String, Option<String>)],
    pub message: &'a str,
    /// The review branch, `exo/<verb>-<tenant>`.
    pub branch: String,
    /// What was done, for the output: `manifests/x/tenant.yaml committed`.
    pub done: &'a str,
}

/// Where a pull request goes, settled before anything is committed.
struct Forge {
    url: String,
    gitea: Gitea,
    rt: tokio::runtime::Runtime,
    repo: RepoName,
    base: String,
}

fn forge(who: &str, args: &ReviewArgs, root: &Path) -> Result<Option<Forge>, u8> {
    if args.direct {
        return Ok(None);
    }
    let settings = Settings::resolve(
        args.forge.as_deref(),
        |k| std::env::var(k).ok(),
        |p| std::fs::read_to_string(p),
    )
    .map_err(|e| {
        eprintln!("{who}: {e}; nothing was written");
        exit::UNUSABLE
    })?;
    let Some(settings) = settings else {
        return Ok(None);
    };
    let co = repo::checkout(root).map_err(|e| {
        eprintln!("{who}: {e}");
        exit::UNUSABLE
    })?;
    let origin = co.origin.unwrap_or_default();
    let unusable = |e: &dyn std::fmt::Display| {
        eprintln!("{who}: {e}; nothing was written");
        exit::UNUSABLE
    };
    let repo = settings.repo_for(&origin).map_err(|e| unusable(&e))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unusable(&format!("cannot start the async runtime: {e}")))?;
    let gitea = Gitea::new(&settings).map_err(|e| unusable(&e))?;
    // A wrong token, repository or URL stops here, before the commit (a
    // commit that is not pushed asks nothing of the forge).
    if !args.no_push {
        rt.block_on(gitea.check_repo(&repo))
            .map_err(|e| unusable(&e))?;
    }
    Ok(Some(Forge {
        url: settings.url,
        gitea,
        rt,
        repo,
        base: co.branch,
    }))
}

/// Commits `change` as `args` say, and opens its pull request when a forge
/// is configured. The exit code.
pub fn commit(change: &Change<'_>, args: &ReviewArgs) -> u8 {
    let who = change.who;
    let forge = match forge(who, args, change.root) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let target = if args.direct {
        Target::Current
    } else {
        Target::Branch(change.branch.clone())
    };
    let pushed = if args.no_push { "" } else { ", pushed" };
    let message = match commit_changes(
        change.root,
        change.changes,
        change.message,
        &target,
        !args.no_push,
    ) {
        Ok(id) => {
            let short = &id[..id.len().min(12)];
            match (&target, &forge) {
                (Target::Current, _) => {
                    let pushed = if args.no_push { "" } else { " and pushed" };
                    println!("{} ({short}){pushed}", change.done);
                    return exit::OK;
                }
                (Target::Branch(b), None) => {
                    println!(
                        "{} ({short}) on branch {b}{pushed}: open a pull request from it; merging it is the approval",
                        change.done
                    );
                    return exit::OK;
                }
                (Target::Branch(b), Some(_)) => {
                    println!("{} ({short}) on branch {b}{pushed}", change.done);
                    change.message.to_owned()
                }
            }
        }
        // An earlier run's branch: with a forge, see it through to a pull
        // request; without one there is nothing more to do than it did.
        Err(RepoError::BranchExists { branch }) if forge.is_some() => {
            let again = if args.no_push {
                Ok(())
            } else {
                repo::push_existing(change.root, &branch)
            };
            match again.and_then(|()| repo::branch_message(change.root, &branch)) {
                Ok(m) => {
                    println!(
                        "branch {branch} exists already (an earlier run's){}",
                        if args.no_push { "" } else { "; pushed" }
                    );
                    m
                }
                Err(e) => {
                    eprintln!("{who}: {e}");
                    return exit::UNUSABLE;
                }
            }
        }
        Err(e) => {
            eprintln!("{who}: {e}");
            return exit::UNUSABLE;
        }
    };
    let Some(forge) = forge else {
        return exit::OK;
    };
    if args.no_push {
        println!(
            "not pushed (--no-push), so no pull request was opened on {}; run again without --no-push to push the branch and open it",
            forge.url
        );
        return exit::OK;
    }
    open_pull(who, &forge, &change.branch, &message)
}

/// Opens (or finds) the pull request from `branch`, and prints it.
fn open_pull(who: &str, forge: &Forge, branch: &str, message: &str) -> u8 {
    let new = NewPull::from_commit(message, branch, &forge.base);
    match forge.rt.block_on(forge.gitea.open_pull(&forge.repo, &new)) {
        Ok(opened) => {
            println!("{opened}");
            exit::OK
        }
        Err(e) => {
            eprintln!(
                "{who}: {e}; the branch {branch} is pushed: run again to open its pull request"
            );
            exit::UNUSABLE
        }
    }
}
