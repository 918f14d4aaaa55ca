//! The tenant registry in PostgreSQL, by the rules of the SQLite backend.
//! One statement per registration: two replicas storing records of one
//! tenant at once end with the newest generation of each kind.

use tokio_postgres::Row;

use super::Pg;
use crate::controlplane::model::{TENANT_COLUMNS, TenantRecord, tenant_record};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::wire::{Registration, now_ms};

fn row(r: &Row) -> Result<TenantRecord, tokio_postgres::Error> {
    Ok(tenant_record(
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
        r.try_get(6)?,
        r.try_get(7)?,
        r.try_get(8)?,
        r.try_get(9)?,
    ))
}

impl Pg {
    /// Stores a registration unless a newer one of its kind is stored for
    /// the tenant; a lane also takes in the tenant's incidents that had
    /// none (in the same transaction).
    pub async fn register(&self, deployment: &str, r: &Registration) -> Result<(), StoreError> {
        let now = to_i64(now_ms());
        let c = self.client().await?;
        match r {
            Registration::Tenant(t) => {
                c.execute(
                    "INSERT INTO tenants (deployment, tenant, enrolled, tier, wave, generation,
                     updated_ms, uid) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT (deployment, tenant) DO UPDATE SET
                       enrolled = excluded.enrolled, tier = excluded.tier, wave = excluded.wave,
                       generation = excluded.generation, updated_ms = excluded.updated_ms,
                       uid = excluded.uid
                     WHERE excluded.uid <> tenants.uid
                        OR excluded.generation >= tenants.generation",
                    &[
                        &deployment,
                        &t.tenant,
                        &t.enrolled,
                        &t.tier,
                        &t.wave,
                        &t.generation,
                        &now,
                        &t.uid,
                    ],
                )
                .await?
            }
            Registration::Support(s) => {
                let mut c = c;
                let tx = c.transaction().await?;
                super::incidents::lock_tenant(&tx, deployment, &s.tenant).await?;
                tx.execute(
                    "INSERT INTO tenants (deployment, tenant, updated_ms, lane, contacts,
                     lane_generation, lane_updated_ms, lane_uid)
                     VALUES ($1, $2, $3, $4, $5, $6, $3, $7)
                     ON CONFLICT (deployment, tenant) DO UPDATE SET
                       lane = excluded.lane, contacts = excluded.contacts,
                       lane_generation = excluded.lane_generation,
                       lane_updated_ms = excluded.lane_updated_ms, lane_uid = excluded.lane_uid
                     WHERE excluded.lane_uid <> tenants.lane_uid
                        OR excluded.lane_generation >= tenants.lane_generation",
                    &[
                        &deployment,
                        &s.tenant,
                        &now,
                        &s.lane,
                        &serde_json::to_string(&s.contacts).unwrap_or_default(),
                        &s.generation,
                        &s.uid,
                    ],
                )
                .await?;
                tx.execute(super::incidents::ADOPT, &[&deployment, &s.tenant])
                    .await?;
                tx.commit().await?;
                0
            }
        };
        Ok(())
    }

    /// A deployment's tenants, by name.
    pub async fn list_tenants(&self, deployment: &str) -> Result<Vec<TenantRecord>, StoreError> {
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {TENANT_COLUMNS} FROM tenants WHERE deployment = $1 ORDER BY tenant"
                ),
                &[&deployment],
            )
            .await?;
        Ok(rows.iter().map(row).collect::<Result<Vec<_>, _>>()?)
    }
}
