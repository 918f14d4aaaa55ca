//! Signed fleet commits, the sync's side (`spec.verify`): the trusted keys
//! read from the Fleet's Secret, the fetched head checked
//! ([`crate::fleet::verify`]) before anything of it is checked out, and
//! what a refusal tells: the Fleet's `Verified` condition, a Warning Event
//! `CommitVerificationFailed` and
//! `exo_fleet_commit_verification_failures_total`.
//!
//! A head verified under the same `spec.verify` is remembered for the
//! term, with the hash of the Secret's data: later syncs of that head read
//! no Secret until `reverifyInterval` has passed since the last read; then
//! the Secret is read again and, with the same data, nothing is verified
//! again. A refusal is never remembered: each sync reads the Secret and
//! checks again, so a key added to the Secret counts at the next interval.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;
use tracing::{info, warn};

use super::{State, now, short};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::crd::{Fleet as FleetCr, FleetVerify};
use crate::fleet::verify::{KeysError, TrustedKeys, Verified, VerifyError, keys};

/// The Fleet condition that says whether the fetched commits verified.
pub(super) const CONDITION: &str = "Verified";

/// Why a sync did not get as far as, or through, the check of the
/// signatures.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    /// The Secret cannot be read.
    #[error("Secret {namespace}/{name} (spec.verify.secretRef): {}", super::super::error::short_kube_error(.source))]
    Secret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The Secret's data is refused (a key, a line, no key at all).
    #[error("Secret {namespace}/{name} (spec.verify.secretRef): {source}")]
    Keys {
        namespace: String,
        name: String,
        #[source]
        source: KeysError,
    },
    #[error(transparent)]
    Refused(#[from] VerifyError),
}

impl Failure {
    /// The `Verified` condition's reason and the metric's label: a fixed set.
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Failure::Secret { .. } => "KeysUnavailable",
            Failure::Keys { .. } => "InvalidKeys",
            Failure::Refused(e) => e.reason(),
        }
    }
}

/// A head verified this term: under which `spec.verify` and keys, and
/// what its `Verified` condition said.
#[derive(Debug, Clone)]
pub(in crate::rollout::engine) struct Memo {
    commit: String,
    verify: FleetVerify,
    keys: String,
    message: String,
    read_at: Instant,
}

/// The keys to check a head with, or what was found before.
pub(super) enum Keys {
    /// The head was verified before under the same spec and keys: the
    /// message of that verification.
    Known(String),
    Read(TrustedKeys),
}

/// The keys to check `head` with (the Secret read unless the memo makes
/// that needless, see the module's top).
pub(super) async fn keys_for(
    op: &Ctx,
    state: &State,
    key: &str,
    ns: &str,
    v: &FleetVerify,
    head: &str,
    reread: Duration,
) -> Result<Keys, Failure> {
    let memo = state
        .verified
        .lock()
        .ok()
        .and_then(|m| m.get(key).cloned())
        .filter(|m| m.commit == head && m.verify == *v);
    if let Some(m) = &memo
        && m.read_at.elapsed() < reread
    {
        return Ok(Keys::Known(m.message.clone()));
    }
    let secret = Api::<Secret>::namespaced(op.client.clone(), ns)
        .get(&v.secret_ref)
        .await
        .map_err(|source| Failure::Secret {
            namespace: ns.to_owned(),
            name: v.secret_ref.clone(),
            source,
        })?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    if let Some(mut m) = memo
        && m.keys == keys::hash_of(&data)
    {
        m.read_at = Instant::now();
        let message = m.message.clone();
        if let Ok(mut all) = state.verified.lock() {
            all.insert(key.to_owned(), m);
        }
        return Ok(Keys::Known(message));
    }
    TrustedKeys::parse(&data)
        .map(Keys::Read)
        .map_err(|source| Failure::Keys {
            namespace: ns.to_owned(),
            name: v.secret_ref.clone(),
            source,
        })
}

/// Remembers a head that verified, and logs it with its signer.
pub(super) fn remember(
    state: &State,
    key: &str,
    v: &FleetVerify,
    keys: &TrustedKeys,
    verified: &Verified,
) -> String {
    let message = verified.message();
    info!(fleet = %key, commit = %short(&verified.head), signer = %verified.signer, "fleet commit verified");
    if let Ok(mut all) = state.verified.lock() {
        all.insert(
            key.to_owned(),
            Memo {
                commit: verified.head.clone(),
                verify: v.clone(),
                keys: keys.hash.clone(),
                message: message.clone(),
                read_at: Instant::now(),
            },
        );
    }
    message
}

/// `Verified=True`.
pub(super) fn passed(message: String, generation: Option<i64>) -> Condition {
    condition(true, "Signed", message, generation)
}

fn condition(status: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        type_: CONDITION.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: now(),
        observed_generation: generation,
    }
}

/// The message of a refusal of `head`: which commit, why, and what stays
/// applied. Pure.
pub(super) fn refusal_message(
    fleet: &str,
    failure: &Failure,
    head: &str,
    applied: Option<&str>,
) -> String {
    let what = match failure {
        Failure::Refused(e) => e.to_string(),
        keys => format!("Fleet {fleet}: {keys}"),
    };
    let kept = match applied {
        Some(a) if a == head => format!(
            "commit {} was applied before and stays; nothing newer is applied until it verifies",
            short(a)
        ),
        Some(a) => format!(
            "commit {} is not applied; {} stays applied",
            short(head),
            short(a)
        ),
        None => format!("commit {} is not applied", short(head)),
    };
    format!("{what}; {kept}")
}

/// Says that `head` was refused: the log, the metric, the condition, and
/// an Event when the condition says something new.
pub(super) async fn refused(
    op: &Ctx,
    f: &FleetCr,
    ns: &str,
    failure: &Failure,
    head: &str,
    applied: Option<&str>,
    generation: Option<i64>,
) -> Condition {
    let name = f.name_any();
    let reason = failure.reason();
    let message = refusal_message(&format!("{ns}/{name}"), failure, head, applied);
    warn!(fleet = %name, namespace = %ns, reason, %message, "fleet commit not verified");
    op.metrics.fleets.verification_failed(ns, &name, reason);
    let said = f
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION))
        .is_some_and(|c| c.status == "False" && c.reason == reason && c.message == message);
    if !said {
        // An Event of its own per refusal: the recorder would fold it into
        // the last one's series, whose note names another commit.
        op.event_distinct(
            f,
            EventType::Warning,
            Reason::CommitVerificationFailed,
            message.clone(),
        )
        .await;
    }
    condition(false, reason, message, generation)
}

/// The `Verified` condition the Fleet had, while it verifies commits: what
/// a sync that stops before the check keeps.
pub(super) fn kept(f: &FleetCr) -> Option<Condition> {
    f.spec.verify.as_ref()?;
    f.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION)
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::verify::Problem;

    const HEAD: &str = "1111111111111111111111111111111111111111";
    const GOOD: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn a_refusal_names_the_commit_why_and_what_stays() {
        let unsigned = Failure::Refused(VerifyError::Refused {
            commit: HEAD.into(),
            head: None,
            problem: Problem::Unsigned,
        });
        assert_eq!(unsigned.reason(), "Unsigned");
        assert_eq!(
            refusal_message("team-a/main", &unsigned, HEAD, Some(GOOD)),
            "commit 111111111111: unsigned; commit 111111111111 is not applied; 222222222222 stays applied"
        );
        assert_eq!(
            refusal_message("team-a/main", &unsigned, HEAD, None),
            "commit 111111111111: unsigned; commit 111111111111 is not applied"
        );
        assert_eq!(
            refusal_message("team-a/main", &unsigned, HEAD, Some(HEAD)),
            "commit 111111111111: unsigned; commit 111111111111 was applied before and stays; nothing newer is applied until it verifies"
        );
        let keys = Failure::Keys {
            namespace: "team-a".into(),
            name: "signers".into(),
            source: KeysError::UnknownEntry {
                key: "token".into(),
            },
        };
        assert_eq!(keys.reason(), "InvalidKeys");
        assert_eq!(
            refusal_message("team-a/main", &keys, HEAD, Some(GOOD)),
            "Fleet team-a/main: Secret team-a/signers (spec.verify.secretRef): key \"token\" is neither \"allowed_signers\" nor an OpenPGP key ending \".asc\"; commit 111111111111 is not applied; 222222222222 stays applied"
        );
    }
}
