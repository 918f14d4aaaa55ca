//! The lifecycle fields of `tenant.yaml`: what the tenant's onboarding saga
//! provisions (storage and its quota, the uid range, the model and
//! capability scopes of its keys, its support lane) and how it leaves
//! (`storage.retention`, `offboardGracePeriod`).
//!
//! Pure: types and the checks of one file. What needs the rest of the
//! repository (a tier that exists, a wave that matches the release, uid
//! ranges that do not overlap) is `exo release lint`'s.

use serde::{Deserialize, Serialize};

use crate::names::{is_configmap_key, is_dns1123_label, is_dns1123_subdomain};

/// The first uid a tenant range may start at: below it are the system
/// and the images' own users.
pub const MIN_UID: u32 = 10_000;
/// The last uid a range may reach (a pod's `runAsUser` is a 32-bit id in
/// practice everywhere).
pub const MAX_UID: u32 = i32::MAX as u32;
/// The grace period before an offboarded tenant's namespace is deleted,
/// unless confirmed.
pub const DEFAULT_OFFBOARD_GRACE: &str = "24h";

/// What happens to a tenant's volumes when it is offboarded.
#[derive(
    Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Retention {
    /// The PVCs are kept (and listed `Retained` by `exo fs list`).
    #[default]
    Retain,
    /// The PVCs go with the namespace.
    Delete,
}

/// A tenant's storage: its class, its quota and what offboarding does.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageSpec {
    /// The StorageClass of its volumes (the cluster's default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// The most storage its PVCs may request in total, a quantity
    /// (`20Gi`); the tier's when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
    #[serde(default)]
    pub retention: Retention,
    /// An AgentFS the onboarding saga creates in the tenant's namespace
    /// (its workspace), when set.
    #[serde(default, rename = "agentFS", skip_serializing_if = "Option::is_none")]
    pub agent_fs: Option<DefaultAgentFs>,
}

/// The name of the AgentFS `storage.agentFS` creates when it names none.
pub const DEFAULT_AGENTFS_NAME: &str = "workspace";

/// The AgentFS a tenant gets at onboarding (`storage.agentFS`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultAgentFs {
    /// Its name; `workspace` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its capacity, a quantity (`5Gi`); grow-only, as every AgentFS.
    pub size: String,
    /// Its ceiling; its size when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<String>,
}

impl DefaultAgentFs {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_AGENTFS_NAME)
    }

    pub fn max_size(&self) -> &str {
        self.max_size.as_deref().unwrap_or(&self.size)
    }
}

/// The uids the tenant's pods run as: `start` to `start + size - 1`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UidRange {
    pub start: u32,
    pub size: u32,
}

impl UidRange {
    /// The last uid in the range (`None` when it does not fit in a uid).
    pub fn end(self) -> Option<u32> {
        self.start.checked_add(self.size.checked_sub(1)?)
    }

    pub fn overlaps(self, other: UidRange) -> bool {
        match (self.end(), other.end()) {
            (Some(a), Some(b)) => self.start <= b && other.start <= a,
            _ => false,
        }
    }
}

/// Where the tenant's incidents go.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupportSpec {
    /// The lane's name, registered with the control plane.
    pub lane: String,
    /// Who is told: e-mail addresses or handles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contacts: Vec<String>,
}

/// The problems of the lifecycle fields, each naming its field.
pub(super) fn problems(spec: &super::TenantSpec, out: &mut Vec<String>) {
    if let Some(tier) = &spec.tier
        && !is_dns1123_label(tier)
    {
        out.push(format!(
            "spec.tier {tier:?} is not a tier name (a DNS label)"
        ));
    }
    if let Some(wave) = &spec.wave
        && wave.is_empty()
    {
        out.push("spec.wave is empty; name canary, low-risk or fleet".into());
    }
    if let Some(s) = &spec.storage {
        if let Some(class) = &s.storage_class
            && !is_dns1123_subdomain(class)
        {
            out.push(format!(
                "spec.storage.storageClass {class:?} is not a StorageClass name"
            ));
        }
        if let Some(q) = &s.quota
            && crate::quantity::to_bytes(q).map_or(true, |b| b == 0)
        {
            out.push(format!(
                "spec.storage.quota {q:?} is not a positive quantity (e.g. 20Gi)"
            ));
        }
        if let Some(fs) = &s.agent_fs {
            agentfs_problems(fs, out);
        }
    }
    if let Some(r) = spec.uid_range {
        if r.start < MIN_UID {
            out.push(format!(
                "spec.uidRange.start {} is below {MIN_UID}, where system and image users live",
                r.start
            ));
        }
        if r.size == 0 {
            out.push("spec.uidRange.size must be at least 1".into());
        } else if r.end().is_none_or(|e| e > MAX_UID) {
            out.push(format!(
                "spec.uidRange: {} + {} goes past the last uid {MAX_UID}",
                r.start, r.size
            ));
        }
    }
    for (field, list) in [
        ("models", &spec.models),
        ("capabilities", &spec.capabilities),
    ] {
        let mut seen = std::collections::BTreeSet::new();
        for (i, m) in list.iter().enumerate() {
            if !is_configmap_key(m) || m.contains('/') {
                out.push(format!(
                    "spec.{field}[{i}] {m:?} is not a scope name (letters, digits, '-', '_', '.')"
                ));
            } else if !seen.insert(m) {
                out.push(format!("spec.{field}[{i}] {m:?} is listed twice"));
            }
        }
    }
    if let Some(s) = &spec.support {
        if !is_dns1123_label(&s.lane) {
            out.push(format!(
                "spec.support.lane {:?} is not a lane name (a DNS label)",
                s.lane
            ));
        }
        for (i, c) in s.contacts.iter().enumerate() {
            if c.trim().is_empty() || c.len() > 254 || c.chars().any(char::is_control) {
                out.push(format!("spec.support.contacts[{i}] {c:?} is not a contact"));
            }
        }
    }
    if let Some(g) = &spec.offboard_grace_period
        && let Err(e) = crate::duration::parse(g)
    {
        out.push(format!("spec.offboardGracePeriod: {e}"));
    }
}

fn agentfs_problems(fs: &DefaultAgentFs, out: &mut Vec<String>) {
    if !is_dns1123_label(fs.name()) {
        out.push(format!(
            "spec.storage.agentFS.name {:?} is not an AgentFS name (a DNS label)",
            fs.name()
        ));
    }
    let size = crate::quantity::to_bytes(&fs.size).ok().filter(|b| *b > 0);
    if size.is_none() {
        out.push(format!(
            "spec.storage.agentFS.size {:?} is not a positive quantity (e.g. 5Gi)",
            fs.size
        ));
    }
    if let Some(max) = &fs.max_size {
        match crate::quantity::to_bytes(max).ok().filter(|b| *b > 0) {
            None => out.push(format!(
                "spec.storage.agentFS.maxSize {max:?} is not a positive quantity (e.g. 20Gi)"
            )),
            Some(m) if size.is_some_and(|s| m < s) => out.push(format!(
                "spec.storage.agentFS.maxSize {max:?} is below its size {:?}",
                fs.size
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_agentfs_names_its_bad_field() {
        let check = |fs: DefaultAgentFs| {
            let mut out = Vec::new();
            agentfs_problems(&fs, &mut out);
            out
        };
        let ok = DefaultAgentFs {
            name: None,
            size: "5Gi".into(),
            max_size: Some("20Gi".into()),
        };
        assert!(check(ok.clone()).is_empty());
        assert_eq!(ok.name(), DEFAULT_AGENTFS_NAME);
        let bad_name = check(DefaultAgentFs {
            name: Some("Work_Space".into()),
            ..ok.clone()
        });
        assert!(
            bad_name[0].starts_with("spec.storage.agentFS.name"),
            "{bad_name:?}"
        );
        let bad_size = check(DefaultAgentFs {
            size: "lots".into(),
            ..ok.clone()
        });
        assert!(
            bad_size[0].starts_with("spec.storage.agentFS.size"),
            "{bad_size:?}"
        );
        let below = check(DefaultAgentFs {
            max_size: Some("1Gi".into()),
            ..ok
        });
        assert_eq!(
            below,
            ["spec.storage.agentFS.maxSize \"1Gi\" is below its size \"5Gi\""]
        );
    }

    #[test]
    fn uid_ranges_overlap_only_when_they_share_a_uid() {
        let r = |start, size| UidRange { start, size };
        assert!(r(10_000, 100).overlaps(r(10_099, 1)));
        assert!(!r(10_000, 100).overlaps(r(10_100, 100)));
        assert!(r(10_050, 10).overlaps(r(10_000, 100)));
        assert_eq!(r(10_000, 0).end(), None);
        assert_eq!(r(u32::MAX, 2).end(), None);
        assert_eq!(r(10_000, 1).end(), Some(10_000));
    }
}
