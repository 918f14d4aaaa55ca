//! Declaring a tenant in the fleet repository (`exo tenant onboard`):
//! its `tenant.yaml`, with a uid range nobody else has. Pure; the CLI
//! lints the fleet with the new file before it commits anything.

use crate::crd::tenant::UidRange;
use crate::crd::tenant::lifecycle::MIN_UID;
use crate::fleet::Fleet;

/// The size of a uid range `exo tenant onboard` hands out.
pub const UID_BLOCK: u32 = 10_000;

/// What `exo tenant onboard` writes.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTenant {
    pub tier: String,
    pub wave: String,
    pub models: Vec<String>,
    pub capabilities: Vec<String>,
    /// The size of its `workspace` AgentFS, when it gets one.
    pub workspace: Option<String>,
    pub uid_range: UidRange,
}

/// The first block of [`UID_BLOCK`] uids, from 100000 up, that overlaps no
/// tenant's range.
pub fn free_uid_range(fleet: &Fleet) -> UidRange {
    let taken: Vec<UidRange> = fleet
        .tenants
        .values()
        .filter_map(|t| t.settings.uid_range)
        .collect();
    let mut start = (10 * MIN_UID).max(UID_BLOCK);
    loop {
        let r = UidRange {
            start,
            size: UID_BLOCK,
        };
        if !taken.iter().any(|t| t.overlaps(r)) {
            return r;
        }
        start += UID_BLOCK;
    }
}

/// The wave the fleet's releases put a tenant they do not name in: the
/// one marked `remaining: true` in every release a wave points at. `None`
/// when they disagree or have none.
pub fn default_wave(fleet: &Fleet) -> Option<crate::release::WaveName> {
    let pointers = &fleet.waves.as_ref()?.value.spec;
    let mut found = None;
    for w in crate::release::WaveName::ORDER {
        let release = fleet.release(&pointers.get(w).release)?;
        let remaining = release
            .value
            .spec
            .waves
            .iter()
            .find(|w| w.remaining)
            .map(|w| w.name)?;
        if found.is_some_and(|f| f != remaining) {
            return None;
        }
        found = Some(remaining);
    }
    found
}

fn list(v: &[String]) -> String {
    let quoted: Vec<String> = v
        .iter()
        .map(|s| serde_json::to_string(s).unwrap_or_default())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The `tenant.yaml` of a new tenant.
pub fn tenant_yaml(name: &str, t: &NewTenant) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let storage = t
        .workspace
        .as_deref()
        .map(|size| format!("  storage: {{agentFS: {{size: {}}}}}\n", q(size)))
        .unwrap_or_default();
    let head = format!(
        "# Written by `exo tenant onboard {name}`; the folder names the tenant and its\n\
         # namespace (docs/tenants.md).\n\
         apiVersion: autonomic.sh/v1alpha1\n\
         kind: Tenant\n\
         spec:\n  tier: {}\n  wave: {}\n  uidRange: {{start: {}, size: {}}}\n  models: {}\n  capabilities: {}\n",
        q(&t.tier),
        q(&t.wave),
        t.uid_range.start,
        t.uid_range.size,
        list(&t.models),
        list(&t.capabilities),
    );
    head + &storage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::TenantDoc;

    #[test]
    fn the_file_reads_back_as_the_tenant_it_declares() {
        let t = NewTenant {
            tier: "standard".into(),
            wave: "canary".into(),
            models: vec!["gpt-4o-mini".into(), "claude-3.5_sonnet".into()],
            capabilities: vec![],
            workspace: Some("5Gi".into()),
            uid_range: UidRange {
                start: 100_000,
                size: UID_BLOCK,
            },
        };
        let text = tenant_yaml("hooli", &t);
        let doc: TenantDoc =
            crate::yaml::from_str(std::path::Path::new("tenant.yaml"), &text).unwrap();
        assert_eq!(doc.kind, "Tenant");
        assert_eq!(doc.spec.tier.as_deref(), Some("standard"));
        assert_eq!(doc.spec.wave.as_deref(), Some("canary"));
        assert_eq!(doc.spec.models, t.models);
        assert_eq!(doc.spec.uid_range, Some(t.uid_range));
        let fs = doc.spec.storage.as_ref().and_then(|s| s.agent_fs.as_ref());
        assert_eq!(
            fs.map(|f| (f.name(), f.max_size())),
            Some(("workspace", "5Gi"))
        );
        assert!(
            doc.problems("hooli").is_empty(),
            "{:?}",
            doc.problems("hooli")
        );
    }

    #[test]
    fn a_free_uid_range_skips_the_taken_ones() {
        let mut fleet =
            crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let r = free_uid_range(&fleet);
        for t in fleet.tenants.values() {
            if let Some(u) = t.settings.uid_range {
                assert!(!u.overlaps(r), "{r:?} overlaps {u:?}");
            }
        }
        // Take it; the next one is another.
        let any = std::sync::Arc::make_mut(fleet.tenants.values_mut().next().unwrap());
        any.settings.uid_range = Some(r);
        let next = free_uid_range(&fleet);
        assert_ne!(next, r);
        assert!(!next.overlaps(r));
    }
}
