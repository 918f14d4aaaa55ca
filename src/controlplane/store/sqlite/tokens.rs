//! Deployments and deployment tokens in the SQLite file.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, params};

use super::Sqlite;
use crate::controlplane::model::{Authenticated, DeploymentRow, TokenInfo};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{new_token, to_i64, to_u64};
use crate::wire::now_ms;
use crate::wire::token::{SecretToken, hash_token};

impl Sqlite {
    /// Creates a deployment and its first token. The token is returned in
    /// clear exactly once; only its hash is kept.
    pub fn create_deployment(&self, name: &str) -> Result<(TokenInfo, SecretToken), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let exists: Option<String> = tx
                .query_row(
                    "SELECT name FROM deployments WHERE name = ?1",
                    [name],
                    |r| r.get(0),
                )
                .optional()?;
            if exists.is_some() {
                return Err(StoreError::Exists(name.to_owned()));
            }
            tx.execute(
                "INSERT INTO deployments (name, created_ms) VALUES (?1, ?2)",
                params![name, to_i64(now_ms())],
            )?;
            let issued = insert_token(&tx, name)?;
            tx.commit()?;
            Ok(issued)
        })
    }

    pub fn list_deployments(&self) -> Result<Vec<DeploymentRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare("SELECT name, created_ms FROM deployments ORDER BY name")?;
            let rows = st
                .query_map([], |r| {
                    Ok(DeploymentRow {
                        name: r.get(0)?,
                        created_ms: to_u64(r.get(1)?),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    pub fn deployment_exists(&self, name: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT count(*) FROM deployments WHERE name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )? > 0)
        })
    }

    /// Issues a new token and lets every other still-valid token of the
    /// deployment expire after `overlap`, so a running operator can switch
    /// without a gap. An `overlap` of zero ends them at once.
    pub fn rotate(
        &self,
        deployment: &str,
        overlap: std::time::Duration,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            ensure_deployment(&tx, deployment)?;
            let until = now_ms().saturating_add(u64::try_from(overlap.as_millis()).unwrap_or(0));
            tx.execute(
                "UPDATE tokens SET expires_ms = ?2 WHERE deployment = ?1 AND revoked_ms IS NULL
                 AND (expires_ms IS NULL OR expires_ms > ?2)",
                params![deployment, to_i64(until)],
            )?;
            let issued = insert_token(&tx, deployment)?;
            tx.commit()?;
            Ok(issued)
        })
    }

    /// Revokes one token, or every token of the deployment when `token_id`
    /// is `None`. Returns how many were revoked.
    pub fn revoke(&self, deployment: &str, token_id: Option<&str>) -> Result<usize, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            ensure_deployment(&tx, deployment)?;
            let n = match token_id {
                Some(id) => {
                    let n = tx.execute(
                        "UPDATE tokens SET revoked_ms = ?3 WHERE deployment = ?1 AND id = ?2
                         AND revoked_ms IS NULL",
                        params![deployment, id, to_i64(now_ms())],
                    )?;
                    let known: i64 = tx.query_row(
                        "SELECT count(*) FROM tokens WHERE deployment = ?1 AND id = ?2",
                        params![deployment, id],
                        |r| r.get(0),
                    )?;
                    if known == 0 {
                        return Err(StoreError::NoToken(id.to_owned(), deployment.to_owned()));
                    }
                    n
                }
                None => tx.execute(
                    "UPDATE tokens SET revoked_ms = ?2 WHERE deployment = ?1 AND revoked_ms IS NULL",
                    params![deployment, to_i64(now_ms())],
                )?,
            };
            tx.commit()?;
            Ok(n)
        })
    }

    pub fn list_tokens(&self, deployment: &str) -> Result<Vec<TokenInfo>, StoreError> {
        self.with(|c| {
            ensure_deployment(c, deployment)?;
            let mut st = c.prepare(
                "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                 WHERE deployment = ?1 ORDER BY created_ms, id",
            )?;
            let rows = st
                .query_map([deployment], row_to_token)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Looks a presented token up by its hash; `None` when unknown, revoked
    /// or expired.
    pub fn authenticate(&self, token: &SecretToken) -> Result<Option<Authenticated>, StoreError> {
        let hash = token.hash();
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                     WHERE hash = ?1",
                    [hash],
                    row_to_token,
                )
                .optional()?;
            Ok(row.and_then(|t| t.authenticates(now_ms())))
        })
    }

    /// The ids of every token valid now: one query re-checks all live
    /// connections at once.
    pub fn valid_token_ids(&self) -> Result<HashSet<String>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT id FROM tokens WHERE revoked_ms IS NULL
                 AND (expires_ms IS NULL OR expires_ms > ?1)",
            )?;
            let ids = st
                .query_map([to_i64(now_ms())], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
        })
    }

    /// Whether a token (by id) is still valid now.
    pub fn token_valid(&self, token_id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                     WHERE id = ?1",
                    [token_id],
                    row_to_token,
                )
                .optional()?;
            Ok(row.is_some_and(|t| t.is_valid_at(now_ms())))
        })
    }
}

fn row_to_token(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenInfo> {
    Ok(TokenInfo {
        id: r.get(0)?,
        deployment: r.get(1)?,
        created_ms: to_u64(r.get(2)?),
        expires_ms: r.get::<_, Option<i64>>(3)?.map(to_u64),
        revoked_ms: r.get::<_, Option<i64>>(4)?.map(to_u64),
    })
}

fn ensure_deployment(c: &Connection, name: &str) -> Result<(), StoreError> {
    let n: i64 = c.query_row(
        "SELECT count(*) FROM deployments WHERE name = ?1",
        [name],
        |r| r.get(0),
    )?;
    if n == 0 {
        return Err(StoreError::NoDeployment(name.to_owned()));
    }
    Ok(())
}

fn insert_token(c: &Connection, deployment: &str) -> Result<(TokenInfo, SecretToken), StoreError> {
    let (info, secret) = new_token(deployment)?;
    c.execute(
        "INSERT INTO tokens (id, deployment, hash, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![
            info.id,
            deployment,
            hash_token(secret.expose()),
            to_i64(info.created_ms)
        ],
    )?;
    Ok((info, secret))
}
