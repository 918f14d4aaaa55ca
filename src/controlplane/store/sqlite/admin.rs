//! Admin tokens in the SQLite file, stored by hash.

use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::controlplane::model::AdminTokenInfo;
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::wire::now_ms;

impl Sqlite {
    pub fn insert_admin_token(&self, info: &AdminTokenInfo, hash: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO admin_tokens (id, hash, created_ms, lane) VALUES (?1, ?2, ?3, ?4)",
                params![info.id, hash, to_i64(info.created_ms), info.lane],
            )?;
            Ok(())
        })
    }

    pub fn list_admin_tokens(&self) -> Result<Vec<AdminTokenInfo>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, created_ms, revoked_ms, lane FROM admin_tokens ORDER BY created_ms, id",
            )?;
            let rows = st
                .query_map([], |r| {
                    Ok(AdminTokenInfo {
                        id: r.get(0)?,
                        created_ms: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                        revoked_ms: r
                            .get::<_, Option<i64>>(2)?
                            .map(|v| u64::try_from(v).unwrap_or(0)),
                        lane: r.get(3)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Revokes one admin token; `false` when it does not exist.
    pub fn revoke_admin_token(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let known: Option<String> = c
                .query_row("SELECT id FROM admin_tokens WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()?;
            if known.is_some() {
                c.execute(
                    "UPDATE admin_tokens SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL",
                    params![id, to_i64(now_ms())],
                )?;
            }
            Ok(known.is_some())
        })
    }

    /// Whether any admin token was ever created. Revoked ones count: once
    /// enabled, admin authentication stays on, so revoking the last token
    /// locks the API rather than opening it.
    pub fn admin_auth_enabled(&self) -> Result<bool, StoreError> {
        self.with(|c| {
            let n: i64 = c.query_row("SELECT count(*) FROM admin_tokens", [], |r| r.get(0))?;
            Ok(n > 0)
        })
    }

    /// The id and lane of the admin token with this SHA-256 when it
    /// exists and is not revoked (no lane: every lane).
    pub fn admin_hash_scope(
        &self,
        hash: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT id, lane FROM admin_tokens WHERE hash = ?1 AND revoked_ms IS NULL",
                [hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
        })
    }
}
