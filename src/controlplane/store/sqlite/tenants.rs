//! The tenant registry in the SQLite file: one row per tenant of a
//! deployment; each record kind is kept at its newest generation.

use rusqlite::params;

use super::Sqlite;
use crate::controlplane::model::{TENANT_COLUMNS, TenantRecord, tenant_record};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::wire::{Registration, now_ms};

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TenantRecord> {
    Ok(tenant_record(
        r.get(0)?,
        r.get::<_, i64>(1)? != 0,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
    ))
}

impl Sqlite {
    /// Stores a registration unless a newer one of its kind is stored for
    /// the tenant. One transaction; a lane also takes in the tenant's
    /// incidents that had none.
    pub fn register(&self, deployment: &str, r: &Registration) -> Result<(), StoreError> {
        let now = to_i64(now_ms());
        self.with(|c| {
            match r {
                Registration::Tenant(t) => c.execute(
                    "INSERT INTO tenants (deployment, tenant, enrolled, tier, wave, generation,
                     updated_ms, uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (deployment, tenant) DO UPDATE SET
                       enrolled = excluded.enrolled, tier = excluded.tier, wave = excluded.wave,
                       generation = excluded.generation, updated_ms = excluded.updated_ms,
                       uid = excluded.uid
                     WHERE excluded.uid <> tenants.uid
                        OR excluded.generation >= tenants.generation",
                    params![
                        deployment,
                        t.tenant,
                        i64::from(t.enrolled),
                        t.tier,
                        t.wave,
                        t.generation,
                        now,
                        t.uid
                    ],
                )?,
                Registration::Support(s) => {
                    let tx = c.transaction()?;
                    tx.execute(
                        "INSERT INTO tenants (deployment, tenant, updated_ms, lane, contacts,
                     lane_generation, lane_updated_ms, lane_uid)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?3, ?7)
                     ON CONFLICT (deployment, tenant) DO UPDATE SET
                       lane = excluded.lane, contacts = excluded.contacts,
                       lane_generation = excluded.lane_generation,
                       lane_updated_ms = excluded.lane_updated_ms, lane_uid = excluded.lane_uid
                     WHERE excluded.lane_uid <> tenants.lane_uid
                        OR excluded.lane_generation >= tenants.lane_generation",
                        params![
                            deployment,
                            s.tenant,
                            now,
                            s.lane,
                            serde_json::to_string(&s.contacts).unwrap_or_default(),
                            s.generation,
                            s.uid
                        ],
                    )?;
                    super::incidents::adopt(&tx, deployment, &s.tenant)?;
                    tx.commit()?;
                    0
                }
            };
            Ok(())
        })
    }

    /// A deployment's tenants, by name.
    pub fn list_tenants(&self, deployment: &str) -> Result<Vec<TenantRecord>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {TENANT_COLUMNS} FROM tenants WHERE deployment = ?1 ORDER BY tenant"
            ))?;
            let rows = st
                .query_map([deployment], row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
