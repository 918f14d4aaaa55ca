//! The user's checkout of the fleet repository: promotion and rollback are
//! commits to `releases/waves.yaml`, pushed to `origin`.
//!
//! All or nothing: when the push is refused (someone pushed first, or
//! credentials fail), the local commit is undone and the file restored.

use std::path::{Path, PathBuf};

use git2::{PushOptions, RemoteCallbacks, Repository, ResetType, Signature};

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
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
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
    let repo = Repository::open(root).map_err(|source| RepoError::NotARepo {
        path: root.to_owned(),
        source,
    })?;
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
    let id = repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])?;
    if push && let Err(e) = push_branch(&repo, &branch) {
        // Undo: the branch back to its parent, the file as it was.
        repo.reset(parent.as_object(), ResetType::Mixed, None)?;
        let _ = std::fs::write(&path, original);
        return Err(e);
    }
    Ok(id.to_string())
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
        let mut callbacks = RemoteCallbacks::new();
        let mut attempts = 0;
        callbacks.credentials(move |url, user, _allowed| {
            attempts += 1;
            if attempts > 1 {
                return Err(git2::Error::from_str("credentials refused"));
            }
            git2::Cred::credential_helper(&config, url, user)
        });
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
