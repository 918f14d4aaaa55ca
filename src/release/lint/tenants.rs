//! The rules over the tenants' `tenant.yaml` that need the rest of the
//! repository: a tier `manifests/tiers.yaml` declares, a wave the releases agree
//! with, uid ranges no two tenants share, and a default AgentFS that no
//! folder declares too. (What one file can tell on
//! its own is checked when it is read; see [`crate::crd::tenant`].)

use std::path::PathBuf;

use super::{Findings, Rule};
use crate::crd::tenant::TENANT_FILE;
use crate::crd::tenant::tiers::TIERS_FILE;
use crate::fleet::release::{Release, WaveName};
use crate::release::plan::wave_tenants;

fn tenant_file(f: &Findings<'_>, tenant: &str) -> PathBuf {
    f.fleet
        .root
        .join("manifests")
        .join(tenant)
        .join(TENANT_FILE)
}

/// Tiers and uid ranges, across the fleet.
pub(super) fn lint_tenants(f: &mut Findings<'_>) {
    let fleet = f.fleet;
    for (name, t) in &fleet.tenants {
        if let Some(fs) = t
            .settings
            .storage
            .as_ref()
            .and_then(|s| s.agent_fs.as_ref())
            && let Some(clash) = t
                .filesystems
                .iter()
                .find(|d| d.value.metadata.name.as_deref() == Some(fs.name()))
        {
            f.add(
                &tenant_file(f, name),
                "spec.storage.agentFS.name",
                Rule::TenantAgentFs,
                format!(
                    "AgentFS {:?} is also declared in {}; the onboarding saga and the rollout would both own it (rename one)",
                    fs.name(),
                    clash.path.display()
                ),
            );
        }
        if let Some(w) = &t.settings.wave
            && w.parse::<WaveName>().is_err()
        {
            f.add(
                &tenant_file(f, name),
                "spec.wave",
                Rule::TenantWave,
                format!("wave {w:?} does not exist; waves are canary, low-risk and fleet"),
            );
        }
        let Some(tier) = &t.settings.tier else {
            continue;
        };
        let known = fleet.tiers.as_ref().and_then(|d| d.value.tier(tier));
        if known.is_none() {
            let message = match &fleet.tiers {
                None => {
                    format!(
                        "tier {tier:?}: the repository has no manifests/{TIERS_FILE} declaring tiers"
                    )
                }
                Some(d) => {
                    let names: Vec<&str> =
                        d.value.spec.tiers.iter().map(|t| t.name.as_str()).collect();
                    format!(
                        "tier {tier:?} is not in manifests/{TIERS_FILE} (tiers: {})",
                        names.join(", ")
                    )
                }
            };
            f.add(
                &tenant_file(f, name),
                "spec.tier",
                Rule::UnknownTier,
                message,
            );
        }
    }
    let ranges: Vec<(&String, _)> = fleet
        .tenants
        .iter()
        .filter_map(|(n, t)| t.settings.uid_range.map(|r| (n, r)))
        .collect();
    for (i, (a, ra)) in ranges.iter().enumerate() {
        for (b, rb) in &ranges[i + 1..] {
            if ra.overlaps(*rb) {
                let message = format!(
                    "uids {}-{} overlap tenant {b}'s {}-{}; every tenant needs its own",
                    ra.start,
                    ra.end().unwrap_or(ra.start),
                    rb.start,
                    rb.end().unwrap_or(rb.start),
                );
                f.add(
                    &tenant_file(f, a),
                    "spec.uidRange",
                    Rule::UidRangeOverlap,
                    message,
                );
            }
        }
    }
}

/// A tenant's declared `wave` against the wave `release` puts it in.
pub(super) fn lint_tenant_waves(f: &mut Findings<'_>, release: &Release) {
    let fleet = f.fleet;
    let membership = wave_tenants(release, &fleet.tenants);
    for (name, t) in &fleet.tenants {
        let Some(declared) = &t.settings.wave else {
            continue;
        };
        let file = tenant_file(f, name);
        // A wave that does not exist is `lint_tenants`' finding.
        let Ok(want) = declared.parse::<WaveName>() else {
            continue;
        };
        let actual = membership
            .iter()
            .find(|(_, ts)| ts.contains(name))
            .map(|(w, _)| *w);
        if let Some(actual) = actual
            && actual != want
        {
            f.add(
                &file,
                "spec.wave",
                Rule::TenantWave,
                format!(
                    "the tenant says wave {want}, but release {} puts it in {actual}; change one of them",
                    release.metadata.name
                ),
            );
        }
    }
}
