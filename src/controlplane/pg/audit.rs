//! The audit log.

use super::Pg;
use crate::controlplane::store::{AuditRow, NewAudit, StoreError};

impl Pg {
    /// Inserts one record; returns its id.
    pub async fn append_audit_at(&self, _a: &NewAudit<'_>, _at_ms: u64) -> Result<i64, StoreError> {
        Err(StoreError::Pool("not written yet".into()))
    }
    pub async fn list_audit_before(
        &self,
        _deployment: &str,
        _limit: usize,
        _before: Option<i64>,
    ) -> Result<Vec<AuditRow>, StoreError> {
        Err(StoreError::Pool("not written yet".into()))
    }
}
