//! The CLI's commits signed as git would sign them, so that a Fleet that
//! applies only signed commits (`spec.verify`) takes a promotion, a
//! rollback or an onboarding made with `exo`.
//!
//! With `commit.gpgsign = true` in the repository's git config (its own,
//! the user's or the system's), the commit is handed to the program git
//! runs and written with its signature (`Repository::commit_signed`):
//! - `gpg.format = ssh`: `gpg.ssh.program` (default `ssh-keygen`) `-Y sign
//!   -n git -f <user.signingkey>` (a key file, or `key::<public key>` with
//!   the key in ssh-agent, `-U`);
//! - `gpg.format = openpgp` (the default): `gpg.program` (default `gpg`)
//!   `--status-fd=2 -bsau <user.signingkey>` (the committer's identity
//!   when unset).
//!
//! No crypto of our own; `x509` is refused, as is a signing program that
//! fails. Without `commit.gpgsign` commits are made as before.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use git2::{Oid, Repository, Signature, Tree};

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("commit.gpgsign is set but user.signingkey is not (gpg.format {format})")]
    NoKey { format: &'static str },
    #[error("gpg.format {0:?} is not supported for signing exo's commits (ssh or openpgp)")]
    Format(String),
    #[error("cannot run {program}: {source}")]
    Run {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not sign the commit: {reason}")]
    Failed { program: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
}

/// How the repository's config asks for commits to be signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    Ssh { program: String, key: String },
    OpenPgp { program: String, key: String },
}

/// The signing the config asks for, `None` without `commit.gpgsign`.
/// `committer` is the default OpenPGP key (as git's).
pub fn signing(config: &git2::Config, committer: &str) -> Result<Option<Signing>, SignError> {
    if !config.get_bool("commit.gpgsign").unwrap_or(false) {
        return Ok(None);
    }
    let key = config.get_string("user.signingkey").ok();
    let format = config
        .get_string("gpg.format")
        .unwrap_or_else(|_| "openpgp".into());
    match format.as_str() {
        "ssh" => Ok(Some(Signing::Ssh {
            program: config
                .get_string("gpg.ssh.program")
                .unwrap_or_else(|_| "ssh-keygen".into()),
            key: key.ok_or(SignError::NoKey { format: "ssh" })?,
        })),
        "openpgp" => Ok(Some(Signing::OpenPgp {
            program: config
                .get_string("gpg.openpgp.program")
                .or_else(|_| config.get_string("gpg.program"))
                .unwrap_or_else(|_| "gpg".into()),
            key: key.unwrap_or_else(|| committer.to_owned()),
        })),
        other => Err(SignError::Format(other.to_owned())),
    }
}

/// `~/` expanded, as git does for `user.signingkey`.
fn expand(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => path.to_owned(),
    }
}

impl Signing {
    /// The armored signature of `buffer` (the commit without it).
    pub fn sign(&self, buffer: &str) -> Result<String, SignError> {
        match self {
            Signing::Ssh { program, key } => ssh(program, key, buffer),
            Signing::OpenPgp { program, key } => openpgp(program, key, buffer),
        }
    }
}

fn ssh(program: &str, key: &str, buffer: &str) -> Result<String, SignError> {
    let dir = tempfile::tempdir().map_err(|source| SignError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let io = |path: PathBuf| move |source| SignError::Io { path, source };
    let payload = dir.path().join("commit");
    std::fs::write(&payload, buffer).map_err(io(payload.clone()))?;
    let mut cmd = Command::new(program);
    cmd.args(["-Y", "sign", "-n", "git", "-f"]);
    if let Some(public) = key.strip_prefix("key::") {
        // A literal public key: the private one is in ssh-agent.
        let file = dir.path().join("key.pub");
        std::fs::write(&file, public).map_err(io(file.clone()))?;
        cmd.arg(&file).arg("-U");
    } else {
        cmd.arg(expand(key));
    }
    let out = cmd
        .arg(&payload)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SignError::Run {
            program: program.to_owned(),
            source,
        })?;
    if !out.status.success() {
        return Err(SignError::Failed {
            program: program.to_owned(),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let sig = dir.path().join("commit.sig");
    std::fs::read_to_string(&sig).map_err(io(sig))
}

fn openpgp(program: &str, key: &str, buffer: &str) -> Result<String, SignError> {
    let run = |source| SignError::Run {
        program: program.to_owned(),
        source,
    };
    let mut child = Command::new(program)
        .args(["--status-fd=2", "-bsau", key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(run)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(buffer.as_bytes()).map_err(run)?;
    }
    let out = child.wait_with_output().map_err(run)?;
    let status = String::from_utf8_lossy(&out.stderr);
    // git's own check: gpg says it made the signature.
    if !out.status.success() || !status.contains("\n[GNUPG:] SIG_CREATED ") {
        return Err(SignError::Failed {
            program: program.to_owned(),
            reason: status
                .lines()
                .filter(|l| !l.starts_with("[GNUPG:]"))
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    String::from_utf8(out.stdout).map_err(|_| SignError::Failed {
        program: program.to_owned(),
        reason: "the signature is not text".into(),
    })
}

/// `repo.commit`, signed when the config asks for it. `update` is the
/// reference to move to the new commit (`HEAD`: the branch it points at),
/// moved only if it is still at the first parent.
pub fn commit(
    repo: &Repository,
    update: Option<&str>,
    who: &Signature<'_>,
    message: &str,
    tree: &Tree<'_>,
    parents: &[&git2::Commit<'_>],
) -> Result<Oid, SignError> {
    let committer = format!(
        "{} <{}>",
        who.name().unwrap_or_default(),
        who.email().unwrap_or_default()
    );
    let Some(signing) = signing(&repo.config()?, &committer)? else {
        return Ok(repo.commit(update, who, who, message, tree, parents)?);
    };
    let buffer = repo.commit_create_buffer(who, who, message, tree, parents)?;
    let buffer = buffer.as_str()?;
    let signature = signing.sign(buffer)?;
    let id = repo.commit_signed(buffer, &signature, None)?;
    if let Some(name) = update {
        let name = if name == "HEAD" {
            repo.find_reference("HEAD")?
                .symbolic_target()?
                .unwrap_or("HEAD")
                .to_owned()
        } else {
            name.to_owned()
        };
        match parents.first() {
            Some(p) => {
                repo.reference_matching(&name, id, true, p.id(), message)?;
            }
            None => {
                repo.reference(&name, id, false, message)?;
            }
        }
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[(&str, &str)]) -> (tempfile::TempDir, git2::Config) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "").unwrap();
        let mut c = git2::Config::open(&path).unwrap();
        for (k, v) in entries {
            c.set_str(k, v).unwrap();
        }
        (dir, c)
    }

    #[test]
    fn the_config_says_how_to_sign() {
        let (_d, c) = config(&[]);
        assert_eq!(signing(&c, "A <a@x>").unwrap(), None);
        let (_d, c) = config(&[("commit.gpgsign", "false"), ("gpg.format", "ssh")]);
        assert_eq!(signing(&c, "A <a@x>").unwrap(), None);
        let (_d, c) = config(&[
            ("commit.gpgsign", "true"),
            ("gpg.format", "ssh"),
            ("user.signingkey", "/k"),
        ]);
        assert_eq!(
            signing(&c, "A <a@x>").unwrap(),
            Some(Signing::Ssh {
                program: "ssh-keygen".into(),
                key: "/k".into()
            })
        );
        let (_d, c) = config(&[("commit.gpgsign", "true")]);
        assert_eq!(
            signing(&c, "A <a@x>").unwrap(),
            Some(Signing::OpenPgp {
                program: "gpg".into(),
                key: "A <a@x>".into()
            })
        );
        let (_d, c) = config(&[("commit.gpgsign", "true"), ("gpg.format", "ssh")]);
        assert!(matches!(
            signing(&c, "A <a@x>"),
            Err(SignError::NoKey { format: "ssh" })
        ));
        let (_d, c) = config(&[("commit.gpgsign", "true"), ("gpg.format", "x509")]);
        assert_eq!(
            signing(&c, "A <a@x>").unwrap_err().to_string(),
            "gpg.format \"x509\" is not supported for signing exo's commits (ssh or openpgp)"
        );
    }

    /// A commit signed through the real ssh-keygen verifies with the
    /// operator's check.
    #[test]
    fn an_ssh_signed_commit_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        let ok = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "ci@example.com",
                "-f",
            ])
            .arg(&key)
            .status()
            .expect("ssh-keygen is needed (openssh-client; scripts/deps)")
            .success();
        assert!(ok);
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let mut c = repo.config().unwrap();
        c.set_bool("commit.gpgsign", true).unwrap();
        c.set_str("gpg.format", "ssh").unwrap();
        c.set_str("user.signingkey", key.to_str().unwrap()).unwrap();
        let who = Signature::now("ci", "ci@example.com").unwrap();
        let tree = repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        let first = commit(&repo, Some("HEAD"), &who, "first", &tree, &[]).unwrap();
        let parent = repo.find_commit(first).unwrap();
        let second = commit(&repo, Some("HEAD"), &who, "second", &tree, &[&parent]).unwrap();
        assert_eq!(repo.head().unwrap().target(), Some(second));
        let public = std::fs::read_to_string(dir.path().join("key.pub")).unwrap();
        let data = [(
            "allowed_signers".to_owned(),
            format!("ci@example.com {public}").into_bytes(),
        )]
        .into_iter()
        .collect();
        let keys = crate::fleet::verify::TrustedKeys::parse(&data).unwrap();
        let v = crate::fleet::verify::verify(
            &repo,
            second,
            crate::crd::VerifyMode::AllSince,
            Some(&first.to_string()),
            &keys,
        )
        .unwrap();
        assert_eq!(v.signer.name, "ci@example.com");
        // HEAD moved only from its parent: a stale parent is refused.
        let stale = commit(&repo, Some("HEAD"), &who, "stale", &tree, &[&parent]);
        assert!(stale.is_err());
    }
}
