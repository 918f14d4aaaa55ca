//! One Fleet's commit from the remote to disk: fetch, then (with
//! `spec.verify`) check the signatures in the mirror, then check out. A
//! commit that does not verify is never materialised: the checkout is
//! only reached past the check.

use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use super::incremental::Phases;
use super::{Loaded, Policy, SyncCtx, signed};
use crate::crd::{Fleet as FleetCr, FleetStatus};
use crate::fleet::gitsync::{self, Checkout, GitSyncError, Source};
use crate::fleet::verify::{self, TrustedKeys, Verified, VerifyError};

/// Why there is no checkout: the `Ready` condition's reason and message.
pub(super) struct Stop {
    pub reason: &'static str,
    pub message: String,
}

impl Stop {
    fn git(e: &GitSyncError) -> Self {
        let reason = match e {
            GitSyncError::UrlRefused(_) => "URLRefused",
            GitSyncError::Refused { .. } => "CheckoutRefused",
            _ => "FetchFailed",
        };
        Stop {
            reason,
            message: e.to_string(),
        }
    }

    fn task(e: &tokio::task::JoinError) -> Self {
        Stop {
            reason: "FetchFailed",
            message: e.to_string(),
        }
    }
}

/// The `Ready` reason of a sync stopped by the signatures; the `Verified`
/// condition says which problem.
const VERIFICATION_FAILED: &str = "VerificationFailed";

/// What the blocking half did past the fetch: the verification (when it
/// ran) and the checkout, or the refusal.
type Past = Result<
    (
        Option<(Verified, TrustedKeys)>,
        Result<Checkout, GitSyncError>,
    ),
    VerifyError,
>;

/// Fetches `source`, verifies it when the Fleet asks, and checks out the
/// head. Writes `fetchedCommit` and the `Verified` condition into
/// `status` as it goes.
#[allow(clippy::too_many_arguments)] // the sync's context, passed through
pub(super) async fn fetch_verified(
    ctx: &SyncCtx,
    f: &FleetCr,
    ns: &str,
    policy: Policy,
    source: Source,
    prev: Option<&Loaded>,
    status: &mut FleetStatus,
    clock: &mut Phases,
) -> Result<Checkout, Stop> {
    let cache = ctx.cfg.cache_dir.join(format!("{ns}-{}", f.name_any()));
    let max_file = source.max_file_bytes;
    let mirror = cache.clone();
    let fetched = match tokio::task::spawn_blocking(move || gitsync::fetch(&source, &mirror)).await
    {
        Ok(Ok(fetched)) => fetched,
        Ok(Err(e)) => return Err(Stop::git(&e)),
        Err(e) => return Err(Stop::task(&e)),
    };
    clock.mark("fetch");
    let head = fetched.head().to_string();
    status.fetched_commit = Some(head.clone());
    let applied = status.applied_commit.clone();
    let generation = f.metadata.generation;
    let key = format!("{ns}/{}", f.name_any());
    // The keys, read before the blocking half (the Secret is the API's).
    let keys = match &f.spec.verify {
        None => None,
        Some(v) => {
            match signed::keys_for(&ctx.op, &ctx.state, &key, ns, v, &head, policy.reverify).await {
                Ok(signed::Keys::Known(message)) => {
                    set_verified(status, Some(signed::passed(message, generation)));
                    None
                }
                Ok(signed::Keys::Read(keys)) => Some((v.mode, keys)),
                Err(failure) => {
                    return Err(refuse(ctx, f, ns, &failure, &head, status).await);
                }
            }
        }
    };
    let known = prev.map(|p| p.ids.clone());
    let verifying = keys.is_some();
    let past = tokio::task::spawn_blocking(move || {
        let verified = match keys {
            None => None,
            Some((mode, keys)) => {
                let head = fetched.head();
                match verify::verify(fetched.repo(), head, mode, applied.as_deref(), &keys) {
                    Ok(v) => Some((v, keys)),
                    Err(e) => return (Past::Err(e), Instant::now()),
                }
            }
        };
        let checked_at = Instant::now();
        let checkout = fetched.checkout(&cache, max_file, known.as_ref());
        (Past::Ok((verified, checkout)), checked_at)
    })
    .await;
    let (past, checked_at) = past.map_err(|e| Stop::task(&e))?;
    if verifying {
        clock.mark_at("verify", checked_at);
    }
    match past {
        Err(e) => Err(refuse(ctx, f, ns, &e.into(), &head, status).await),
        Ok((verified, checkout)) => {
            if let (Some((v, keys)), Some(spec)) = (verified, &f.spec.verify) {
                let message = signed::remember(&ctx.state, &key, spec, &keys, &v);
                set_verified(status, Some(signed::passed(message, generation)));
            }
            let checkout = checkout.map_err(|e| Stop::git(&e))?;
            clock.mark("checkout");
            Ok(checkout)
        }
    }
}

/// The `Verified` condition, the Event and the metric of a refusal, and
/// the `Ready` condition's reason and message.
async fn refuse(
    ctx: &SyncCtx,
    f: &FleetCr,
    ns: &str,
    failure: &signed::Failure,
    head: &str,
    status: &mut FleetStatus,
) -> Stop {
    let applied = status.applied_commit.clone();
    let c = signed::refused(
        &ctx.op,
        f,
        ns,
        failure,
        head,
        applied.as_deref(),
        f.metadata.generation,
    )
    .await;
    let message = c.message.clone();
    set_verified(status, Some(c));
    Stop {
        reason: VERIFICATION_FAILED,
        message,
    }
}

/// Sets (or, with `None`, removes) the Fleet's `Verified` condition,
/// after `Ready`.
pub(super) fn set_verified(status: &mut FleetStatus, verified: Option<Condition>) {
    status.conditions.retain(|c| c.type_ != signed::CONDITION);
    status.conditions.extend(verified);
}

/// Sets the Fleet's `Ready` condition, first, beside `Verified` (the only
/// other condition a sync writes).
pub(super) fn set_ready(status: &mut FleetStatus, ready: Condition) {
    status.conditions.retain(|c| c.type_ == signed::CONDITION);
    status.conditions.insert(0, ready);
}
