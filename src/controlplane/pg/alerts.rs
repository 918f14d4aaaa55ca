//! Alerts: the history and the active set.

use std::collections::HashMap;

use super::Pg;
use crate::controlplane::active::ActiveAlert;
use crate::controlplane::alerts::{AlertRow, AlertSummary, Origin};
use crate::controlplane::store::StoreError;
use crate::wire::{Alert, Severity};

fn missing() -> StoreError {
    StoreError::Pool("not written yet".into())
}

impl Pg {
    pub async fn insert_alert(&self, _origin: &Origin<'_>, _a: &Alert) -> Result<bool, StoreError> {
        Err(missing())
    }
    pub async fn list_alerts(
        &self,
        _deployment: &str,
        _limit: usize,
        _before: Option<i64>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        Err(missing())
    }
    pub async fn alert_summary(&self, _deployment: &str) -> Result<AlertSummary, StoreError> {
        Err(missing())
    }
    pub async fn list_active(&self, _deployment: &str) -> Result<Vec<ActiveAlert>, StoreError> {
        Err(missing())
    }
    pub async fn active(
        &self,
        _deployment: &str,
        _key: &str,
    ) -> Result<Option<ActiveAlert>, StoreError> {
        Err(missing())
    }
    pub async fn active_counts(&self) -> Result<HashMap<String, u64>, StoreError> {
        Err(missing())
    }
    pub async fn active_severities(
        &self,
        _key: &str,
    ) -> Result<HashMap<String, Severity>, StoreError> {
        Err(missing())
    }
}
