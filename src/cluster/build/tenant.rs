//! A tenant's own cluster objects, built from its `tenant.yaml` settings
//! and its tier: the Namespace (with the uid range the pod builder keeps
//! pods inside), its ServiceAccount, its ResourceQuota and LimitRange, and
//! the AgentFS it asks for.
//! Pure; the tenant saga's enrollment and provisioning steps apply them.
//! The Namespace carries Pod Security `restricted`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LimitRange, LimitRangeItem, LimitRangeSpec, Namespace, ResourceQuota, ResourceQuotaSpec,
    ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crd::tenant::TenantSpec;
use crate::crd::tenant::tiers::Tier;
use crate::crd::{AgentFS, AgentFSSpec};
use crate::meta::{ANNOTATION_UID_RANGE, LABEL_MANAGED_BY, LABEL_TENANT, MANAGED_BY};

/// The name of the tenant's ServiceAccount, ResourceQuota and LimitRange.
pub const TENANT_OBJECT: &str = "exo-tenant";

fn labels(tenant: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_TENANT.to_owned(), tenant.to_owned()),
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
    ])
}

fn meta(tenant: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(TENANT_OBJECT.to_owned()),
        namespace: Some(tenant.to_owned()),
        labels: Some(labels(tenant)),
        ..ObjectMeta::default()
    }
}

/// The tenant's Namespace: its labels and, when it has one, its uid range
/// as `autonomic.sh/uid-range: <first>-<last>`.
pub fn namespace(tenant: &str, settings: &TenantSpec) -> Namespace {
    let annotations = settings
        .uid_range
        .and_then(|r| Some((r.start, r.end()?)))
        .map(|(first, last)| {
            BTreeMap::from([(ANNOTATION_UID_RANGE.to_owned(), format!("{first}-{last}"))])
        });
    let mut labels = labels(tenant);
    // Pod Security admission: every pod in a tenant namespace meets the
    // `restricted` profile (the operator's pods do; a hand-made privileged
    // pod is refused).
    for (k, v) in [
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
    ] {
        labels.insert(k.to_owned(), v.to_owned());
    }
    Namespace {
        metadata: ObjectMeta {
            name: Some(tenant.to_owned()),
            labels: Some(labels),
            annotations,
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The AgentFS `storage.agentFS` asks for, in the tenant's namespace:
/// `None` when it asks for none. `max_size` is the live one when the
/// AgentFS exists already (immutable; a changed ceiling in `tenant.yaml`
/// does not apply to a volume already made).
pub fn agentfs(
    tenant: &str,
    settings: &TenantSpec,
    max_size: Option<&Quantity>,
) -> Option<AgentFS> {
    let want = settings.storage.as_ref()?.agent_fs.as_ref()?;
    let mut fs = AgentFS::new(
        want.name(),
        AgentFSSpec {
            size: Quantity(want.size.clone()),
            max_size: max_size
                .cloned()
                .unwrap_or_else(|| Quantity(want.max_size().to_owned())),
            ..AgentFSSpec::default()
        },
    );
    fs.metadata.namespace = Some(tenant.to_owned());
    fs.metadata.labels = Some(labels(tenant));
    Some(fs)
}

/// The tenant's ServiceAccount; its token is never mounted by default.
pub fn service_account(tenant: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(tenant),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// The tenant's ResourceQuota: the tier's, with the tenant's own storage
/// quota over the tier's. `None` when neither sets anything.
pub fn resource_quota(
    tenant: &str,
    settings: &TenantSpec,
    tier: Option<&Tier>,
) -> Option<ResourceQuota> {
    let q = tier.map(|t| t.quota.clone()).unwrap_or_default();
    let storage = settings
        .storage
        .as_ref()
        .and_then(|s| s.quota.clone())
        .or(q.storage);
    let mut hard = BTreeMap::new();
    let mut set = |key: &str, v: Option<String>| {
        if let Some(v) = v {
            hard.insert(key.to_owned(), Quantity(v));
        }
    };
    set("requests.cpu", q.cpu);
    set("requests.memory", q.memory);
    set("pods", q.pods.map(|p| p.to_string()));
    set("requests.storage", storage);
    (!hard.is_empty()).then(|| ResourceQuota {
        metadata: meta(tenant),
        spec: Some(ResourceQuotaSpec {
            hard: Some(hard),
            ..ResourceQuotaSpec::default()
        }),
        ..ResourceQuota::default()
    })
}

/// The tenant's LimitRange: the tier's container defaults as both the
/// default request and the default limit of a container that sets none.
pub fn limit_range(tenant: &str, tier: Option<&Tier>) -> Option<LimitRange> {
    let d = tier?.container_defaults.as_ref()?;
    let values = BTreeMap::from([
        ("cpu".to_owned(), Quantity(d.cpu.clone())),
        ("memory".to_owned(), Quantity(d.memory.clone())),
    ]);
    Some(LimitRange {
        metadata: meta(tenant),
        spec: Some(LimitRangeSpec {
            limits: vec![LimitRangeItem {
                type_: "Container".to_owned(),
                default: Some(values.clone()),
                default_request: Some(values),
                ..LimitRangeItem::default()
            }],
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::tiers::{ContainerDefaults, TierQuota};
    use crate::crd::tenant::{StorageSpec, UidRange};

    fn tier() -> Tier {
        Tier {
            name: "standard".into(),
            quota: TierQuota {
                cpu: Some("8".into()),
                memory: Some("16Gi".into()),
                pods: Some(50),
                storage: Some("100Gi".into()),
            },
            container_defaults: Some(ContainerDefaults {
                cpu: "250m".into(),
                memory: "256Mi".into(),
            }),
            backup: None,
        }
    }

    #[test]
    fn the_namespace_carries_the_uid_range() {
        let plain = namespace("acme", &TenantSpec::default());
        assert_eq!(plain.metadata.annotations, None);
        assert_eq!(
            plain
                .metadata
                .labels
                .unwrap()
                .get(LABEL_TENANT)
                .map(String::as_str),
            Some("acme")
        );
        let s = TenantSpec {
            uid_range: Some(UidRange {
                start: 200_000,
                size: 10_000,
            }),
            ..TenantSpec::default()
        };
        let ns = namespace("acme", &s);
        assert_eq!(
            ns.metadata.annotations.unwrap()[ANNOTATION_UID_RANGE],
            "200000-209999"
        );
    }

    #[test]
    fn the_quota_is_the_tiers_with_the_tenants_storage_over_it() {
        let hard = |q: Option<ResourceQuota>| -> BTreeMap<String, String> {
            q.unwrap()
                .spec
                .unwrap()
                .hard
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect()
        };
        let t = tier();
        let got = hard(resource_quota("acme", &TenantSpec::default(), Some(&t)));
        assert_eq!(got["requests.cpu"], "8");
        assert_eq!(got["pods"], "50");
        assert_eq!(got["requests.storage"], "100Gi");
        let own = TenantSpec {
            storage: Some(StorageSpec {
                quota: Some("20Gi".into()),
                ..StorageSpec::default()
            }),
            ..TenantSpec::default()
        };
        assert_eq!(
            hard(resource_quota("acme", &own, Some(&t)))["requests.storage"],
            "20Gi"
        );
        assert_eq!(
            hard(resource_quota("acme", &own, None)),
            BTreeMap::from([("requests.storage".to_owned(), "20Gi".to_owned())])
        );
        assert!(resource_quota("acme", &TenantSpec::default(), None).is_none());
    }

    #[test]
    fn limits_and_account_are_the_tenants() {
        let t = tier();
        let lr = limit_range("acme", Some(&t)).unwrap();
        let item = &lr.spec.unwrap().limits[0];
        assert_eq!(item.type_, "Container");
        assert_eq!(item.default.as_ref().unwrap()["cpu"].0, "250m");
        assert_eq!(item.default_request.as_ref().unwrap()["memory"].0, "256Mi");
        assert!(limit_range("acme", None).is_none());
        let sa = service_account("acme");
        assert_eq!(sa.metadata.namespace.as_deref(), Some("acme"));
        assert_eq!(sa.automount_service_account_token, Some(false));
    }
}
