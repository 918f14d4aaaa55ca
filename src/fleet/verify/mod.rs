//! Signed fleet commits: a Fleet with `spec.verify` applies a fetched
//! commit only when it (mode `head`) or every commit since the last applied
//! one (mode `all-since`) is signed by a key its Secret trusts
//! (docs/supply-chain.md, "Signed fleet commits").
//!
//! - [`keys`]: the Secret's data -> [`TrustedKeys`], and one signature
//!   checked against them (pure);
//! - [`ssh`]: `allowed_signers` and sshsig (pure, the `ssh-key` crate);
//! - [`openpgp`]: armored keys and signatures (pure, the `pgp` crate);
//! - [`verdict`]: what a check comes to: the signer, or why not (types);
//! - this file: the git I/O, which reads each commit's signature from the
//!   fetched mirror (`Repository::extract_signature`) before anything of
//!   it is materialised, and walks `all-since`.
//!
//! Guarantees: no crypto of our own; a commit is accepted only with a
//! signature that verifies over its content under a trusted key; an error
//! names the commit, and a key by fingerprint or key id, never its data.

pub mod keys;
pub mod openpgp;
pub mod ssh;
pub mod verdict;

pub use keys::{KeysError, TrustedKeys};
pub use verdict::{Problem, Signer};

use git2::{Oid, Repository, Sort};

use crate::crd::VerifyMode;

/// Why the fetched commits are not applied.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// `commit` (an ancestor of `head` in mode `all-since`, or the head).
    #[error("commit {}{}: {problem}", short(.commit), .head.as_ref().map(|h| format!(" (before head {})", short(h))).unwrap_or_default())]
    Refused {
        commit: String,
        head: Option<String>,
        problem: Problem,
    },
    #[error("commit {}: cannot be read: {}", short(.commit), .source.message())]
    Git {
        commit: String,
        #[source]
        source: git2::Error,
    },
}

impl VerifyError {
    /// `Unsigned`, `UntrustedSigner`, `BadSignature` or `HistoryUnavailable`.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::Refused { problem, .. } => problem.reason(),
            VerifyError::Git { .. } => "HistoryUnavailable",
        }
    }

    /// The commit refused.
    pub fn commit(&self) -> &str {
        match self {
            VerifyError::Refused { commit, .. } | VerifyError::Git { commit, .. } => commit,
        }
    }
}

/// The first 12 characters of a commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Which commits were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Mode `head`.
    Head,
    /// Mode `all-since`: `count` commits after `applied`, the head
    /// included (0 when the head is the applied commit, checked again).
    Since { applied: String, count: usize },
    /// Mode `all-since` without an applied commit, or with one the
    /// fetched history does not lead from (a force push): the head alone.
    HeadOnly { applied: Option<String> },
}

/// Fetched commits that may be applied.
#[derive(Debug, Clone)]
pub struct Verified {
    pub head: String,
    /// Who signed the head.
    pub signer: Signer,
    pub scope: Scope,
}

impl Verified {
    /// `commit abc signed by alice (SSH key SHA256:...)`, and what else
    /// was checked.
    pub fn message(&self) -> String {
        let head = format!("commit {} signed by {}", short(&self.head), self.signer);
        match &self.scope {
            Scope::Head => head,
            Scope::Since { applied, count } => format!(
                "{head}; {count} commit(s) since {} all signed",
                short(applied)
            ),
            Scope::HeadOnly { applied: None } => {
                format!("{head}; no commit applied yet, so the head alone was checked")
            }
            Scope::HeadOnly {
                applied: Some(applied),
            } => format!(
                "{head}; the applied commit {} is not in the head's history (a force push?), so the head alone was checked",
                short(applied)
            ),
        }
    }
}

/// Checks the fetched `head` in `repo` (and, in mode `all-since`, every
/// commit since `applied`) against `keys`: the head first, then the others
/// oldest first, stopping at the first one refused.
pub fn verify(
    repo: &Repository,
    head: Oid,
    mode: VerifyMode,
    applied: Option<&str>,
    keys: &TrustedKeys,
) -> Result<Verified, VerifyError> {
    let head_id = head.to_string();
    let git = |commit: Oid| {
        move |source| VerifyError::Git {
            commit: commit.to_string(),
            source,
        }
    };
    let (commits, scope) = match mode {
        VerifyMode::Head => (vec![head], Scope::Head),
        VerifyMode::AllSince => match since(repo, head, applied).map_err(git(head))? {
            Some((base, commits)) => {
                let count = commits.len();
                let scope = Scope::Since {
                    applied: base.to_string(),
                    count,
                };
                (commits, scope)
            }
            None => (
                vec![head],
                Scope::HeadOnly {
                    applied: applied.map(str::to_owned),
                },
            ),
        },
    };
    let signer = check_commit(repo, head, keys)?;
    for oid in commits.into_iter().filter(|c| *c != head) {
        check_commit(repo, oid, keys).map_err(|e| match e {
            VerifyError::Refused {
                commit, problem, ..
            } => VerifyError::Refused {
                commit,
                head: Some(head_id.clone()),
                problem,
            },
            e => e,
        })?;
    }
    Ok(Verified {
        head: head_id,
        signer,
        scope,
    })
}

/// The commits after `applied` up to `head`, oldest first (merges and
/// every side of them included), or `None` when `applied` is not given,
/// not in the mirror, or not an ancestor of `head`.
fn since(
    repo: &Repository,
    head: Oid,
    applied: Option<&str>,
) -> Result<Option<(Oid, Vec<Oid>)>, git2::Error> {
    let Some(base) = applied.and_then(|a| Oid::from_str(a).ok()) else {
        return Ok(None);
    };
    if repo.find_commit(base).is_err() {
        return Ok(None);
    }
    if base != head && !repo.graph_descendant_of(head, base)? {
        return Ok(None);
    }
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.push(head)?;
    walk.hide(base)?;
    let commits = walk.collect::<Result<Vec<_>, _>>()?;
    Ok(Some((base, commits)))
}

/// One commit's signature, read from the mirror and checked.
fn check_commit(repo: &Repository, oid: Oid, keys: &TrustedKeys) -> Result<Signer, VerifyError> {
    let git = |source| VerifyError::Git {
        commit: oid.to_string(),
        source,
    };
    let commit = repo.find_commit(oid).map_err(git)?;
    let at = commit.committer().when().seconds();
    let checked = match repo.extract_signature(&oid, None) {
        Ok((signature, payload)) => keys.check(Some(&signature), &payload, at),
        Err(e) if e.code() == git2::ErrorCode::NotFound => keys.check(None, &[], at),
        Err(e) => return Err(git(e)),
    };
    checked.map_err(|problem| VerifyError::Refused {
        commit: oid.to_string(),
        head: None,
        problem,
    })
}

#[cfg(test)]
mod tests;
