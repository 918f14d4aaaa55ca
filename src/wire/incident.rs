//! The `incident` frame (operator -> control plane) and its
//! acknowledgement `incident_ack` (control plane -> operator): an agent's
//! incident on its way to its tenant's support lane (docs/support.md).
//! And the way back: `incident_update` (control plane -> operator) says
//! support acknowledged or resolved one, and `incident_update_ack`
//! (operator -> control plane) says the cluster's copy shows it; only
//! an operator that advertises [`CAP_INCIDENT_UPDATES`] is sent them.
//!
//! Guarantees: every field has a byte bound ([`limits`]) and
//! [`IncidentRecord::validate`] checks them and the shapes; the operator
//! checks before it queues, the control plane applies the same check (a
//! failure is a malformed frame, close 4003). The `detail` is the one
//! support reads, already masked by the operator (`crate::redact`); the
//! control plane masks it again before it stores it, so a key an older
//! operator let through is not kept either.

use serde::{Deserialize, Serialize};

/// Byte bounds of the fields of an `incident`.
pub mod limits {
    /// `inc-` and 24 hex digits.
    pub const ID: usize = 28;
    /// A tenant is a DNS label.
    pub const TENANT: usize = 63;
    /// An Agent's name is a DNS subdomain.
    pub const AGENT: usize = 253;
    pub const SUMMARY: usize = 2048;
    pub const DETAIL: usize = 16 * 1024;
    pub const CORRELATION: usize = 128;
    pub const RECEIVED_AT: usize = 64;
}

/// Operator -> control plane: one incident, stored in the tenant's lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentRecord {
    /// The `Incident`'s name; the lane keeps one incident per deployment
    /// and id, so a resent one is stored once.
    pub id: String,
    pub tenant: String,
    pub agent: String,
    /// `info`, `warning`, `error` or `critical`.
    pub severity: String,
    /// What the tenant is shown (redacted).
    pub summary: String,
    /// What support reads (secrets masked).
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub correlation_id: String,
    /// When the operator received it (RFC 3339).
    pub received_at: String,
}

/// Control plane -> operator: the incident `id` is stored (or was
/// already), in `lane` (none when the tenant has no lane registered; it
/// waits there for one, unrouted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentAck {
    pub id: String,
    #[serde(default)]
    pub lane: Option<String>,
}

/// The capability (in `hello`) of an operator that takes
/// `incident_update` frames.
pub const CAP_INCIDENT_UPDATES: &str = "incident-updates";

/// Where support has taken an incident, as its tenant is told. Only moves
/// forward: routed, acknowledged, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaneState {
    Routed,
    Acknowledged,
    Resolved,
}

impl LaneState {
    pub const ALL: [LaneState; 3] = [
        LaneState::Routed,
        LaneState::Acknowledged,
        LaneState::Resolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LaneState::Routed => "routed",
            LaneState::Acknowledged => "acknowledged",
            LaneState::Resolved => "resolved",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// Control plane -> operator: support moved incident `id` to `state` at
/// `at` (RFC 3339, the control plane's clock). Sent again until
/// acknowledged with the same state; applying it twice changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentUpdate {
    pub id: String,
    pub state: LaneState,
    pub at: String,
    /// The lane it is in.
    #[serde(default)]
    pub lane: Option<String>,
}

impl IncidentUpdate {
    pub fn validate(&self) -> Result<(), IncidentError> {
        if !valid_id(&self.id) {
            return Err(IncidentError::BadId(self.id.clone()));
        }
        if self.at.len() > limits::RECEIVED_AT
            || self.at.parse::<k8s_openapi::jiff::Timestamp>().is_err()
        {
            return Err(IncidentError::BadTime(self.at.clone()));
        }
        if let Some(l) = &self.lane
            && !crate::names::is_dns1123_label(l)
        {
            return Err(IncidentError::BadLane(l.clone()));
        }
        Ok(())
    }
}

/// Operator -> control plane: the cluster's copy of `id` shows `state`
/// (or the incident is gone there: past its retention).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentUpdateAck {
    pub id: String,
    pub state: LaneState,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IncidentError {
    #[error("field at {0:?} is not an RFC 3339 time")]
    BadTime(String),
    #[error("field lane {0:?} is not a DNS label")]
    BadLane(String),
    #[error("field {0} is empty")]
    Empty(&'static str),
    #[error("field {field} has {len} bytes; the limit is {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("field id {0:?} is not an incident id (inc- and 24 hex digits)")]
    BadId(String),
    #[error("field tenant {0:?} is not a DNS label")]
    BadTenant(String),
    #[error("field severity {0:?} is not info, warning, error or critical")]
    BadSeverity(String),
    #[error("field {field} holds the control character U+{code:04X}")]
    ControlChar { field: &'static str, code: u32 },
}

/// Whether `id` has the shape of an incident's name: `inc-` and 24
/// lowercase hex digits (checked before an id is used in a path).
pub fn valid_id(id: &str) -> bool {
    id.len() == limits::ID
        && id.starts_with("inc-")
        && id[4..]
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// The severities an incident may have.
pub const SEVERITIES: [&str; 4] = ["info", "warning", "error", "critical"];

impl IncidentRecord {
    /// Checks the bounds and shapes a receiver relies on.
    pub fn validate(&self) -> Result<(), IncidentError> {
        let fields = [
            ("id", &self.id, limits::ID, true, false),
            ("tenant", &self.tenant, limits::TENANT, true, false),
            ("agent", &self.agent, limits::AGENT, true, false),
            ("summary", &self.summary, limits::SUMMARY, true, true),
            ("detail", &self.detail, limits::DETAIL, false, true),
            (
                "correlation_id",
                &self.correlation_id,
                limits::CORRELATION,
                false,
                false,
            ),
            (
                "received_at",
                &self.received_at,
                limits::RECEIVED_AT,
                true,
                false,
            ),
        ];
        for (field, value, max, required, free_text) in fields {
            if required && value.is_empty() {
                return Err(IncidentError::Empty(field));
            }
            if value.len() > max {
                return Err(IncidentError::TooLong {
                    field,
                    len: value.len(),
                    max,
                });
            }
            if let Some(c) = value
                .chars()
                .find(|c| c.is_control() && !(free_text && matches!(c, '\n' | '\t')))
            {
                return Err(IncidentError::ControlChar {
                    field,
                    code: c as u32,
                });
            }
        }
        if !valid_id(&self.id) {
            return Err(IncidentError::BadId(self.id.clone()));
        }
        if !crate::names::is_dns1123_label(&self.tenant) {
            return Err(IncidentError::BadTenant(self.tenant.clone()));
        }
        if !SEVERITIES.contains(&self.severity.as_str()) {
            return Err(IncidentError::BadSeverity(self.severity.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::*;

    pub(crate) fn record() -> IncidentRecord {
        IncidentRecord {
            id: "inc-0123456789abcdef01234567".into(),
            tenant: "acme".into(),
            agent: "assistant".into(),
            severity: "error".into(),
            summary: "The calendar sync failed.".into(),
            detail: "Traceback\n\tat x".into(),
            correlation_id: "conv-7".into(),
            received_at: "2026-12-06T10:00:00Z".into(),
        }
    }

    #[test]
    fn incident_frames_round_trip_and_are_checked() {
        let f = Frame::Incident(record());
        let text = f.to_json().unwrap_or_default();
        assert!(text.contains(r#""type":"incident""#), "{text}");
        assert_eq!(Frame::from_json(&text).ok(), Some(f));
        let ack = Frame::IncidentAck(IncidentAck {
            id: "inc-0123456789abcdef01234567".into(),
            lane: Some("acme-desk".into()),
        });
        let text = ack.to_json().unwrap_or_default();
        assert_eq!(Frame::from_json(&text).ok(), Some(ack));
        assert_eq!(
            Frame::from_json(r#"{"type":"incident_ack","id":"x"}"#).ok(),
            Some(Frame::IncidentAck(IncidentAck {
                id: "x".into(),
                lane: None
            }))
        );

        let up = Frame::IncidentUpdate(IncidentUpdate {
            id: "inc-0123456789abcdef01234567".into(),
            state: LaneState::Acknowledged,
            at: "2026-12-06T10:00:00Z".into(),
            lane: Some("acme-desk".into()),
        });
        let text = up.to_json().unwrap_or_default();
        assert!(text.contains(r#""state":"acknowledged""#), "{text}");
        assert_eq!(Frame::from_json(&text).ok(), Some(up.clone()));
        if let Frame::IncidentUpdate(u) = up {
            assert_eq!(u.validate(), Ok(()));
            let late = IncidentUpdate {
                at: "yesterday".into(),
                ..u.clone()
            };
            assert!(matches!(late.validate(), Err(IncidentError::BadTime(_))));
            let lane = IncidentUpdate {
                lane: Some("A B".into()),
                ..u
            };
            assert!(matches!(lane.validate(), Err(IncidentError::BadLane(_))));
        }
        assert!(
            Frame::from_json(r#"{"type":"incident_update_ack","id":"x","state":"reopened"}"#)
                .is_err(),
            "an unknown state is refused"
        );
        assert!(LaneState::Routed < LaneState::Acknowledged);
        assert_eq!(LaneState::parse("resolved"), Some(LaneState::Resolved));

        assert_eq!(record().validate(), Ok(()));
        let bad: Vec<(IncidentRecord, &str)> = vec![
            (
                IncidentRecord {
                    id: "inc-../x".into(),
                    ..record()
                },
                "field id",
            ),
            (
                IncidentRecord {
                    tenant: "Not A Label".into(),
                    ..record()
                },
                "field tenant",
            ),
            (
                IncidentRecord {
                    severity: "fatal".into(),
                    ..record()
                },
                "field severity",
            ),
            (
                IncidentRecord {
                    summary: String::new(),
                    ..record()
                },
                "field summary is empty",
            ),
            (
                IncidentRecord {
                    detail: "x".repeat(limits::DETAIL + 1),
                    ..record()
                },
                "field detail has",
            ),
            (
                IncidentRecord {
                    agent: "a\u{0}b".into(),
                    ..record()
                },
                "control character U+0000",
            ),
        ];
        for (r, want) in bad {
            let e = r.validate().map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
