//! The tenant registry: each deployment's tenants as their operator
//! registered them (`tenant_register`, `support_lane`; docs/protocol.md).

use serde::Serialize;

/// A tenant of a deployment, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TenantRecord {
    pub tenant: String,
    /// `false` once offboarded (or when only its lane was registered).
    pub enrolled: bool,
    pub tier: String,
    pub wave: String,
    /// The `Tenant` generation of the newest enrollment record (-1: none).
    pub generation: i64,
    pub updated_ms: u64,
    /// Its support lane; `None` when it has none.
    pub support: Option<SupportRecord>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SupportRecord {
    pub lane: String,
    pub contacts: Vec<String>,
    pub generation: i64,
    pub updated_ms: u64,
}

/// The columns both backends select, in this order.
pub const TENANT_COLUMNS: &str = "tenant, enrolled, tier, wave, generation, updated_ms, lane, \
     contacts, lane_generation, lane_updated_ms";

/// A record from the values of [`TENANT_COLUMNS`].
#[allow(clippy::too_many_arguments)]
pub fn tenant_record(
    tenant: String,
    enrolled: bool,
    tier: String,
    wave: String,
    generation: i64,
    updated_ms: i64,
    lane: Option<String>,
    contacts: Option<String>,
    lane_generation: i64,
    lane_updated_ms: Option<i64>,
) -> TenantRecord {
    let ms = |v: i64| u64::try_from(v).unwrap_or(0);
    TenantRecord {
        tenant,
        enrolled,
        tier,
        wave,
        generation,
        updated_ms: ms(updated_ms),
        support: lane.map(|lane| SupportRecord {
            lane,
            contacts: contacts
                .and_then(|c| serde_json::from_str(&c).ok())
                .unwrap_or_default(),
            generation: lane_generation,
            updated_ms: ms(lane_updated_ms.unwrap_or(updated_ms)),
        }),
    }
}
