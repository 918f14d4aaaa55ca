//! The `alert` frame (operator -> control plane) and its acknowledgement
//! `alert_ack` (control plane -> operator).
//!
//! Guarantees: every field has a byte bound ([`limits`]); [`Alert::new`] and
//! [`Alert::bounded`] cut strings to those bounds on a char boundary, so an
//! alert they made always passes [`Alert::validate`], which the receiver
//! applies. A receiver that finds an alert invalid treats it like any other
//! malformed frame (close 4003), so a sender must never queue one: a resent
//! invalid alert would break every connection.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{clip_to, random_id};

/// Byte bounds of the fields of an `alert`.
pub mod limits {
    pub const ID: usize = 64;
    pub const REASON: usize = 64;
    /// A Kubernetes namespace is a DNS label.
    pub const NAMESPACE: usize = 63;
    /// `Kind/name`: a name is at most 253 bytes.
    pub const OBJECT: usize = 320;
    pub const MESSAGE: usize = 2048;
    /// A stateful alert's key, e.g. `audit/placement/Pod/t1/agent-x`.
    pub const KEY: usize = 400;
}

/// Whether a stateful alert (one with a `key`) starts or ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// The condition holds (the default, and what a keyless alert is).
    #[default]
    Firing,
    /// The condition named by `key` no longer holds.
    Resolved,
}

impl AlertState {
    pub fn is_firing(&self) -> bool {
        *self == AlertState::Firing
    }
}

pub use crate::severity::Severity;

/// Operator -> control plane: something in the cluster needs a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Unique per operator boot; the control plane drops an id it already
    /// stored, so a resent alert is stored once.
    pub id: String,
    /// When the operator raised it (RFC 3339).
    pub at: Timestamp,
    pub severity: Severity,
    /// A short stable identifier, e.g. `ContentDrift` (letters and digits).
    pub reason: String,
    /// The object's namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// `Kind/name`, e.g. `Pod/agent-x-1234`.
    pub object: String,
    /// For humans; at most [`limits::MESSAGE`] bytes.
    #[serde(default)]
    pub message: String,
    /// Stable identity of a condition that can clear, e.g.
    /// `audit/placement/Pod/t1/agent-x`. Empty for a one-off alert (an
    /// event, never "active"). A firing alert with a key stays active on
    /// the control plane until a `resolved` one with the same key arrives.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default, skip_serializing_if = "AlertState::is_firing")]
    pub state: AlertState,
}

/// Control plane -> operator: the alert `id` is stored (or was already);
/// the operator stops holding it for a resend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertAck {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AlertError {
    #[error("field {0} is empty")]
    Empty(&'static str),
    #[error("field {field} has {len} bytes; the limit is {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("field reason {0:?} is not an identifier (a letter, then letters and digits)")]
    BadReason(String),
    #[error("field state is resolved but field key is empty (only a keyed alert can resolve)")]
    ResolvedWithoutKey,
    #[error("field {field} holds the control character U+{code:04X}")]
    ControlChar { field: &'static str, code: u32 },
}

fn clip_owned(s: &mut String, max: usize) {
    let keep = clip_to(s, max).len();
    s.truncate(keep);
}

/// Whether `c` may stand in an alert's field: no control characters (a
/// NUL cannot be stored in a PostgreSQL text column, and the others have
/// no place in a one-line value), except line breaks and tabs in the
/// free-text `message`.
fn allowed(c: char, free_text: bool) -> bool {
    !c.is_control() || (free_text && matches!(c, '\n' | '\t'))
}

fn strip_controls(s: &mut String, free_text: bool) {
    if !s.chars().all(|c| allowed(c, free_text)) {
        s.retain(|c| allowed(c, free_text));
    }
}

impl Alert {
    /// An alert raised now with a fresh id; every field is cut to its bound.
    pub fn new(
        severity: Severity,
        reason: impl Into<String>,
        namespace: impl Into<String>,
        object: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Alert {
            id: random_id(),
            at: Timestamp::now(),
            severity,
            reason: reason.into(),
            namespace: namespace.into(),
            object: object.into(),
            message: message.into(),
            key: String::new(),
            state: AlertState::Firing,
        }
        .bounded()
    }

    /// A stateful alert: firing under `key` until [`Alert::resolving`].
    pub fn keyed(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        clip_owned(&mut self.key, limits::KEY);
        self
    }

    /// The alert that ends this one's condition: same key, reason and
    /// object, a fresh id and time.
    pub fn resolving(&self, message: impl Into<String>) -> Self {
        Alert {
            id: random_id(),
            at: Timestamp::now(),
            state: AlertState::Resolved,
            message: message.into(),
            ..self.clone()
        }
        .bounded()
    }

    /// The alert with the control characters [`Alert::validate`] refuses
    /// removed and every string field cut to its bound on a char boundary.
    pub fn bounded(mut self) -> Self {
        for (s, free_text) in [
            (&mut self.id, false),
            (&mut self.reason, false),
            (&mut self.namespace, false),
            (&mut self.object, false),
            (&mut self.message, true),
            (&mut self.key, false),
        ] {
            strip_controls(s, free_text);
        }
        clip_owned(&mut self.id, limits::ID);
        clip_owned(&mut self.reason, limits::REASON);
        clip_owned(&mut self.namespace, limits::NAMESPACE);
        clip_owned(&mut self.object, limits::OBJECT);
        clip_owned(&mut self.message, limits::MESSAGE);
        clip_owned(&mut self.key, limits::KEY);
        self
    }

    /// Checks the bounds and shapes a receiver relies on.
    pub fn validate(&self) -> Result<(), AlertError> {
        let fields = [
            ("id", &self.id, limits::ID, true),
            ("reason", &self.reason, limits::REASON, true),
            ("namespace", &self.namespace, limits::NAMESPACE, false),
            ("object", &self.object, limits::OBJECT, true),
            ("message", &self.message, limits::MESSAGE, false),
            ("key", &self.key, limits::KEY, false),
        ];
        for (field, value, max, required) in fields {
            if required && value.is_empty() {
                return Err(AlertError::Empty(field));
            }
            let free_text = field == "message";
            if let Some(c) = value.chars().find(|c| !allowed(*c, free_text)) {
                return Err(AlertError::ControlChar {
                    field,
                    code: c as u32,
                });
            }
            if value.len() > max {
                return Err(AlertError::TooLong {
                    field,
                    len: value.len(),
                    max,
                });
            }
        }
        let mut chars = self.reason.chars();
        let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric());
        if !identifier {
            return Err(AlertError::BadReason(self.reason.clone()));
        }
        if self.state == AlertState::Resolved && self.key.is_empty() {
            return Err(AlertError::ResolvedWithoutKey);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::*;

    fn drift() -> Alert {
        Alert::new(
            Severity::Critical,
            "ContentDrift",
            "t1",
            "Pod/agent-x-1234",
            "live content differs",
        )
    }

    #[test]
    fn alert_frames_round_trip() {
        let f = Frame::Alert(drift());
        let text = f.to_json().unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "alert");
        assert_eq!(v["severity"], "critical");
        assert_eq!(v["object"], "Pod/agent-x-1234");
        assert!(v["at"].as_str().unwrap().ends_with('Z'), "{text}");
        assert_eq!(Frame::from_json(&text).unwrap(), f);
        assert_eq!(f.kind(), "alert");

        let ack = Frame::AlertAck(AlertAck { id: "a1".into() });
        let text = ack.to_json().unwrap();
        assert!(text.contains(r#""type":"alert_ack""#), "{text}");
        assert_eq!(Frame::from_json(&text).unwrap(), ack);
    }

    #[test]
    fn alerts_take_rfc3339_with_offsets_and_defaults() {
        let text = r#"{"type":"alert","id":"1","at":"2026-05-01T12:00:00+02:00",
            "severity":"warning","reason":"ContentDrift","object":"Pod/p"}"#;
        let Frame::Alert(a) = Frame::from_json(text).unwrap() else {
            panic!("not an alert")
        };
        assert_eq!(a.at.as_second(), 1_777_629_600);
        assert!(a.namespace.is_empty() && a.message.is_empty());
        assert_eq!(a.validate(), Ok(()));
    }

    #[test]
    fn malformed_alerts_do_not_parse() {
        for text in [
            r#"{"type":"alert","id":"1","at":"yesterday","severity":"warning","reason":"R","object":"P/p"}"#,
            r#"{"type":"alert","id":"1","at":"2026-05-01T12:00:00Z","severity":"fatal","reason":"R","object":"P/p"}"#,
            r#"{"type":"alert","id":"1","at":"2026-05-01T12:00:00Z","severity":"warning","object":"P/p"}"#,
        ] {
            assert!(Frame::from_json(text).is_err(), "{text}");
        }
    }

    #[test]
    fn messages_are_cut_on_a_char_boundary() {
        // 'é' is two bytes: the limit falls inside one.
        let long = format!("x{}", "é".repeat(limits::MESSAGE));
        let a = Alert::new(Severity::Warning, "R", "", "Pod/p", long);
        assert_eq!(a.message.len(), limits::MESSAGE - 1);
        assert!(a.message.ends_with('é'));
        assert_eq!(a.validate(), Ok(()));
    }

    #[test]
    fn validation_names_the_field() {
        type Break = fn(&mut Alert);
        let cases: [(Break, AlertError); 4] = [
            (|a| a.reason.clear(), AlertError::Empty("reason")),
            (|a| a.object.clear(), AlertError::Empty("object")),
            (
                |a| a.message = "m".repeat(limits::MESSAGE + 1),
                AlertError::TooLong {
                    field: "message",
                    len: limits::MESSAGE + 1,
                    max: limits::MESSAGE,
                },
            ),
            (
                |a| a.reason = "Content Drift".into(),
                AlertError::BadReason("Content Drift".into()),
            ),
        ];
        for (break_it, want) in cases {
            let mut a = drift();
            break_it(&mut a);
            assert_eq!(a.validate(), Err(want.clone()));
            assert!(want.to_string().contains("field"), "{want}");
        }
        let mut a = drift();
        a.id = "i".repeat(limits::ID * 2);
        assert!(a.clone().validate().is_err());
        assert_eq!(a.bounded().validate(), Ok(()));
    }

    #[test]
    fn control_characters_are_refused_and_stripped_by_the_constructors() {
        type Break = fn(&mut Alert);
        let cases: [(Break, &str, u32); 4] = [
            (|a| a.message.push('\0'), "message", 0),
            (|a| a.object.push('\n'), "object", 0x0a),
            (|a| a.key = "k\u{1b}[31m".into(), "key", 0x1b),
            (|a| a.namespace.push('\u{7f}'), "namespace", 0x7f),
        ];
        for (break_it, field, code) in cases {
            let mut a = drift();
            break_it(&mut a);
            let e = a.clone().validate().unwrap_err();
            assert_eq!(e, AlertError::ControlChar { field, code });
            assert!(e.to_string().contains(field), "{e}");
            assert_eq!(a.bounded().validate(), Ok(()), "{field}");
        }
        // Line breaks and tabs stay in the message.
        let a = Alert::new(Severity::Warning, "R", "", "Pod/p", "a\n\tb\0c");
        assert_eq!(a.message, "a\n\tbc");
        assert_eq!(a.validate(), Ok(()));
    }

    #[test]
    fn keyed_alerts_resolve_under_their_key() {
        let a = drift().keyed("audit/placement/Pod/t1/agent-x");
        let text = Frame::Alert(a.clone()).to_json().unwrap();
        assert!(
            text.contains(r#""key":"audit/placement/Pod/t1/agent-x""#),
            "{text}"
        );
        assert!(!text.contains("state"), "firing is the default: {text}");
        let r = a.resolving("placement is right again");
        assert_ne!(r.id, a.id);
        assert_eq!(
            (r.key.as_str(), r.state),
            (a.key.as_str(), AlertState::Resolved)
        );
        let text = Frame::Alert(r.clone()).to_json().unwrap();
        assert!(text.contains(r#""state":"resolved""#), "{text}");
        assert_eq!(Frame::from_json(&text).unwrap(), Frame::Alert(r.clone()));
        assert_eq!(r.validate(), Ok(()));
        let mut keyless = r;
        keyless.key.clear();
        assert_eq!(keyless.validate(), Err(AlertError::ResolvedWithoutKey));
    }

    #[test]
    fn severities_parse_back() {
        for s in [Severity::Warning, Severity::Critical] {
            assert_eq!(Severity::parse(s.as_str()), Some(s));
        }
        assert_eq!(Severity::parse("Critical"), None);
    }
}
