//! Where each tenant's rollout stands, as typed values, from its `Rollout`
//! alone (pure; no client). Everything here reads the status through
//! [`Rollout::current_status`]: a status written for another spec (an older
//! generation or desired hash) says nothing about the current one, so it is
//! reported as [`TenantState::Stale`] and never as verified.
//!
//! The CLI (`exo release status|rollout`), the promotion gates and the demo
//! script (through `exo release status -o json`) read tenants through this.

use serde::Serialize;

use std::collections::BTreeMap;

use crate::crd::{Fleet, InventoryKind, Rollout, RolloutPhase, StepState};
use crate::release::WaveName;

/// Why a status does not describe the current spec: what it was computed
/// for against what the spec is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Staleness {
    /// `status.observedGeneration` (none when the status never said).
    pub status_generation: Option<i64>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.desiredHash`.
    pub status_hash: Option<String>,
    /// `spec.desiredHash`.
    pub desired_hash: String,
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let generation = |g: Option<i64>| g.map_or_else(|| "-".to_owned(), |g| g.to_string());
        let hash = |h: Option<&str>| h.map_or("-", short_id).to_owned();
        write!(
            f,
            "status is for generation {} (hash {}), spec is generation {} (hash {})",
            generation(self.status_generation),
            hash(self.status_hash.as_deref()),
            generation(self.generation),
            hash(Some(&self.desired_hash)),
        )
    }
}

/// One tenant's saga, as far as its status can be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "phase")]
pub enum TenantState {
    /// The status was computed for another spec; the current one has not
    /// been looked at yet.
    Stale(Staleness),
    /// Current status, saga not started (or no status written at all).
    Pending,
    /// A step is running.
    Progressing {
        step: Option<String>,
    },
    /// A step's actuator is missing; it is retried.
    Waiting {
        step: Option<String>,
    },
    Verified,
    /// A step failed; the status message says why.
    Failed {
        step: Option<String>,
    },
}

impl TenantState {
    /// The state of `r`'s saga for its current spec.
    pub fn of(r: &Rollout) -> TenantState {
        let Some(status) = r.status.as_ref() else {
            return TenantState::Pending;
        };
        let Some(s) = r.current_status() else {
            return TenantState::Stale(Staleness {
                status_generation: status.observed_generation,
                generation: r.metadata.generation,
                status_hash: status.desired_hash.clone(),
                desired_hash: r.spec.desired_hash.clone(),
            });
        };
        let step = s.current_step.clone();
        match s.phase.unwrap_or_default() {
            RolloutPhase::Pending => TenantState::Pending,
            RolloutPhase::Progressing => TenantState::Progressing { step },
            RolloutPhase::Waiting => TenantState::Waiting { step },
            RolloutPhase::Verified => TenantState::Verified,
            RolloutPhase::Failed => TenantState::Failed { step },
        }
    }

    /// The saga phase a current status reports; `None` when stale.
    pub fn phase(&self) -> Option<RolloutPhase> {
        match self {
            TenantState::Stale(_) => None,
            TenantState::Pending => Some(RolloutPhase::Pending),
            TenantState::Progressing { .. } => Some(RolloutPhase::Progressing),
            TenantState::Waiting { .. } => Some(RolloutPhase::Waiting),
            TenantState::Verified => Some(RolloutPhase::Verified),
            TenantState::Failed { .. } => Some(RolloutPhase::Failed),
        }
    }

    /// The step a current saga is at.
    pub fn step(&self) -> Option<&str> {
        match self {
            TenantState::Progressing { step }
            | TenantState::Waiting { step }
            | TenantState::Failed { step } => step.as_deref(),
            TenantState::Stale(_) | TenantState::Pending | TenantState::Verified => None,
        }
    }
}

impl std::fmt::Display for TenantState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.phase() {
            None => f.write_str("stale"),
            Some(p) => write!(f, "{p:?}"),
        }
    }
}

/// Why a tenant is not in sync with git.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OutOfSync {
    /// The status is for another spec.
    Stale,
    /// The saga has not verified the current spec yet (pending, running
    /// or waiting).
    Progressing,
    /// The saga failed on the current spec.
    Failed,
    /// A live re-check found content that is not the release's.
    ContentDrift,
    /// Objects git dropped are not deleted yet.
    PendingPrune,
}

impl OutOfSync {
    pub fn as_str(self) -> &'static str {
        match self {
            OutOfSync::Stale => "stale",
            OutOfSync::Progressing => "progressing",
            OutOfSync::Failed => "failed",
            OutOfSync::ContentDrift => "drift",
            OutOfSync::PendingPrune => "prune",
        }
    }
}

/// An inventory entry git dropped whose deletion did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPrune {
    pub kind: InventoryKind,
    pub name: String,
    pub reason: String,
}

/// The last managed object put back to what git says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastDrift {
    pub object: String,
    pub fields: Vec<String>,
    pub age_seconds: Option<i64>,
}

/// The last live re-check of the verified pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastLiveCheck {
    pub pods: u32,
    pub ok: bool,
    pub message: Option<String>,
    pub age_seconds: Option<i64>,
}

/// Everything `exo release status` says about one tenant. Field names are
/// the stable JSON form (`-o json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSummary {
    pub namespace: String,
    pub wave: String,
    pub tenant: String,
    /// The release the spec asks for.
    pub release: String,
    /// The release the current status is for (none when stale).
    pub applied_release: Option<String>,
    /// The fleet commit the current status is for (none when stale).
    pub applied_commit: Option<String>,
    pub state: TenantState,
    pub steps_done: usize,
    pub steps_total: usize,
    /// Seconds since the saga started, or since it was verified.
    pub age_seconds: Option<i64>,
    pub message: Option<String>,
    pub in_sync: bool,
    /// Empty exactly when `inSync`.
    pub out_of_sync: Vec<OutOfSync>,
    /// The ContentDrift condition's message, while it is True.
    pub content_drift: Option<String>,
    pub pending_prunes: Vec<PendingPrune>,
    pub last_drift: Option<LastDrift>,
    pub last_live_check: Option<LastLiveCheck>,
    /// Seconds since every pod of the tenant was last checked live (by a
    /// re-check, or a saga run over the whole tenant); a run over a changed
    /// set checks only its pods.
    pub last_full_check_age_seconds: Option<i64>,
}

impl TenantSummary {
    /// Whether the spec asks for `release` and the current status is for it.
    pub fn runs(&self, release: &str) -> bool {
        self.release == release && self.applied_release.as_deref() == Some(release)
    }

    /// Whether the current status verified `release`.
    pub fn verified_on(&self, release: &str) -> bool {
        self.state == TenantState::Verified && self.runs(release)
    }
}

/// The wave a Rollout belongs to (`None` for a name no release uses).
pub fn wave_of(r: &Rollout) -> Option<WaveName> {
    r.spec.wave.parse().ok()
}

/// A commit id or hash shortened for people: 12 characters, without a
/// `sha256:` prefix.
pub fn short_id(id: &str) -> &str {
    abbrev(id, 12)
}

/// The first `len` characters of a commit id or hash, without a `sha256:`
/// prefix (where a table has less room than [`short_id`] takes).
pub fn abbrev(id: &str, len: usize) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    id.char_indices().nth(len).map_or(id, |(i, _)| &id[..i])
}

fn age(now: i64, at: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<i64> {
    at.map(|t| now - t.0.as_second())
}

/// One tenant, at `now` (seconds since the epoch).
pub fn summarize(r: &Rollout, now: i64) -> TenantSummary {
    let state = TenantState::of(r);
    let current = r.current_status();
    let content_drift = r.content_drift().map(|c| c.message.clone());
    let pending_prunes: Vec<PendingPrune> = current
        .iter()
        .flat_map(|s| &s.pending_prunes)
        .filter_map(|e| {
            e.prune_blocked.as_ref().map(|why| PendingPrune {
                kind: e.kind,
                name: e.name.clone(),
                reason: why.clone(),
            })
        })
        .collect();
    let mut out_of_sync = Vec::new();
    match &state {
        TenantState::Stale(_) => out_of_sync.push(OutOfSync::Stale),
        TenantState::Verified => {}
        TenantState::Failed { .. } => out_of_sync.push(OutOfSync::Failed),
        TenantState::Pending | TenantState::Progressing { .. } | TenantState::Waiting { .. } => {
            out_of_sync.push(OutOfSync::Progressing)
        }
    }
    if content_drift.is_some() {
        out_of_sync.push(OutOfSync::ContentDrift);
    }
    if !pending_prunes.is_empty() {
        out_of_sync.push(OutOfSync::PendingPrune);
    }
    let since = current.and_then(|s| match state {
        TenantState::Verified => s.verified_at.as_ref(),
        _ => s.started_at.as_ref(),
    });
    TenantSummary {
        namespace: r.metadata.namespace.clone().unwrap_or_default(),
        wave: r.spec.wave.clone(),
        tenant: r.spec.tenant.clone(),
        release: r.spec.release.clone(),
        applied_release: current.and_then(|s| s.release.clone()),
        applied_commit: current.and_then(|s| s.applied_commit.clone()),
        steps_done: current.map_or(0, |s| {
            s.steps
                .iter()
                .filter(|x| x.state == StepState::Done)
                .count()
        }),
        steps_total: current.map_or(0, |s| s.steps.len()),
        age_seconds: age(now, since),
        message: current.and_then(|s| s.message.clone()),
        in_sync: out_of_sync.is_empty(),
        out_of_sync,
        content_drift,
        pending_prunes,
        last_drift: current
            .and_then(|s| s.last_drift.as_ref())
            .map(|d| LastDrift {
                object: d.object.clone(),
                fields: d.fields.clone(),
                age_seconds: age(now, d.at.as_ref()),
            }),
        last_live_check: current
            .and_then(|s| s.last_live_check.as_ref())
            .map(|c| LastLiveCheck {
                pods: c.pods,
                ok: c.ok,
                message: c.message.clone(),
                age_seconds: age(now, c.at.as_ref()),
            }),
        last_full_check_age_seconds: current.and_then(|s| age(now, s.last_full_check.as_ref())),
        state,
    }
}

/// Every tenant, in wave order (unknown waves last), then by tenant.
pub fn summarize_all(rollouts: &[Rollout], now: i64) -> Vec<TenantSummary> {
    let mut out: Vec<(Option<WaveName>, TenantSummary)> = rollouts
        .iter()
        .map(|r| (wave_of(r), summarize(r, now)))
        .collect();
    // `None` sorts first; unknown waves belong after the known ones.
    out.sort_by(|(wa, a), (wb, b)| {
        (wa.is_none(), wa, &a.tenant, &a.namespace).cmp(&(
            wb.is_none(),
            wb,
            &b.tenant,
            &b.namespace,
        ))
    });
    out.into_iter().map(|(_, s)| s).collect()
}

/// The Fleet condition that says whether the last sync was applied.
const CONDITION_READY: &str = "Ready";

/// What `exo release status` says about one Fleet (stable JSON names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetSummary {
    pub namespace: String,
    pub name: String,
    pub url: String,
    pub branch: String,
    /// The commit whose manifests and releases are applied.
    pub applied_commit: Option<String>,
    /// The newest commit fetched; differs from `appliedCommit` when it was
    /// refused.
    pub fetched_commit: Option<String>,
    /// The Ready condition: `None` before the first sync.
    pub ready: Option<bool>,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// `spec.suspend`: nothing is applied, pruned or healed.
    pub suspended: bool,
    /// `spec.prune`: objects git dropped are deleted.
    pub prune: bool,
    /// Wave -> release at `appliedCommit`.
    pub waves: BTreeMap<String, String>,
    pub last_sync_age_seconds: Option<i64>,
}

/// One Fleet, at `now` (seconds since the epoch).
pub fn summarize_fleet(f: &Fleet, now: i64) -> FleetSummary {
    let status = f.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_READY);
    FleetSummary {
        namespace: f.metadata.namespace.clone().unwrap_or_default(),
        name: f.metadata.name.clone().unwrap_or_default(),
        url: f.spec.url.clone(),
        branch: f.spec.branch.clone(),
        applied_commit: status.applied_commit,
        fetched_commit: status.fetched_commit,
        ready: ready.map(|c| c.status == "True"),
        reason: ready.map(|c| c.reason.clone()),
        message: ready.map(|c| c.message.clone()),
        suspended: f.spec.suspend,
        prune: f.spec.prune,
        waves: status.waves,
        last_sync_age_seconds: age(now, status.last_sync_time.as_ref()),
    }
}

pub mod analysis;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
