//! Deployments and deployment tokens.
//!
//! Guarantees beyond SQLite's, for N replicas: two creations of one name
//! race to the primary key and the loser gets [`StoreError::Exists`];
//! rotations and revocations of one deployment lock its row, so they run
//! one after the other (two rotations at once leave one token, not two).

use std::collections::HashSet;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Row, Transaction};

use super::Pg;
use crate::controlplane::model::{Authenticated, DeploymentRow, TokenInfo};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{new_token, to_i64, to_u64};
use crate::wire::now_ms;
use crate::wire::token::SecretToken;

const TOKEN_COLUMNS: &str = "id, deployment, created_ms, expires_ms, revoked_ms";

fn token_row(r: &Row) -> Result<TokenInfo, tokio_postgres::Error> {
    Ok(TokenInfo {
        id: r.try_get(0)?,
        deployment: r.try_get(1)?,
        created_ms: to_u64(r.try_get(2)?),
        expires_ms: r.try_get::<_, Option<i64>>(3)?.map(to_u64),
        revoked_ms: r.try_get::<_, Option<i64>>(4)?.map(to_u64),
    })
}

/// Stores a new token of `deployment` (by hash) in the caller's
/// transaction.
async fn insert_token(
    tx: &Transaction<'_>,
    deployment: &str,
) -> Result<(TokenInfo, SecretToken), StoreError> {
    let (info, secret) = new_token(deployment)?;
    tx.execute(
        "INSERT INTO tokens (id, deployment, hash, created_ms) VALUES ($1, $2, $3, $4)",
        &[
            &info.id,
            &deployment,
            &secret.hash(),
            &to_i64(info.created_ms),
        ],
    )
    .await?;
    Ok((info, secret))
}

/// Locks the deployment's row until the transaction ends (other token
/// changes of it wait; inserts that reference it do not), or fails with
/// [`StoreError::NoDeployment`].
async fn lock_deployment(tx: &Transaction<'_>, name: &str) -> Result<(), StoreError> {
    tx.query_opt(
        "SELECT name FROM deployments WHERE name = $1 FOR NO KEY UPDATE",
        &[&name],
    )
    .await?
    .map(|_| ())
    .ok_or_else(|| StoreError::NoDeployment(name.to_owned()))
}

impl Pg {
    pub async fn create_deployment(
        &self,
        name: &str,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "INSERT INTO deployments (name, created_ms) VALUES ($1, $2)",
            &[&name, &to_i64(now_ms())],
        )
        .await
        .map_err(|e| {
            // The only unique key of the table is the name.
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                StoreError::Exists(name.to_owned())
            } else {
                e.into()
            }
        })?;
        let issued = insert_token(&tx, name).await?;
        tx.commit().await?;
        Ok(issued)
    }

    pub async fn list_deployments(&self) -> Result<Vec<DeploymentRow>, StoreError> {
        self.rows(
            "SELECT name, created_ms FROM deployments ORDER BY name COLLATE \"C\"",
            &[],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(DeploymentRow {
                name: r.try_get(0)?,
                created_ms: to_u64(r.try_get(1)?),
            })
        })
        .collect()
    }

    pub async fn deployment_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self
            .row("SELECT 1 FROM deployments WHERE name = $1", &[&name])
            .await?
            .is_some())
    }

    pub async fn rotate(
        &self,
        deployment: &str,
        overlap: Duration,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        lock_deployment(&tx, deployment).await?;
        let until = now_ms().saturating_add(u64::try_from(overlap.as_millis()).unwrap_or(0));
        tx.execute(
            "UPDATE tokens SET expires_ms = $2 WHERE deployment = $1 AND revoked_ms IS NULL
             AND (expires_ms IS NULL OR expires_ms > $2)",
            &[&deployment, &to_i64(until)],
        )
        .await?;
        let issued = insert_token(&tx, deployment).await?;
        tx.commit().await?;
        Ok(issued)
    }

    pub async fn revoke(
        &self,
        deployment: &str,
        token_id: Option<&str>,
    ) -> Result<usize, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        lock_deployment(&tx, deployment).await?;
        let now = to_i64(now_ms());
        let n = match token_id {
            Some(id) => {
                // Known: the token exists, revoked before or not.
                let known = tx
                    .query_opt(
                        "SELECT 1 FROM tokens WHERE deployment = $1 AND id = $2",
                        &[&deployment, &id],
                    )
                    .await?;
                if known.is_none() {
                    return Err(StoreError::NoToken(id.to_owned(), deployment.to_owned()));
                }
                tx.execute(
                    "UPDATE tokens SET revoked_ms = $3 WHERE deployment = $1 AND id = $2
                     AND revoked_ms IS NULL",
                    &[&deployment, &id, &now],
                )
                .await?
            }
            None => {
                tx.execute(
                    "UPDATE tokens SET revoked_ms = $2 WHERE deployment = $1
                     AND revoked_ms IS NULL",
                    &[&deployment, &now],
                )
                .await?
            }
        };
        tx.commit().await?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub async fn list_tokens(&self, deployment: &str) -> Result<Vec<TokenInfo>, StoreError> {
        // One statement: the deployment's row, joined with its tokens if it
        // has any, so "no such deployment" and "no tokens" differ.
        let rows = self
            .rows(
                "SELECT t.id, t.deployment, t.created_ms, t.expires_ms, t.revoked_ms
                 FROM deployments d LEFT JOIN tokens t ON t.deployment = d.name
                 WHERE d.name = $1 ORDER BY t.created_ms, t.id COLLATE \"C\"",
                &[&deployment],
            )
            .await?;
        if rows.is_empty() {
            return Err(StoreError::NoDeployment(deployment.to_owned()));
        }
        let mut tokens = Vec::with_capacity(rows.len());
        for r in &rows {
            if r.try_get::<_, Option<String>>(0)?.is_some() {
                tokens.push(token_row(r)?);
            }
        }
        Ok(tokens)
    }

    pub async fn authenticate(
        &self,
        token: &SecretToken,
    ) -> Result<Option<Authenticated>, StoreError> {
        let row = self
            .row(
                &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1"),
                &[&token.hash()],
            )
            .await?;
        Ok(row
            .map(|r| token_row(&r))
            .transpose()?
            .and_then(|t| t.authenticates(now_ms())))
    }

    pub async fn valid_token_ids(&self) -> Result<HashSet<String>, StoreError> {
        self.rows(
            "SELECT id FROM tokens WHERE revoked_ms IS NULL
             AND (expires_ms IS NULL OR expires_ms > $1)",
            &[&to_i64(now_ms())],
        )
        .await?
        .iter()
        .map(|r| Ok(r.try_get(0)?))
        .collect()
    }

    pub async fn token_valid(&self, token_id: &str) -> Result<bool, StoreError> {
        let row = self
            .row(
                &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = $1"),
                &[&token_id],
            )
            .await?;
        Ok(row
            .map(|r| token_row(&r))
            .transpose()?
            .is_some_and(|t| t.is_valid_at(now_ms())))
    }
}

#[cfg(test)]
mod tests {
    use crate::controlplane::test_store::Backend;

    /// PostgreSQL's counterpart of the SQLite file check: no row of any
    /// table, as text, holds a token's clear text; its hash is there.
    #[tokio::test]
    async fn token_clear_text_never_reaches_postgres() {
        let b = Backend::postgres().await;
        let s = b.store();
        let (_, created) = s.create_deployment("prod-eu").await.unwrap();
        let (_, rotated) = s
            .rotate("prod-eu", std::time::Duration::from_secs(60))
            .await
            .unwrap();
        let (_, admin) = s.create_admin_token(None).await.unwrap();
        let pg = s.pg().unwrap();
        let c = pg.client().await.unwrap();
        let tables: Vec<String> = c
            .query(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = 'public'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(tables.iter().any(|t| t == "tokens"), "{tables:?}");
        let mut everything = String::new();
        for t in &tables {
            for r in c
                .query(&format!("SELECT t::text FROM {t} t"), &[])
                .await
                .unwrap()
            {
                everything.push_str(r.get(0));
                everything.push('\n');
            }
        }
        for token in [&created, &rotated, &admin] {
            // The random part, without the prefix every token shares.
            let secret = token.expose().rsplit('_').next().unwrap();
            assert!(secret.len() >= 64 && !everything.contains(secret));
            assert!(everything.contains(&token.hash()));
        }
    }
}
