//! How values are written to and read from either backend: integers,
//! alert states and severities, audit details, and new tokens. Both
//! backends use these, so a row reads back the same from SQLite and
//! PostgreSQL.

use crate::controlplane::model::{NewAudit, TokenInfo};
use crate::wire::token::SecretToken;
use crate::wire::{AlertState, Severity, now_ms};

use super::error::StoreError;

/// The alert columns, in the order both backends' row readers expect.
pub const COLUMNS: &str = "id, deployment, alert_id, boot_id, connection_id, \
                       received_ms, at, severity, reason, namespace, object, message, alert_key, \
                       alert_state";

/// An alert state as stored.
pub fn state_str(s: AlertState) -> &'static str {
    match s {
        AlertState::Firing => "firing",
        AlertState::Resolved => "resolved",
    }
}

/// A stored state back; only [`state_str`] values are written.
pub fn parse_state(s: &str) -> AlertState {
    match s {
        "resolved" => AlertState::Resolved,
        _ => AlertState::Firing,
    }
}

/// A stored severity back. Only `Severity::as_str` values are written;
/// anything else is a hand-edited database, shown as the milder severity.
pub fn parse_severity(s: &str) -> Severity {
    Severity::parse(s).unwrap_or(Severity::Warning)
}

pub fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// `detail` as stored: JSON text, or NULL.
pub fn detail_text(a: &NewAudit<'_>) -> Option<String> {
    a.detail.as_ref().map(|d| d.to_string())
}

/// A stored `detail` back as JSON; NULL (or text that is not JSON, from a
/// hand-edited database) is `null`.
pub fn parse_detail(text: Option<String>) -> serde_json::Value {
    text.and_then(|d| serde_json::from_str(&d).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// A new deployment token: its metadata and its clear text, for either
/// backend to store (by hash).
pub fn new_token(deployment: &str) -> Result<(TokenInfo, SecretToken), StoreError> {
    let secret = SecretToken::generate()?;
    let info = TokenInfo {
        id: format!("tok_{}", &crate::wire::random_id()[..12]),
        deployment: deployment.to_owned(),
        created_ms: now_ms(),
        expires_ms: None,
        revoked_ms: None,
    };
    Ok((info, secret))
}
