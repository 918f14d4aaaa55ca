//! Commits the operator makes itself: one file of the fleet repository
//! changed on top of the branch's head, and pushed with the Fleet's
//! credentials (an analysis outcome that promotes or rolls a wave back is
//! such a commit, as `exo release promote` would make it).
//!
//! Guarantees:
//! - the commit's parent is the branch's head as just fetched, and the
//!   push is a fast-forward only: a push that lost a race is fetched again
//!   and the edit made again on the new head, [`ATTEMPTS`] times at most;
//! - an edit that changes nothing makes no commit;
//! - nothing in the work tree or the mirror's fetched refs moves: the next
//!   sync fetches the commit like any other;
//! - credentials only go to git2's callback, as for the fetch.

use std::path::Path;

use git2::{PushOptions, Signature};

use super::{GitSyncError, Source, callbacks, fetch};

/// How many times a push that lost a race is tried again.
pub const ATTEMPTS: usize = 3;

/// What [`commit_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// The new commit's id, pushed to the branch.
    Pushed(String),
    /// The edit left the file as it was at the head (its id): nothing to
    /// commit.
    Unchanged(String),
}

/// Fetches `source.branch`, applies `edit` to the file `rel` (its text at
/// the head, `None` when absent), commits the result with `message` by
/// `author`, and pushes it to the branch.
pub fn commit_file<E: std::fmt::Display>(
    source: &Source,
    cache: &Path,
    rel: &str,
    edit: impl Fn(Option<&str>) -> Result<String, E>,
    message: &str,
    author: (&str, &str),
) -> Result<Committed, GitSyncError> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match attempt(source, cache, rel, &edit, message, author)? {
            Attempt::Done(c) => return Ok(c),
            Attempt::Raced(reason) => last = Some(reason),
        }
    }
    Err(GitSyncError::Push {
        url: source.url.clone(),
        reason: last.unwrap_or_default(),
    })
}

enum Attempt {
    Done(Committed),
    /// The branch moved between the fetch and the push.
    Raced(String),
}

fn attempt<E: std::fmt::Display>(
    source: &Source,
    cache: &Path,
    rel: &str,
    edit: &impl Fn(Option<&str>) -> Result<String, E>,
    message: &str,
    (name, email): (&str, &str),
) -> Result<Attempt, GitSyncError> {
    let fetched = fetch(source, cache)?;
    let repo = &fetched.repo;
    let head = repo.find_commit(fetched.head)?;
    let tree = head.tree()?;
    let edit_error = |reason: String| GitSyncError::Edit {
        commit: head.id().to_string(),
        path: rel.to_owned(),
        reason,
    };
    let old = match tree.get_path(Path::new(rel)) {
        Ok(entry) => {
            let blob = entry.to_object(repo)?.peel_to_blob()?;
            Some(
                String::from_utf8(blob.content().to_vec())
                    .map_err(|_| edit_error("not UTF-8 text".into()))?,
            )
        }
        Err(e) if e.code() == git2::ErrorCode::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let new = edit(old.as_deref()).map_err(|e| edit_error(e.to_string()))?;
    if old.as_deref() == Some(new.as_str()) {
        return Ok(Attempt::Done(Committed::Unchanged(head.id().to_string())));
    }
    let blob = repo.blob(new.as_bytes())?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(rel, blob, git2::FileMode::Blob);
    let new_tree = repo.find_tree(update.create_updated(repo, &tree)?)?;
    let sig = Signature::now(name, email)?;
    let id = repo.commit(None, &sig, &sig, message, &new_tree, &[&head])?;
    // A ref of its own to push from, removed afterwards.
    let local = format!("refs/exo/push/{id}");
    let mut reference = repo.reference(&local, id, true, "exo: commit to push")?;
    let pushed = push(repo, source, &local);
    let _ = reference.delete();
    match pushed? {
        None => Ok(Attempt::Done(Committed::Pushed(id.to_string()))),
        Some(reason) => Ok(Attempt::Raced(reason)),
    }
}

/// Pushes `local` to the branch, fast-forward only. `Some(reason)` when
/// the server refused the update (the branch moved, say).
fn push(
    repo: &git2::Repository,
    source: &Source,
    local: &str,
) -> Result<Option<String>, GitSyncError> {
    let mut rejected = None;
    {
        let mut cbs = callbacks(source);
        cbs.push_update_reference(|_name, status| {
            if let Some(s) = status {
                rejected = Some(s.to_owned());
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(cbs);
        let mut remote = repo.remote_anonymous(&source.url)?;
        let spec = format!("{local}:refs/heads/{}", source.branch);
        if let Err(e) = remote.push(&[spec.as_str()], Some(&mut opts)) {
            // A non-fast-forward refused before the update: a lost race.
            if e.code() == git2::ErrorCode::NotFastForward {
                return Ok(Some(e.message().to_owned()));
            }
            return Err(GitSyncError::Push {
                url: source.url.clone(),
                reason: e.message().to_owned(),
            });
        }
    }
    Ok(rejected)
}
