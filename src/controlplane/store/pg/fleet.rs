//! The fleet-wide projection of Rollouts in PostgreSQL, by the rules of
//! the SQLite backend. A snapshot's replacement is three statements in one
//! transaction under a per-deployment advisory lock (two replicas
//! replacing one deployment's rows never interleave); a delta is one
//! statement, conditional on its session being the deployment's source.

use tokio_postgres::Row;

use super::Pg;
use crate::controlplane::model::{ROLLOUT_COLUMNS, RolloutRow, StoredRollout};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{to_i64, to_u64};
use crate::wire::now_ms;

/// Advisory-lock namespace of a deployment's projection.
const FLEET_LOCK: i32 = 0x6578_6f02;

fn row(r: &Row) -> Result<StoredRollout, tokio_postgres::Error> {
    Ok(StoredRollout {
        deployment: r.try_get(0)?,
        namespace: r.try_get(1)?,
        name: r.try_get(2)?,
        resource: r.try_get(3)?,
        updated_ms: to_u64(r.try_get(4)?),
    })
}

impl Pg {
    /// Makes `rows` the deployment's whole set and `session` its source;
    /// an unchanged row is not written. Returns how many rows changed.
    pub async fn replace_rollouts(
        &self,
        deployment: &str,
        session: &str,
        rows: &[RolloutRow],
    ) -> Result<u64, StoreError> {
        let now = to_i64(now_ms());
        let namespaces: Vec<&str> = rows.iter().map(|r| r.namespace.as_str()).collect();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let resources: Vec<&str> = rows.iter().map(|r| r.resource.as_str()).collect();
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&FLEET_LOCK, &deployment],
        )
        .await?;
        tx.execute(
            "INSERT INTO fleet_sources (deployment, session, updated_ms) VALUES ($1, $2, $3)
             ON CONFLICT (deployment) DO UPDATE SET
               session = excluded.session, updated_ms = excluded.updated_ms",
            &[&deployment, &session, &now],
        )
        .await?;
        let upserted = tx
            .execute(
                "INSERT INTO fleet_rollouts (deployment, namespace, name, resource, updated_ms)
                 SELECT $1, v.ns, v.n, v.r, $5
                   FROM unnest($2::text[], $3::text[], $4::text[]) AS v(ns, n, r)
                 ON CONFLICT (deployment, namespace, name) DO UPDATE SET
                   resource = excluded.resource, updated_ms = excluded.updated_ms
                 WHERE fleet_rollouts.resource <> excluded.resource",
                &[&deployment, &namespaces, &names, &resources, &now],
            )
            .await?;
        let deleted = tx
            .execute(
                "DELETE FROM fleet_rollouts f WHERE f.deployment = $1 AND NOT EXISTS (
                   SELECT 1 FROM unnest($2::text[], $3::text[]) AS v(ns, n)
                   WHERE v.ns = f.namespace AND v.n = f.name)",
                &[&deployment, &namespaces, &names],
            )
            .await?;
        tx.commit().await?;
        Ok(upserted + deleted)
    }

    /// Upserts (`Some`) or removes (`None`) one row while `session` is
    /// the deployment's source. Returns whether a row changed.
    pub async fn put_rollout(
        &self,
        deployment: &str,
        session: &str,
        namespace: &str,
        name: &str,
        resource: Option<&str>,
    ) -> Result<bool, StoreError> {
        let n = match resource {
            Some(json) => {
                self.execute(
                    "INSERT INTO fleet_rollouts (deployment, namespace, name, resource, updated_ms)
                     SELECT $1, $3, $4, $5, $6 FROM fleet_sources s
                      WHERE s.deployment = $1 AND s.session = $2
                     ON CONFLICT (deployment, namespace, name) DO UPDATE SET
                       resource = excluded.resource, updated_ms = excluded.updated_ms
                     WHERE fleet_rollouts.resource <> excluded.resource",
                    &[
                        &deployment,
                        &session,
                        &namespace,
                        &name,
                        &json,
                        &to_i64(now_ms()),
                    ],
                )
                .await?
            }
            None => {
                self.execute(
                    "DELETE FROM fleet_rollouts f USING fleet_sources s
                     WHERE f.deployment = $1 AND f.namespace = $3 AND f.name = $4
                       AND s.deployment = $1 AND s.session = $2",
                    &[&deployment, &session, &namespace, &name],
                )
                .await?
            }
        };
        Ok(n > 0)
    }

    /// Every deployment's rows (one namespace's when given), by
    /// deployment, namespace and name.
    pub async fn fleet_rollouts(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredRollout>, StoreError> {
        let rows = self
            .rows(
                &format!(
                    "SELECT {ROLLOUT_COLUMNS} FROM fleet_rollouts
                     WHERE $1::text IS NULL OR namespace = $1
                     ORDER BY deployment COLLATE \"C\", namespace COLLATE \"C\", name COLLATE \"C\""
                ),
                &[&namespace],
            )
            .await?;
        Ok(rows.iter().map(row).collect::<Result<Vec<_>, _>>()?)
    }
}
