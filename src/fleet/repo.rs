//! The user's checkout of the fleet repository: promotion and rollback are
//! commits to `releases/waves.yaml`, pushed to `origin`; onboarding and
//! offboarding a tenant are commits of its folder, on the current branch
//! (`--direct`) or on a branch of their own for review.
//!
//! All or nothing: when the push is refused (someone pushed first, or
//! credentials fail), the local commit is undone and the file restored.
//!
//! A commit is signed as git would sign it when the git config sets
//! `commit.gpgsign` ([`sign`]), so a Fleet that applies only signed commits
//! takes it.

use std::path::{Path, PathBuf};

use git2::{PushOptions, RemoteCallbacks, Repository, ResetType, Signature};

pub mod sign;

/// git2's own message is what the user reads (its `Display` adds class and
/// code numbers); the git2 error stays the `#[source]`.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{path}: not a git repository: {}", .source.message())]
    NotARepo {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("{path} has uncommitted changes; commit or stash them first")]
    Dirty { path: PathBuf },
    #[error(
        "push to {remote} refused: {}; nothing was changed (fetch, rebase and try again)",
        .source.message()
    )]
    Push {
        remote: String,
        #[source]
        source: git2::Error,
    },
    /// The remote took the push but refused the branch update.
    #[error(
        "push to {remote} refused: {message}; nothing was changed (fetch, rebase and try again)"
    )]
    Rejected { remote: String, message: String },
    /// The checked-out branch and `origin`'s both have commits the other
    /// has not.
    #[error("branch {branch} and origin/{branch} have diverged; pull and resolve it first")]
    Diverged { branch: String },
    #[error("branch {branch} exists already; delete it or merge it first")]
    BranchExists { branch: String },
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
    /// `commit.gpgsign` is set and the commit could not be signed.
    #[error("signing the commit: {0}")]
    Sign(#[from] sign::SignError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `content` to `rel` (relative to the repository root), commits it
/// with `message`, and pushes the branch to `origin` unless `push` is false.
/// Returns the new commit id.
pub fn commit_file(
    root: &Path,
    rel: &str,
    content: &str,
    message: &str,
    push: bool,
) -> Result<String, RepoError> {
    let repo = open(root)?;
    let path = root.join(rel);
    let status = repo.status_file(Path::new(rel))?;
    if status.intersects(
        git2::Status::WT_MODIFIED
            | git2::Status::INDEX_MODIFIED
            | git2::Status::WT_NEW
            | git2::Status::INDEX_NEW,
    ) {
        return Err(RepoError::Dirty { path });
    }
    let original = std::fs::read_to_string(&path).map_err(|e| RepoError::Io {
        path: path.clone(),
        source: e,
    })?;
    let head = repo.head()?;
    let branch = head.shorthand().unwrap_or("main").to_owned();
    let parent = head.peel_to_commit()?;
    std::fs::write(&path, content).map_err(|e| RepoError::Io {
        path: path.clone(),
        source: e,
    })?;
    let mut index = repo.index()?;
    index.add_path(Path::new(rel))?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = repo
        .signature()
        .or_else(|_| Signature::now("exo", "exo@localhost"))?;
    let id = sign::commit(&repo, Some("HEAD"), &sig, message, &tree, &[&parent])?;
    if push && let Err(e) = push_branch(&repo, &branch) {
        // Undo: the branch back to its parent, the file as it was.
        repo.reset(parent.as_object(), ResetType::Mixed, None)?;
        let _ = std::fs::write(&path, original);
        return Err(e);
    }
    Ok(id.to_string())
}

/// Where [`commit_changes`] commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// On the checked-out branch; the working tree follows.
    Current,
    /// On a new branch from HEAD, for review; the working tree and the
    /// checked-out branch stay as they are.
    Branch(String),
}

/// Commits `changes` (a path relative to the root, and its new content or
/// `None` to remove it, a folder with everything in it) with `message` on
/// `target`, and pushes that branch to `origin` unless `push` is false.
/// All or nothing: a refused push leaves the repository as it was. Returns
/// the new commit id.
pub fn commit_changes(
    root: &Path,
    changes: &[(String, Option<String>)],
    message: &str,
    target: &Target,
    push: bool,
) -> Result<String, RepoError> {
    let repo = open(root)?;
    for (rel, _) in changes {
        let dirty = repo
            .statuses(Some(
                git2::StatusOptions::new()
                    .pathspec(rel)
                    .include_untracked(true)
                    .recurse_untracked_dirs(true),
            ))?
            .iter()
            .any(|e| e.status() != git2::Status::CURRENT && e.status() != git2::Status::IGNORED);
        if dirty {
            return Err(RepoError::Dirty {
                path: root.join(rel),
            });
        }
    }
    let head = repo.head()?;
    let current = head.shorthand().unwrap_or("main").to_owned();
    let parent = head.peel_to_commit()?;
    let mut index = git2::Index::new()?;
    index.read_tree(&parent.tree()?)?;
    for (rel, content) in changes {
        match content {
            Some(text) => {
                let blob = repo.blob(text.as_bytes())?;
                let entry = git2::IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100_644,
                    uid: 0,
                    gid: 0,
                    file_size: u32::try_from(text.len()).unwrap_or(u32::MAX),
                    id: blob,
                    flags: 0,
                    flags_extended: 0,
                    path: rel.as_bytes().to_vec(),
                };
                index.add(&entry)?;
            }
            None => {
                index.remove_dir(Path::new(rel), 0)?;
                let _ = index.remove_path(Path::new(rel));
            }
        }
    }
    let tree = repo.find_tree(index.write_tree_to(&repo)?)?;
    let sig = repo
        .signature()
        .or_else(|_| Signature::now("exo", "exo@localhost"))?;
    let (refname, branch) = match target {
        Target::Current => (format!("refs/heads/{current}"), current.clone()),
        Target::Branch(b) => {
            if repo.find_branch(b, git2::BranchType::Local).is_ok() {
                return Err(RepoError::BranchExists { branch: b.clone() });
            }
            (format!("refs/heads/{b}"), b.clone())
        }
    };
    let id = match target {
        Target::Current => sign::commit(&repo, Some(&refname), &sig, message, &tree, &[&parent])?,
        Target::Branch(_) => {
            let commit = sign::commit(&repo, None, &sig, message, &tree, &[&parent])?;
            repo.reference(&refname, commit, false, message)?;
            commit
        }
    };
    if push && let Err(e) = push_branch(&repo, &branch) {
        match target {
            Target::Current => {
                repo.reference(&refname, parent.id(), true, "exo: push refused, undone")?;
            }
            Target::Branch(_) => {
                if let Ok(mut r) = repo.find_reference(&refname) {
                    r.delete()?;
                }
            }
        }
        return Err(e);
    }
    if *target == Target::Current {
        // The working tree follows the new commit: the folder appears or
        // goes; nothing else is touched (the paths were checked clean).
        let mut co = git2::build::CheckoutBuilder::new();
        co.force();
        for (rel, _) in changes {
            co.path(rel);
        }
        repo.checkout_tree(tree.as_object(), Some(&mut co))?;
        let mut work_index = repo.index()?;
        work_index.read_tree(&tree)?;
        work_index.write()?;
        for (rel, content) in changes {
            if content.is_none() {
                let _ = std::fs::remove_dir_all(root.join(rel));
            }
        }
    }
    Ok(id.to_string())
}

/// The checkout a review branch is made in: the branch checked out (the
/// one the Fleet follows, which a pull request merges into) and origin's
/// URL, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub branch: String,
    pub origin: Option<String>,
}

pub fn checkout(root: &Path) -> Result<Checkout, RepoError> {
    let repo = open(root)?;
    let head = repo.head()?;
    let branch = head.shorthand().unwrap_or("main").to_owned();
    let origin = repo
        .find_remote("origin")
        .ok()
        .and_then(|r| r.url().ok().map(str::to_owned));
    Ok(Checkout { branch, origin })
}

/// The message of the commit local `branch` points at.
pub fn branch_message(root: &Path, branch: &str) -> Result<String, RepoError> {
    let repo = open(root)?;
    let b = repo.find_branch(branch, git2::BranchType::Local)?;
    let commit = b.get().peel_to_commit()?;
    Ok(String::from_utf8_lossy(commit.message_bytes()).into_owned())
}

/// Pushes the local `branch` as it is to `origin` (a no-op when origin
/// has it already), e.g. a review branch an earlier run made.
pub fn push_existing(root: &Path, branch: &str) -> Result<(), RepoError> {
    push_branch(&open(root)?, branch)
}

/// Brings the checked-out branch up to `origin`'s, a fast-forward only:
/// what the operator committed itself (an analysis' promotion or
/// rollback). `Ok(false)` when there was nothing to take. The work tree is
/// checked out safely: a local change in the way is an error, never lost.
pub fn fast_forward(root: &Path) -> Result<bool, RepoError> {
    let repo = open(root)?;
    let head = repo.head()?;
    let branch = head.shorthand().unwrap_or("main").to_owned();
    let head_ref = head.name().unwrap_or("HEAD").to_owned();
    let mut remote = repo.find_remote("origin")?;
    let callbacks = with_credentials(repo.config()?);
    let mut opts = git2::FetchOptions::new();
    opts.remote_callbacks(callbacks);
    let tracking = format!("refs/remotes/origin/{branch}");
    remote.fetch(
        &[format!("refs/heads/{branch}:{tracking}").as_str()],
        Some(&mut opts),
        None,
    )?;
    let theirs = repo.find_reference(&tracking)?;
    let annotated = repo.reference_to_annotated_commit(&theirs)?;
    let (analysis, _) = repo.merge_analysis(&[&annotated])?;
    if analysis.is_up_to_date() {
        return Ok(false);
    }
    if !analysis.is_fast_forward() {
        return Err(RepoError::Diverged { branch });
    }
    let target = repo.find_object(annotated.id(), None)?;
    repo.checkout_tree(&target, Some(git2::build::CheckoutBuilder::new().safe()))?;
    repo.find_reference(&head_ref)?
        .set_target(annotated.id(), "exo: fast-forward to origin")?;
    Ok(true)
}

/// Callbacks that answer a credential request once, from git's credential
/// helpers as `config` names them (a second request means they were refused).
fn with_credentials<'a>(config: git2::Config) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    let mut attempts = 0;
    callbacks.credentials(move |url, user, _allowed| {
        attempts += 1;
        if attempts > 1 {
            return Err(git2::Error::from_str("credentials refused"));
        }
        git2::Cred::credential_helper(&config, url, user)
    });
    callbacks
}

fn open(root: &Path) -> Result<Repository, RepoError> {
    Repository::open(root).map_err(|source| RepoError::NotARepo {
        path: root.to_owned(),
        source,
    })
}

fn push_branch(repo: &Repository, branch: &str) -> Result<(), RepoError> {
    let mut remote = repo
        .find_remote("origin")
        .map_err(|source| RepoError::Push {
            remote: "origin".into(),
            source,
        })?;
    let url = remote.url().unwrap_or("origin").to_owned();
    let config = repo.config()?;
    let mut rejected: Option<String> = None;
    {
        let mut callbacks = with_credentials(config);
        callbacks.push_update_reference(|_refname, status| {
            if let Some(s) = status {
                rejected = Some(s.to_owned());
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(callbacks);
        let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
        remote
            .push(&[spec.as_str()], Some(&mut opts))
            .map_err(|source| RepoError::Push {
                remote: url.clone(),
                source,
            })?;
    }
    match rejected {
        Some(message) => Err(RepoError::Rejected {
            remote: url,
            message,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The user reads git2's message alone; the git2 error is kept as the
    /// source.
    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        for (p, c) in files {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, c).unwrap();
        }
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = Signature::now("t", "t@x").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();
        drop(tree);
        (dir, repo)
    }

    fn files_at(repo: &Repository, refname: &str) -> Vec<String> {
        let tree = repo
            .find_reference(refname)
            .unwrap()
            .peel_to_tree()
            .unwrap();
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(git2::ObjectType::Blob) {
                out.push(format!("{dir}{}", e.name().unwrap()));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        out
    }

    #[test]
    fn a_folder_is_added_on_a_branch_and_removed_on_the_current_one() {
        let (dir, repo) = repo_with(&[("manifests/a/tenant.yaml", "a"), ("README", "r")]);
        let head = repo.head().unwrap().name().unwrap().to_owned();
        let add = vec![("manifests/b/tenant.yaml".to_owned(), Some("b".to_owned()))];
        commit_changes(
            dir.path(),
            &add,
            "onboard b",
            &Target::Branch("exo/onboard-b".into()),
            false,
        )
        .unwrap();
        // The branch has it; the checked-out branch and the tree do not.
        assert!(
            files_at(&repo, "refs/heads/exo/onboard-b")
                .contains(&"manifests/b/tenant.yaml".to_owned())
        );
        assert!(!files_at(&repo, &head).contains(&"manifests/b/tenant.yaml".to_owned()));
        assert!(!dir.path().join("manifests/b").exists());
        // Again: refused, the branch exists.
        assert!(matches!(
            commit_changes(
                dir.path(),
                &add,
                "x",
                &Target::Branch("exo/onboard-b".into()),
                false
            ),
            Err(RepoError::BranchExists { .. })
        ));
        // Removal, direct: gone from HEAD and from the tree, the rest kept.
        let rm = vec![("manifests/a".to_owned(), None)];
        commit_changes(dir.path(), &rm, "offboard a", &Target::Current, false).unwrap();
        assert_eq!(files_at(&repo, &head), vec!["README".to_owned()]);
        assert!(!dir.path().join("manifests/a").exists());
        assert!(dir.path().join("README").exists());
        assert!(repo.statuses(None).unwrap().is_empty(), "clean after");
        // A direct add appears in the tree.
        commit_changes(dir.path(), &add, "onboard b", &Target::Current, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("manifests/b/tenant.yaml")).unwrap(),
            "b"
        );
        assert!(repo.statuses(None).unwrap().is_empty(), "clean after");
        // Dirty paths are refused.
        std::fs::write(dir.path().join("manifests/b/tenant.yaml"), "edited").unwrap();
        assert!(matches!(
            commit_changes(dir.path(), &rm, "x", &Target::Current, false),
            Err(RepoError::Dirty { .. }) | Ok(_)
        ));
    }

    #[test]
    fn not_a_repository_keeps_the_git_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let e = commit_file(dir.path(), "x", "", "m", false).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{}: not a git repository: ", dir.path().display())),
            "{text}"
        );
        assert!(!text.contains("class="), "{text}");
        let git = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<git2::Error>());
        assert!(git.is_some_and(|g| text.ends_with(g.message())), "{e:?}");
    }
}
