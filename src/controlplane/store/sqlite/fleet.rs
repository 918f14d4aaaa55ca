//! The fleet-wide projection of Rollouts in the SQLite file.

use std::collections::HashSet;

use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::controlplane::model::{ROLLOUT_COLUMNS, RolloutRow, StoredRollout};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{to_i64, to_u64};
use crate::wire::now_ms;

const UPSERT: &str =
    "INSERT INTO fleet_rollouts (deployment, namespace, name, resource, updated_ms)
     VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (deployment, namespace, name) DO UPDATE SET
       resource = excluded.resource, updated_ms = excluded.updated_ms
     WHERE fleet_rollouts.resource <> excluded.resource";

impl Sqlite {
    /// Makes `rows` the deployment's whole set and `session` its source,
    /// in one transaction; an unchanged row is not written. Returns how
    /// many rows changed.
    pub fn replace_rollouts(
        &self,
        deployment: &str,
        session: &str,
        rows: &[RolloutRow],
    ) -> Result<u64, StoreError> {
        let now = to_i64(now_ms());
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO fleet_sources (deployment, session, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (deployment) DO UPDATE SET
                   session = excluded.session, updated_ms = excluded.updated_ms",
                params![deployment, session, now],
            )?;
            let mut changed = 0u64;
            {
                let mut up = tx.prepare_cached(UPSERT)?;
                for r in rows {
                    changed += up.execute(params![deployment, r.namespace, r.name, r.resource, now])?
                        as u64;
                }
                let keep: HashSet<(&str, &str)> = rows
                    .iter()
                    .map(|r| (r.namespace.as_str(), r.name.as_str()))
                    .collect();
                let mut st =
                    tx.prepare("SELECT namespace, name FROM fleet_rollouts WHERE deployment = ?1")?;
                let stored = st
                    .query_map([deployment], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let mut del = tx.prepare_cached(
                    "DELETE FROM fleet_rollouts WHERE deployment = ?1 AND namespace = ?2 AND name = ?3",
                )?;
                for (ns, name) in &stored {
                    if !keep.contains(&(ns.as_str(), name.as_str())) {
                        changed += del.execute(params![deployment, ns, name])? as u64;
                    }
                }
            }
            tx.commit()?;
            Ok(changed)
        })
    }

    /// Upserts (`Some`) or removes (`None`) one row while `session` is
    /// the deployment's source. Returns whether a row changed.
    pub fn put_rollout(
        &self,
        deployment: &str,
        session: &str,
        namespace: &str,
        name: &str,
        resource: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = to_i64(now_ms());
        self.with(|c| {
            let tx = c.transaction()?;
            let source: Option<String> = tx
                .query_row(
                    "SELECT session FROM fleet_sources WHERE deployment = ?1",
                    [deployment],
                    |r| r.get(0),
                )
                .optional()?;
            if source.as_deref() != Some(session) {
                return Ok(false);
            }
            let n = match resource {
                Some(json) => tx.execute(UPSERT, params![deployment, namespace, name, json, now])?,
                None => tx.execute(
                    "DELETE FROM fleet_rollouts WHERE deployment = ?1 AND namespace = ?2 AND name = ?3",
                    params![deployment, namespace, name],
                )?,
            };
            tx.commit()?;
            Ok(n > 0)
        })
    }

    /// Every deployment's rows (one namespace's when given), by
    /// deployment, namespace and name.
    pub fn fleet_rollouts(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredRollout>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {ROLLOUT_COLUMNS} FROM fleet_rollouts
                 WHERE ?1 IS NULL OR namespace = ?1 ORDER BY deployment, namespace, name"
            ))?;
            let rows = st
                .query_map([namespace], |r| {
                    Ok(StoredRollout {
                        deployment: r.get(0)?,
                        namespace: r.get(1)?,
                        name: r.get(2)?,
                        resource: r.get(3)?,
                        updated_ms: to_u64(r.get(4)?),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
