//! Telling wave moves: a sync that applies a commit whose
//! `releases/waves.yaml` points a wave elsewhere emits `promoted` or
//! `rolledBack` for it (`super::super::notices::wave_moves`), once.
//!
//! What a wave pointed at before is this term's last applied pointers
//! (with their history), or, on the first sync of a term, the Fleet's
//! `status.waves` (the last applied commit's, durable across restarts;
//! the history then unknown). The tenants' Rollouts are read from the
//! cache before the sync writes their new specs.

use std::collections::BTreeMap;

use kube::runtime::reflector::{ObjectRef, Store};

use super::super::State;
use super::super::notices::{WaveTenants, wave_moves};
use crate::crd::{Fleet as FleetCr, Rollout};
use crate::fleet::release::{WaveName, WavePointersSpec};
use crate::meta::ROLLOUT_NAME;
use crate::notify::Notifier;
use crate::notify::waves::Before;

/// Each wave's tenants as the sync assigned them, with what their
/// Rollouts run and verified now (read before the sync writes).
pub(super) fn wave_tenants(
    rollouts: &Store<Rollout>,
    assignment: &[(String, WaveName, String)],
) -> BTreeMap<WaveName, WaveTenants> {
    let mut waves: BTreeMap<WaveName, WaveTenants> = BTreeMap::new();
    for (tenant, wave, _) in assignment {
        let w = waves.entry(*wave).or_default();
        w.tenants.insert(tenant.clone());
        let Some(ro) = rollouts.get(&ObjectRef::new(ROLLOUT_NAME).within(tenant)) else {
            continue;
        };
        w.running.insert(
            tenant.clone(),
            (ro.spec.commit.clone(), ro.spec.release.clone()),
        );
        if let Some(s) = &ro.status {
            w.verified.extend(s.verified_releases.iter().cloned());
        }
    }
    waves
}

/// What each wave pointed at before this sync: this term's last applied
/// pointers, else the Fleet's status.
fn before(state: &State, key: &str, f: &FleetCr) -> BTreeMap<WaveName, Before> {
    let announced = state
        .announced
        .lock()
        .ok()
        .and_then(|m| m.get(key).cloned());
    if let Some(p) = announced {
        return WaveName::ORDER
            .into_iter()
            .map(|w| (w, Before::from(p.get(w))))
            .collect();
    }
    let waves = f.status.as_ref().map(|s| &s.waves);
    waves
        .into_iter()
        .flatten()
        .filter_map(|(w, release)| {
            let wave = w.parse::<WaveName>().ok()?;
            Some((
                wave,
                Before {
                    release: release.clone(),
                    history: None,
                },
            ))
        })
        .collect()
}

/// Emits the moves between what the waves pointed at before and `now`,
/// applied at `commit`, and remembers `now` for the next sync.
pub(super) fn tell(
    state: &State,
    notifier: &Notifier,
    key: &str,
    f: &FleetCr,
    now: &WavePointersSpec,
    waves: &BTreeMap<WaveName, WaveTenants>,
    commit: &str,
) {
    let before = before(state, key, f);
    let (events, statuses) = wave_moves(&before, now, waves, commit);
    for e in events {
        notifier.emit(e);
    }
    for s in statuses {
        notifier.commit_status(s);
    }
    if let Ok(mut m) = state.announced.lock() {
        m.insert(key.to_owned(), now.clone());
    }
}
