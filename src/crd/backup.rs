//! A volume's backup policy and what its backups and restore drills did
//! (`AgentFS.spec.backup`, `AgentFS.status.backup`), and the one check of
//! a policy ([`BackupSettings::of`]): the operator's backups and a tier's
//! default (`manifests/tiers.yaml`, checked when the fleet is read) both
//! use it. See docs/backups.md.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a volume is backed up: to an OCI repository, every `every`,
/// keeping the newest `keep`, proven by a restore drill every
/// `drillEvery`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupPolicy {
    /// How often a backup is taken: a duration such as `6h`, `1d`, `10s`.
    pub every: String,
    /// How many backups are kept (at least 1); older manifests are deleted
    /// through the registry API, and its garbage collection frees the blobs.
    #[schemars(range(min = 1))]
    pub keep: u32,
    /// `host[:port]/path` of the OCI repository the backups go to.
    pub repository: String,
    /// A Secret in the volume's namespace with `username` and `password`
    /// for the registry. Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// How often the latest backup is restored into a scratch volume and
    /// compared (default `7d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill_every: Option<String>,
    /// No good backup for this long raises `backup/stale` (default twice
    /// `every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<String>,
    /// Plain HTTP to the registry (a loopback test registry only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

/// What the backups of one volume did, for the generation of the policy
/// they ran under (`observedGeneration`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The AgentFS generation whose policy the fields below follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<BackupRecord>,
    /// The last failed attempt, kept until a later success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<BackupFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drill: Option<DrillRecord>,
    /// The last on-demand request (`autonomic.sh/backup-requested-at`)
    /// that a backup answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_request: Option<String>,
}

/// One good backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRecord {
    /// RFC 3339, when the backup ended.
    pub time: String,
    /// `sha256:…` of the backup's manifest.
    pub digest: String,
    pub bytes_uploaded: u64,
    pub bytes_total: u64,
    pub files: u64,
    /// The volume's tree hash (`exo fs`'s digest of the file list).
    pub tree_hash: String,
}

/// One failed attempt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupFailure {
    pub time: String,
    /// A bounded category (`registry`, `exec`, `refused`, `credentials`, …).
    pub reason: String,
    pub message: String,
}

/// One restore drill of a backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrillRecord {
    pub time: String,
    /// The backup restored.
    pub digest: String,
    pub passed: bool,
    /// Why it failed: the first file that differs, or the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the last drill that passed ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_passed: Option<String>,
}

/// A drill, by default, once a week.
pub const DEFAULT_DRILL_EVERY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The placeholders a tier's default `repository` may hold, filled with
/// the volume's namespace and name ([`BackupPolicy::for_volume`]).
pub const REPOSITORY_PLACEHOLDERS: [&str; 2] = ["{namespace}", "{name}"];

/// Why a policy cannot be followed, naming its field (under
/// `spec.backup` when shown; [`BackupPolicyError::at`] puts it under
/// another path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.backup.{field}: {problem}")]
pub struct BackupPolicyError {
    /// `every`, `keep`, `drillEvery`, `staleAfter` or `repository`.
    pub field: &'static str,
    #[source]
    pub problem: BackupPolicyProblem,
}

impl BackupPolicyError {
    /// The error with its field under `path` (`spec.tiers[0].backup`).
    pub fn at(&self, path: &str) -> String {
        format!("{path}.{}: {}", self.field, self.problem)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupPolicyProblem {
    #[error("{0}")]
    Duration(#[source] crate::duration::DurationError),
    #[error("must be more than zero")]
    Zero,
    #[error("must be at least 1 (0 would delete every backup)")]
    KeepZero,
    #[error("{0:?} is not host[:port]/path")]
    Repository(String),
    #[error(
        "{found:?} in {repository:?}: only a tier's default may hold placeholders, and only {{namespace}} and {{name}}"
    )]
    Placeholder { repository: String, found: String },
}

/// A policy, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSettings {
    pub every: Duration,
    pub keep: u32,
    pub drill_every: Duration,
    pub stale_after: Duration,
    pub registry: String,
    pub path: String,
}

impl BackupSettings {
    /// The checked form of `policy`: durations read (and more than zero),
    /// `keep` at least 1, the repository `host[:port]/path` with no
    /// placeholder left in it.
    pub fn of(policy: &BackupPolicy) -> Result<Self, BackupPolicyError> {
        let refuse = |field, problem| BackupPolicyError { field, problem };
        let duration = |field: &'static str, text: &str| {
            let d = crate::duration::parse(text)
                .map_err(|e| refuse(field, BackupPolicyProblem::Duration(e)))?;
            if d.is_zero() {
                return Err(refuse(field, BackupPolicyProblem::Zero));
            }
            Ok(d)
        };
        let every = duration("every", &policy.every)?;
        if policy.keep == 0 {
            return Err(refuse("keep", BackupPolicyProblem::KeepZero));
        }
        let drill_every = match &policy.drill_every {
            Some(t) => duration("drillEvery", t)?,
            None => DEFAULT_DRILL_EVERY,
        };
        let stale_after = match &policy.stale_after {
            Some(t) => duration("staleAfter", t)?,
            None => every * 2,
        };
        if let Some(found) = placeholders(&policy.repository).first() {
            return Err(placeholder_error(&policy.repository, found));
        }
        let (registry, path) = split_repository(&policy.repository).ok_or_else(|| {
            refuse(
                "repository",
                BackupPolicyProblem::Repository(policy.repository.clone()),
            )
        })?;
        Ok(BackupSettings {
            every,
            keep: policy.keep,
            drill_every,
            stale_after,
            registry: registry.to_owned(),
            path: path.to_owned(),
        })
    }
}

/// The `{…}` placeholders in `text`, and any stray brace, in order.
fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(['{', '}']) {
        let from = &rest[start..];
        let len = from
            .strip_prefix('{')
            .and_then(|r| r.find(['{', '}']).filter(|i| r.as_bytes()[*i] == b'}'))
            .map_or(1, |i| i + 2);
        out.push(&from[..len]);
        rest = &from[len..];
    }
    out
}

/// `host[:port]` and `path` of a policy's `repository`; `None` unless
/// both are there.
pub fn split_repository(repository: &str) -> Option<(&str, &str)> {
    repository
        .split_once('/')
        .filter(|(r, p)| !r.is_empty() && !p.is_empty())
}

fn placeholder_error(repository: &str, found: &str) -> BackupPolicyError {
    BackupPolicyError {
        field: "repository",
        problem: BackupPolicyProblem::Placeholder {
            repository: repository.to_owned(),
            found: found.to_owned(),
        },
    }
}

impl BackupPolicy {
    /// This policy as a template (a tier's default) for the volume
    /// `namespace/name`: `{namespace}` and `{name}` in `repository`
    /// filled in.
    pub fn for_volume(&self, namespace: &str, name: &str) -> BackupPolicy {
        let [ns, n] = REPOSITORY_PLACEHOLDERS;
        BackupPolicy {
            repository: self.repository.replace(ns, namespace).replace(n, name),
            ..self.clone()
        }
    }

    /// Checks this policy as a template: each field as
    /// [`BackupSettings::of`] checks it once its placeholders are filled,
    /// and no placeholder but `{namespace}` and `{name}`.
    pub fn check_template(&self) -> Result<(), BackupPolicyError> {
        if let Some(found) = placeholders(&self.repository)
            .into_iter()
            .find(|p| !REPOSITORY_PLACEHOLDERS.contains(p))
        {
            return Err(placeholder_error(&self.repository, found));
        }
        // Sample names (DNS labels, as namespaces and AgentFS names are).
        BackupSettings::of(&self.for_volume("namespace", "name")).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(repository: &str) -> BackupPolicy {
        BackupPolicy {
            every: "1h".into(),
            keep: 3,
            repository: repository.into(),
            ..BackupPolicy::default()
        }
    }

    #[test]
    fn placeholders_are_filled_for_a_volume_and_unknown_ones_refused() {
        let tpl = policy("registry.example.com/backups/{namespace}/{name}");
        assert_eq!(
            tpl.for_volume("acme", "work").repository,
            "registry.example.com/backups/acme/work"
        );
        assert!(tpl.check_template().is_ok());
        // Unfilled, a placeholder is refused by name (an AgentFS's own
        // policy has none).
        let e = BackupSettings::of(&tpl).unwrap_err();
        assert_eq!(e.field, "repository");
        assert!(e.to_string().contains("\"{namespace}\""), "{e}");
        for (repo, found) in [
            ("r.example.com/{tenant}/x", "{tenant}"),
            ("r.example.com/{name", "{"),
            ("r.example.com/name}", "}"),
            ("r.example.com/{{name}}", "{"),
        ] {
            let e = policy(repo).check_template().unwrap_err();
            assert_eq!(
                e.problem,
                BackupPolicyProblem::Placeholder {
                    repository: repo.into(),
                    found: found.into()
                },
                "{repo}"
            );
        }
    }

    #[test]
    fn an_error_is_shown_under_the_path_it_was_found_at() {
        let mut p = policy("r.example.com/x");
        p.keep = 0;
        let e = p.check_template().unwrap_err();
        assert_eq!(
            e.at("spec.tiers[1].backup"),
            "spec.tiers[1].backup.keep: must be at least 1 (0 would delete every backup)"
        );
        assert_eq!(
            e.to_string(),
            "spec.backup.keep: must be at least 1 (0 would delete every backup)"
        );
    }
}
