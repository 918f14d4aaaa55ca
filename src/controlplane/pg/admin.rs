//! Admin tokens.

use super::Pg;
use crate::controlplane::admin::AdminTokenInfo;
use crate::controlplane::store::StoreError;

fn missing() -> StoreError {
    StoreError::Pool("not written yet".into())
}

impl Pg {
    pub async fn insert_admin_token(
        &self,
        _info: &AdminTokenInfo,
        _hash: &str,
    ) -> Result<(), StoreError> {
        Err(missing())
    }
    pub async fn list_admin_tokens(&self) -> Result<Vec<AdminTokenInfo>, StoreError> {
        Err(missing())
    }
    /// Whether the id is known (revoking a revoked token is no error).
    pub async fn revoke_admin_token(&self, _id: &str) -> Result<bool, StoreError> {
        Err(missing())
    }
    pub async fn admin_auth_enabled(&self) -> Result<bool, StoreError> {
        Err(missing())
    }
    pub async fn admin_hash_valid(&self, _hash: &str) -> Result<bool, StoreError> {
        Err(missing())
    }
}
