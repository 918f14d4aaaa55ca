//! The session audit log's records: what the server writes and the
//! operators send (`audit` frames), and what is read back.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub deployment: String,
    pub connection_id: Option<String>,
    pub at_ms: u64,
    /// `server` for records the control plane writes, `operator` for records
    /// the operator sent in `audit` frames.
    pub source: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: serde_json::Value,
}

/// A new audit record.
#[derive(Debug, Clone, Default)]
pub struct NewAudit<'a> {
    pub deployment: &'a str,
    pub connection_id: Option<&'a str>,
    pub source: &'a str,
    pub actor: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub outcome: &'a str,
    pub detail: Option<serde_json::Value>,
}

impl NewAudit<'_> {
    /// The record as read back once stored with `id` at `at_ms`.
    pub fn stored(&self, id: i64, at_ms: u64) -> AuditRow {
        AuditRow {
            id,
            deployment: self.deployment.to_owned(),
            connection_id: self.connection_id.map(str::to_owned),
            at_ms,
            source: self.source.to_owned(),
            actor: self.actor.to_owned(),
            action: self.action.to_owned(),
            target: self.target.to_owned(),
            outcome: self.outcome.to_owned(),
            detail: self.detail.clone().unwrap_or(serde_json::Value::Null),
        }
    }
}
