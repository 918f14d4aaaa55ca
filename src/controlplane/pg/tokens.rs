//! Deployments and deployment tokens.

use std::collections::HashSet;
use std::time::Duration;

use super::Pg;
use crate::controlplane::store::{Authenticated, DeploymentRow, StoreError, TokenInfo};
use crate::wire::token::SecretToken;

fn missing() -> StoreError {
    StoreError::Pool("not written yet".into())
}

impl Pg {
    pub async fn create_deployment(
        &self,
        _name: &str,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        Err(missing())
    }
    pub async fn list_deployments(&self) -> Result<Vec<DeploymentRow>, StoreError> {
        Err(missing())
    }
    pub async fn deployment_exists(&self, _name: &str) -> Result<bool, StoreError> {
        Err(missing())
    }
    pub async fn rotate(
        &self,
        _deployment: &str,
        _overlap: Duration,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        Err(missing())
    }
    pub async fn revoke(
        &self,
        _deployment: &str,
        _token_id: Option<&str>,
    ) -> Result<usize, StoreError> {
        Err(missing())
    }
    pub async fn list_tokens(&self, _deployment: &str) -> Result<Vec<TokenInfo>, StoreError> {
        Err(missing())
    }
    pub async fn authenticate(
        &self,
        _token: &SecretToken,
    ) -> Result<Option<Authenticated>, StoreError> {
        Err(missing())
    }
    pub async fn valid_token_ids(&self) -> Result<HashSet<String>, StoreError> {
        Err(missing())
    }
    pub async fn token_valid(&self, _token_id: &str) -> Result<bool, StoreError> {
        Err(missing())
    }
}
