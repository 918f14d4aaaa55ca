//! When a volume's next backup or restore drill is due, and whether its
//! backups have gone stale. Pure: times in, decisions out.
//!
//! Guarantees:
//! - a policy that cannot be followed (a bad duration, `keep: 0`, a
//!   repository that is not `host/path`) is refused naming its field, and
//!   nothing is attempted;
//! - an on-demand request (`autonomic.sh/backup-requested-at`) not yet
//!   answered is served first, whatever the schedule;
//! - a failed attempt is retried after `min(every, 60 s)`, never in a loop;
//! - a drill restores the newest good backup, every `drillEvery` give or
//!   take a tenth (the same offset for the same volume, so the fleet's
//!   drills spread out and a restart does not move them);
//! - staleness is measured from the last success (or, before any, from
//!   when the policy was first seen), so a volume that never backed up is
//!   stale too.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::crd::BackupStatus;
// The check of a policy is the crate's one (`crd::backup`): a tier's
// default in `manifests/tiers.yaml` is checked by it too.
pub use crate::crd::{
    BackupPolicyError as PolicyError, BackupSettings as Settings, DEFAULT_DRILL_EVERY,
};

/// A failed attempt waits at most this long before the next.
const RETRY_AT_MOST: Duration = Duration::from_secs(60);

/// What to do next for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Take a backup now; `request` is the on-demand request it answers.
    Backup { request: Option<String> },
    /// Restore the backup `digest` into a scratch volume and compare.
    Drill { digest: String },
    /// Nothing before this long.
    Wait(Duration),
}

/// Seconds since the epoch of an RFC 3339 time; `None` if unreadable.
pub fn seconds(time: &str) -> Option<i64> {
    time.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

fn after(secs: i64) -> Duration {
    Duration::from_secs(u64::try_from(secs.max(0)).unwrap_or(0))
}

/// The volume's own drill offset, within ±`every`/10.
fn jitter(key: &str, every: Duration) -> i64 {
    let span = i64::try_from(every.as_secs() / 10).unwrap_or(i64::MAX);
    if span == 0 {
        return 0;
    }
    let h = Sha256::digest(key.as_bytes());
    let n = i64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
    n % (2 * span + 1) - span
}

/// The next step for the volume `key` (`namespace/name`) at `now`
/// (seconds), given its status and the on-demand request on it.
pub fn next(
    key: &str,
    now: i64,
    s: &Settings,
    status: Option<&BackupStatus>,
    requested: Option<&str>,
) -> Next {
    let answered = status.and_then(|st| st.answered_request.as_deref());
    if let Some(r) = requested.filter(|r| Some(*r) != answered) {
        return Next::Backup {
            request: Some(r.to_owned()),
        };
    }
    let success = status.and_then(|st| st.last_success.as_ref());
    let last_ok = success.and_then(|b| seconds(&b.time));
    let last_err = status
        .and_then(|st| st.last_error.as_ref())
        .and_then(|e| seconds(&e.time))
        .filter(|e| last_ok.is_none_or(|ok| *e >= ok));
    let every = i64::try_from(s.every.as_secs()).unwrap_or(i64::MAX);
    let backup_at = match (last_ok, last_err) {
        (_, Some(err)) => {
            err + i64::try_from(s.every.min(RETRY_AT_MOST).as_secs()).unwrap_or(i64::MAX)
        }
        (Some(ok), None) => ok.saturating_add(every),
        (None, None) => now,
    };
    if backup_at <= now {
        return Next::Backup { request: None };
    }
    // A drill of the newest good backup, when one is due.
    if let Some(b) = success {
        let drill_every = i64::try_from(s.drill_every.as_secs()).unwrap_or(i64::MAX);
        let last_drill = status
            .and_then(|st| st.last_drill.as_ref())
            .and_then(|d| seconds(&d.time));
        let drill_at = match last_drill {
            Some(d) => d
                .saturating_add(drill_every)
                .saturating_add(jitter(key, s.drill_every)),
            // The first drill follows the first backup.
            None => now,
        };
        if drill_at <= now {
            return Next::Drill {
                digest: b.digest.clone(),
            };
        }
        return Next::Wait(after(backup_at.min(drill_at) - now));
    }
    Next::Wait(after(backup_at - now))
}

/// A backup alert that holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// No good backup within `staleAfter`.
    Backup { since: Option<String> },
    /// No passing drill within twice `drillEvery`.
    Drill { since: Option<String> },
    /// The last drill failed.
    DrillFailed { digest: String, message: String },
}

impl Stale {
    /// The alert's kind, as the alert path names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Stale::Backup { .. } => "backup/stale",
            Stale::Drill { .. } => "backup/drill-stale",
            Stale::DrillFailed { .. } => "backup/drill-failed",
        }
    }
}

/// The backup alerts of one volume at `now`; `watched_since` is when the
/// policy was first seen (the AgentFS's creation, say).
pub fn stale(
    now: i64,
    s: &Settings,
    status: Option<&BackupStatus>,
    watched_since: i64,
) -> Vec<Stale> {
    let mut out = Vec::new();
    let success = status.and_then(|st| st.last_success.as_ref());
    let last_ok = success
        .and_then(|b| seconds(&b.time))
        .unwrap_or(watched_since);
    if now - last_ok > i64::try_from(s.stale_after.as_secs()).unwrap_or(i64::MAX) {
        out.push(Stale::Backup {
            since: success.map(|b| b.time.clone()),
        });
    }
    let drill = status.and_then(|st| st.last_drill.as_ref());
    if let Some(d) = drill.filter(|d| !d.passed) {
        out.push(Stale::DrillFailed {
            digest: d.digest.clone(),
            message: d.message.clone().unwrap_or_default(),
        });
    }
    let passed = drill.and_then(|d| d.last_passed.as_deref());
    let drill_from = passed.and_then(seconds).unwrap_or(watched_since);
    let limit = i64::try_from((s.drill_every * 2).as_secs()).unwrap_or(i64::MAX);
    if now - drill_from > limit {
        out.push(Stale::Drill {
            since: passed.map(str::to_owned),
        });
    }
    out
}

#[cfg(test)]
mod tests;
