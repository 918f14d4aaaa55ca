//! Admin tokens, stored by hash like deployment tokens. Each method is one
//! statement, so concurrent replicas need no locks here.

use super::Pg;
use crate::controlplane::model::AdminTokenInfo;
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{to_i64, to_u64};
use crate::wire::now_ms;

impl Pg {
    pub async fn insert_admin_token(
        &self,
        info: &AdminTokenInfo,
        hash: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO admin_tokens (id, hash, created_ms, lane) VALUES ($1, $2, $3, $4)",
            &[&info.id, &hash, &to_i64(info.created_ms), &info.lane],
        )
        .await?;
        Ok(())
    }

    pub async fn list_admin_tokens(&self) -> Result<Vec<AdminTokenInfo>, StoreError> {
        self.rows(
            "SELECT id, created_ms, revoked_ms, lane FROM admin_tokens
             ORDER BY created_ms, id COLLATE \"C\"",
            &[],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(AdminTokenInfo {
                id: r.try_get(0)?,
                created_ms: to_u64(r.try_get(1)?),
                revoked_ms: r.try_get::<_, Option<i64>>(2)?.map(to_u64),
                lane: r.try_get(3)?,
            })
        })
        .collect()
    }

    /// Whether the id is known (revoking a revoked token is no error).
    pub async fn revoke_admin_token(&self, id: &str) -> Result<bool, StoreError> {
        // Matches every known id; a revoked token keeps its first time.
        let n = self
            .execute(
                "UPDATE admin_tokens SET revoked_ms = COALESCE(revoked_ms, $2) WHERE id = $1",
                &[&id, &to_i64(now_ms())],
            )
            .await?;
        Ok(n > 0)
    }

    pub async fn admin_auth_enabled(&self) -> Result<bool, StoreError> {
        Ok(self
            .row("SELECT 1 FROM admin_tokens LIMIT 1", &[])
            .await?
            .is_some())
    }

    /// The scope of a valid admin token (see the SQLite backend).
    pub async fn admin_hash_scope(
        &self,
        hash: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        match self
            .row(
                "SELECT id, lane FROM admin_tokens WHERE hash = $1 AND revoked_ms IS NULL",
                &[&hash],
            )
            .await?
        {
            Some(r) => Ok(Some((r.try_get(0)?, r.try_get(1)?))),
            None => Ok(None),
        }
    }
}
