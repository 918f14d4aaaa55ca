//! Which backups a repository holds, and which one a name means: `latest`,
//! a manifest digest, or a time (the newest backup at or before it). A
//! backup's own tag is its creation time in Unix milliseconds (`take`),
//! so choosing is pure; [`list`] reads the manifests (thin I/O).

use super::Category;
use super::manifest::{self, ANNOTATION_CREATED, ANNOTATION_TREE_HASH, is_sha256_digest};
use super::store::{Blob, Repository, StoreError};
use super::take::LATEST;

/// What a restore was asked to restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Latest,
    Digest(String),
    /// The newest backup at or before this time (Unix milliseconds).
    AtOrBefore {
        time: String,
        ms: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error(
        "{0:?} names no backup: expected `latest`, a `sha256:` digest (64 lowercase hex digits) or an RFC 3339 time such as 2026-05-01T12:00:00Z"
    )]
    Unreadable(String),
    #[error("there is no backup at or before {time} (the oldest is from {oldest})")]
    NoneBefore { time: String, oldest: String },
    #[error("the repository holds no backup")]
    Empty,
}

/// Reads `latest`, a `sha256:` digest, or an RFC 3339 time.
pub fn parse_wanted(text: &str) -> Result<Wanted, SelectError> {
    if text == LATEST {
        return Ok(Wanted::Latest);
    }
    if is_sha256_digest(text) {
        return Ok(Wanted::Digest(text.to_owned()));
    }
    match text.parse::<k8s_openapi::jiff::Timestamp>() {
        Ok(t) => Ok(Wanted::AtOrBefore {
            time: text.to_owned(),
            ms: t.as_millisecond(),
        }),
        Err(_) => Err(SelectError::Unreadable(text.to_owned())),
    }
}

/// The backups' own tags (Unix milliseconds), newest first; `latest` and
/// any other tag are left out.
pub fn stamps(tags: &[String]) -> Vec<u64> {
    let mut out: Vec<u64> = tags
        .iter()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|t| t.parse().ok())
        .collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out.dedup();
    out
}

/// The RFC 3339 time of a tag.
pub fn stamp_time(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// The reference (tag or digest) `wanted` means among `stamps` (newest
/// first, as [`stamps`] gives them).
pub fn resolve(wanted: &Wanted, stamps: &[u64]) -> Result<String, SelectError> {
    match wanted {
        Wanted::Latest => Ok(LATEST.to_owned()),
        Wanted::Digest(d) => Ok(d.clone()),
        Wanted::AtOrBefore { time, ms } => {
            let oldest = stamps.last().ok_or(SelectError::Empty)?;
            stamps
                .iter()
                .find(|s| i64::try_from(**s).is_ok_and(|s| s <= *ms))
                .map(u64::to_string)
                .ok_or_else(|| SelectError::NoneBefore {
                    time: time.clone(),
                    oldest: stamp_time(*oldest),
                })
        }
    }
}

/// One backup in a repository, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// Its own tag (Unix milliseconds).
    pub tag: String,
    /// The manifest's digest: what a restore names.
    pub digest: String,
    /// RFC 3339.
    pub created: String,
    pub files: u64,
    pub file_bytes: u64,
    /// The tar stream's length (the layers' sizes).
    pub stream_bytes: u64,
    pub tree_hash: String,
    /// Why the backup cannot be restored (its manifest or config is
    /// refused), when that is so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Every backup in `repo`, newest first. The counts come from the
/// manifest's annotations; a backup written before they existed has its
/// config fetched and checked. A backup whose manifest or config is
/// refused is listed with the refusal; one deleted while the listing runs
/// (retention) is left out.
pub async fn list(repo: &Repository) -> Result<Vec<Listed>, StoreError> {
    let mut out = Vec::new();
    for stamp in stamps(&repo.list_tags().await?) {
        let tag = stamp.to_string();
        let pulled = match repo.pull_manifest(&tag).await {
            Ok(p) => p,
            Err(e) if e.category() == Category::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut row = Listed {
            tag: tag.clone(),
            digest: pulled.digest.clone(),
            created: stamp_time(stamp),
            files: 0,
            file_bytes: 0,
            stream_bytes: 0,
            tree_hash: String::new(),
            problem: None,
        };
        let m = match manifest::parse_manifest(&pulled.bytes) {
            Ok(m) => m,
            Err(e) => {
                row.problem = Some(e.to_string());
                out.push(row);
                continue;
            }
        };
        let note = |key| m.annotations.get(key).cloned().unwrap_or_default();
        row.created = note(ANNOTATION_CREATED);
        row.tree_hash = note(ANNOTATION_TREE_HASH);
        row.stream_bytes = m.layers.iter().map(|l| l.size).sum();
        match manifest::annotated_counts(&m) {
            Some((files, bytes)) => (row.files, row.file_bytes) = (files, bytes),
            None => {
                let config = repo
                    .pull_blob(&m.config.digest, m.config.size, Blob::Config)
                    .await?;
                match manifest::check_config(&m, &config) {
                    Ok(c) => (row.files, row.file_bytes) = (c.files.len() as u64, c.file_bytes),
                    Err(e) => row.problem = Some(e.to_string()),
                }
            }
        }
        out.push(row);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_name_is_latest_a_digest_or_a_time() {
        assert_eq!(parse_wanted("latest"), Ok(Wanted::Latest));
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(parse_wanted(&d), Ok(Wanted::Digest(d.clone())));
        assert_eq!(
            parse_wanted("2026-05-01T12:00:00Z"),
            Ok(Wanted::AtOrBefore {
                time: "2026-05-01T12:00:00Z".into(),
                ms: 1_777_636_800_000
            })
        );
        for bad in ["yesterday", "sha256:abc", "1777636800000", "", "LATEST"] {
            let e = parse_wanted(bad).unwrap_err();
            assert!(e.to_string().contains("RFC 3339"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn only_the_backups_own_tags_count_newest_first() {
        let s = stamps(&tags(&[
            "1000", "latest", "3000", "v1", "2000", "-5", "3000",
        ]));
        assert_eq!(s, [3000, 2000, 1000]);
    }

    /// A time means the newest backup at or before it, to the millisecond.
    #[test]
    fn a_time_resolves_to_the_newest_backup_at_or_before_it() {
        let s = stamps(&tags(&["1777636800000", "1777636800500", "1777640400000"]));
        let at = |t: &str| resolve(&parse_wanted(t).unwrap(), &s);
        assert_eq!(at("2026-05-01T12:00:00Z"), Ok("1777636800000".into()));
        assert_eq!(at("2026-05-01T12:00:00.5Z"), Ok("1777636800500".into()));
        assert_eq!(at("2026-05-01T12:30:00Z"), Ok("1777636800500".into()));
        assert_eq!(at("2026-05-02T00:00:00+02:00"), Ok("1777640400000".into()));
        let e = at("2026-05-01T11:59:59.999Z").unwrap_err();
        assert_eq!(
            e,
            SelectError::NoneBefore {
                time: "2026-05-01T11:59:59.999Z".into(),
                oldest: "2026-05-01T12:00:00Z".into()
            }
        );
        assert_eq!(
            resolve(&parse_wanted("2026-05-01T12:00:00Z").unwrap(), &[]),
            Err(SelectError::Empty)
        );
        assert_eq!(resolve(&Wanted::Latest, &[]), Ok("latest".into()));
    }
}
