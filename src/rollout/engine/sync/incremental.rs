//! What a sync takes over from the Fleet's last good sync instead of doing
//! again, and where a sync's time went.
//!
//! The key is git's own: the object id of each entry under `manifests/`,
//! `configmaps/` and `releases/` (see [`gitsync::Checkout::ids`]). The same
//! id is the same bytes, so:
//! - a tenant folder or a baseline folder with the same id is not read or
//!   parsed again (its values are the last load's, their paths moved to the
//!   new checkout);
//! - a tenant whose folder, release file, release and wave are all the
//!   same keeps its rendered target (the same `Arc`), so it is not rendered
//!   or hashed again.
//!
//! Lint still runs over the whole fleet: its cross-tenant rules (uid
//! ranges, waves, names) need every tenant, and they read values in memory.

use std::sync::Arc;

use super::super::Loaded;
use crate::fleet::{self, FleetError, Sourced, gitsync};
use crate::release::{Release, WaveName};
use crate::rollout::desired::TenantTarget;

/// Whether `rel` (`manifests/acme`) has the same git id in `ids` as in the
/// last sync `prev`. Pure.
pub(super) fn unchanged(prev: Option<&Loaded>, ids: &gitsync::Ids, rel: &str) -> bool {
    prev.is_some_and(|p| p.ids.get(rel).is_some_and(|id| ids.get(rel) == Some(id)))
}

/// Loads the checkout, reusing the folders the last sync loaded that did
/// not change.
pub(super) fn load(
    checkout: &gitsync::Checkout,
    prev: Option<&Loaded>,
) -> Result<fleet::Fleet, FleetError> {
    let same = |rel: &str| unchanged(prev, &checkout.ids, rel);
    let reuse = match prev {
        Some(p) => fleet::Reuse::from(&p.fleet, &same),
        None => fleet::Reuse::nothing(),
    };
    fleet::load_reusing(&checkout.path, &reuse)
}

/// The last sync's target for `tenant` when nothing it is rendered from
/// changed: its folder, its wave, and its release (name and file).
pub(super) fn target(
    prev: Option<&Loaded>,
    checkout: &gitsync::Checkout,
    tenant: &str,
    wave: WaveName,
    release: &Sourced<Release>,
) -> Option<Arc<TenantTarget>> {
    let last = prev?.tenants.get(tenant)?;
    let release_file = release.path.strip_prefix(&checkout.path).ok()?;
    let same = |rel: &str| unchanged(prev, &checkout.ids, rel);
    (last.wave == wave
        && last.release.metadata.name == release.value.metadata.name
        && same(&format!("manifests/{tenant}"))
        && same(&release_file.to_string_lossy()))
    .then(|| Arc::clone(last))
}

/// Where a sync's time went, for its log line: milliseconds per phase.
pub(super) struct Phases {
    last: std::time::Instant,
    done: Vec<(&'static str, u128)>,
}

impl Phases {
    pub(super) fn start() -> Self {
        Phases {
            last: std::time::Instant::now(),
            done: Vec::new(),
        }
    }

    pub(super) fn mark(&mut self, phase: &'static str) {
        self.mark_at(phase, std::time::Instant::now());
    }

    /// Ends `phase` at `now` (taken elsewhere, e.g. in a blocking task).
    pub(super) fn mark_at(&mut self, phase: &'static str, now: std::time::Instant) {
        self.done
            .push((phase, now.duration_since(self.last).as_millis()));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (phase, ms)) in self.done.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{phase}={ms}")?;
        }
        Ok(())
    }
}
