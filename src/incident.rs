//! An agent's incident report, from the request body to the stored
//! `Incident` and back to what its tenant may read. Pure; the operator's
//! HTTP edge (`operator::http::incidents`) does the I/O.
//!
//! Guarantees:
//! - a body is refused whole, naming the field or the limit, before
//!   anything is stored: an unknown field, an unknown severity, a field
//!   past its length, a key with characters outside `[A-Za-z0-9._:-]`;
//! - the agent is who its token proved, never what the body says;
//! - the same agent's same `idempotencyKey` names the same incident
//!   ([`name`]), so a retried post stores nothing twice;
//! - what the tenant is shown went through [`crate::redact::for_tenant`]
//!   before it was stored; the detail, kept for support only, through
//!   [`crate::redact::for_lane`] with the agent's own token masked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::crd::{Incident, IncidentSpec, Severity};
use crate::meta::{LABEL_MANAGED_BY, LABEL_TENANT, MANAGED_BY};

/// The largest body taken, in bytes.
pub const MAX_BODY_BYTES: usize = 32 * 1024;
/// The longest summary an agent may send, in characters (the tenant is
/// shown at most [`crate::redact::TENANT_MAX_CHARS`] of it).
pub const MAX_SUMMARY_CHARS: usize = 1000;
/// The longest detail, in bytes.
pub const MAX_DETAIL_BYTES: usize = 16 * 1024;
/// The longest `correlationId` and `idempotencyKey`.
pub const MAX_KEY_BYTES: usize = 128;

/// What an agent posts to `POST /v1/incidents`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Report {
    pub severity: Severity,
    /// Said to the tenant, after redaction.
    pub summary: String,
    /// For support only.
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub correlation_id: String,
    pub idempotency_key: String,
}

/// Why a post was refused; the message names the field or the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// Not JSON, a missing or unknown field, a wrong type or an unknown
    /// severity (serde's words name the field).
    #[error("bad body: {0}")]
    Malformed(String),
    #[error("field {field}: {reason}")]
    Field { field: &'static str, reason: String },
    #[error(
        "more than {per_minute} incident(s) a minute from this agent; try again in {retry_after}s"
    )]
    RateLimited { per_minute: u32, retry_after: u64 },
}

fn key_chars(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(&c))
}

/// The report in `body`, or why not.
pub fn parse(body: &[u8]) -> Result<Report, Refusal> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Refusal::TooLarge);
    }
    let r: Report = serde_json::from_slice(body).map_err(|e| {
        // serde names the field ("unknown field `x`", "missing field
        // `summary`", "unknown variant `fatal`, expected one of …"); the
        // line and column add nothing for a one-object body.
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
        Refusal::Malformed(msg)
    })?;
    let field = |field: &'static str, reason: String| Err(Refusal::Field { field, reason });
    if r.summary.trim().is_empty() {
        return field("summary", "must not be empty".into());
    }
    if r.summary.chars().count() > MAX_SUMMARY_CHARS {
        return field(
            "summary",
            format!("longer than {MAX_SUMMARY_CHARS} characters"),
        );
    }
    if r.detail.len() > MAX_DETAIL_BYTES {
        return field("detail", format!("longer than {MAX_DETAIL_BYTES} bytes"));
    }
    for (name, value, required) in [
        ("idempotencyKey", &r.idempotency_key, true),
        ("correlationId", &r.correlation_id, false),
    ] {
        if required && value.is_empty() {
            return field(name, "must not be empty".into());
        }
        if value.len() > MAX_KEY_BYTES {
            return field(name, format!("longer than {MAX_KEY_BYTES} bytes"));
        }
        if !key_chars(value) {
            return field(name, "only letters, digits and . _ : - are allowed".into());
        }
    }
    Ok(r)
}

/// The incident's name (and id): the same for the same agent and key.
pub fn name(namespace: &str, agent: &str, idempotency_key: &str) -> String {
    let mut h = Sha256::new();
    for part in [namespace, agent, idempotency_key] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("inc-{hex}")
}

pub use crate::wire::incident::valid_id;

/// The `Incident` to store for `report` from `agent` in `tenant`, in the
/// operator's namespace `home`. `token` is the agent's own token, masked
/// wherever the detail repeats it.
pub fn build(
    report: &Report,
    tenant: &str,
    agent: &str,
    token: &str,
    home: &str,
    received_at: Time,
) -> Incident {
    let mut inc = Incident::new(
        &name(tenant, agent, &report.idempotency_key),
        IncidentSpec {
            tenant: tenant.to_owned(),
            agent: agent.to_owned(),
            severity: report.severity,
            summary: crate::redact::for_tenant(&report.summary),
            detail: crate::redact::for_lane(&report.detail, &[token]),
            correlation_id: report.correlation_id.clone(),
            idempotency_key: report.idempotency_key.clone(),
            received_at,
        },
    );
    inc.metadata.namespace = Some(home.to_owned());
    inc.metadata.labels = Some(
        [
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_TENANT.to_owned(), tenant.to_owned()),
        ]
        .into(),
    );
    inc
}

/// What the tenant may read of an incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub id: String,
    /// `received`, `routed`, `acknowledged` or `resolved`.
    pub state: &'static str,
    pub severity: &'static str,
    pub summary: String,
    pub received_at: String,
}

/// The tenant's view of `inc`: no detail, no lane, no agent token.
pub fn tenant_view(inc: &Incident) -> TenantView {
    TenantView {
        id: inc.metadata.name.clone().unwrap_or_default(),
        state: inc.state().as_str(),
        severity: inc.spec.severity.as_str(),
        summary: inc.spec.summary.clone(),
        received_at: inc.spec.received_at.0.to_string(),
    }
}

/// Incidents per agent: a bucket of `burst` that refills at `per_minute`.
#[derive(Debug)]
pub struct RateLimit {
    per_minute: u32,
    burst: u32,
    buckets: std::sync::Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimit {
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Self {
            per_minute: per_minute.max(1),
            burst: burst.max(1),
            buckets: std::sync::Mutex::default(),
        }
    }

    /// Takes one from `agent`'s bucket at `now`, or says when to retry.
    pub fn take(&self, agent: &str, now: Instant) -> Result<(), Refusal> {
        let rate = f64::from(self.per_minute) / 60.0;
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Bounded: buckets that are full again are forgotten.
        if buckets.len() > 10_000 {
            let burst = f64::from(self.burst);
            buckets.retain(|_, (level, at)| {
                *level + now.saturating_duration_since(*at).as_secs_f64() * rate < burst
            });
        }
        let (level, at) = buckets
            .entry(agent.to_owned())
            .or_insert((f64::from(self.burst), now));
        let refilled = (*level + now.saturating_duration_since(*at).as_secs_f64() * rate)
            .min(f64::from(self.burst));
        *at = now;
        if refilled >= 1.0 {
            *level = refilled - 1.0;
            Ok(())
        } else {
            *level = refilled;
            let wait = Duration::from_secs_f64((1.0 - refilled) / rate);
            Err(Refusal::RateLimited {
                per_minute: self.per_minute,
                retry_after: wait.as_secs().max(1),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap_or_default()
    }

    #[test]
    fn a_report_is_refused_whole_naming_the_field() {
        let ok = serde_json::json!({"severity": "error", "summary": "the calendar sync failed",
            "detail": "trace", "correlationId": "req-1", "idempotencyKey": "k-1"});
        assert!(parse(&body(ok.clone())).is_ok());
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "unknown severity",
                serde_json::json!({"severity": "fatal"}),
                "unknown variant `fatal`",
            ),
            (
                "unknown field",
                serde_json::json!({"agent": "someone-else"}),
                "unknown field `agent`",
            ),
            (
                "empty summary",
                serde_json::json!({"summary": "  "}),
                "field summary: must not be empty",
            ),
            (
                "long summary",
                serde_json::json!({"summary": "x".repeat(1001)}),
                "field summary: longer than 1000",
            ),
            (
                "long detail",
                serde_json::json!({"detail": "x".repeat(16 * 1024 + 1)}),
                "field detail: longer than 16384 bytes",
            ),
            (
                "empty key",
                serde_json::json!({"idempotencyKey": ""}),
                "field idempotencyKey: must not be empty",
            ),
            (
                "bad key",
                serde_json::json!({"idempotencyKey": "a/b"}),
                "field idempotencyKey: only letters",
            ),
            (
                "long correlation",
                serde_json::json!({"correlationId": "c".repeat(129)}),
                "field correlationId: longer than 128",
            ),
        ];
        for (name, patch, want) in cases {
            let mut v = ok.clone();
            for (k, x) in patch.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            let err = parse(&body(v)).map(|_| ()).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let mut missing = ok.clone();
        missing.as_object_mut().map(|o| o.remove("summary"));
        assert!(
            parse(&body(missing))
                .unwrap_err()
                .to_string()
                .contains("missing field `summary`")
        );
        assert_eq!(
            parse(&vec![b' '; MAX_BODY_BYTES + 1]),
            Err(Refusal::TooLarge)
        );
        assert!(matches!(parse(b"not json"), Err(Refusal::Malformed(_))));
    }

    #[test]
    fn the_same_key_is_the_same_incident_and_the_tenant_sees_no_detail() {
        let a = name("acme", "assistant", "k-1");
        assert_eq!(a, name("acme", "assistant", "k-1"));
        assert_ne!(a, name("acme", "assistant", "k-2"));
        assert_ne!(a, name("acme", "helper", "k-1"));
        assert_ne!(
            name("ab", "c", "k"),
            name("a", "bc", "k"),
            "parts do not run together"
        );
        assert!(valid_id(&a), "{a}");
        assert!(!valid_id("inc-../../secrets") && !valid_id("inc-ABCDEF"));

        let token = "exo_agent_0123456789abcdef0123";
        let r = Report {
            severity: Severity::Critical,
            summary: "Lost the session to api.internal.example at 10.0.0.7".into(),
            detail: format!("token {token} rejected by 10.0.0.7"),
            correlation_id: "c1".into(),
            idempotency_key: "k-1".into(),
        };
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let inc = build(&r, "acme", "assistant", token, "exo-system", now);
        assert_eq!(inc.metadata.name.as_deref(), Some(a.as_str()));
        assert_eq!(inc.metadata.namespace.as_deref(), Some("exo-system"));
        assert_eq!(inc.spec.summary, "Lost the session to [host] at [address]");
        assert!(!inc.spec.detail.contains(token) && inc.spec.detail.contains("10.0.0.7"));
        let view = serde_json::to_value(tenant_view(&inc)).unwrap_or_default();
        assert_eq!(view["state"], "received");
        assert_eq!(view["severity"], "critical");
        let text = view.to_string();
        for gone in [
            "10.0.0.7",
            "api.internal",
            token,
            "detail",
            "lane",
            "assistant",
        ] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
    }

    #[test]
    fn each_agent_has_its_own_bucket() {
        let limit = RateLimit::new(60, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limit.take("acme/a", t0).is_ok());
        }
        let refused = limit.take("acme/a", t0).unwrap_err();
        assert_eq!(
            refused,
            Refusal::RateLimited {
                per_minute: 60,
                retry_after: 1
            }
        );
        assert!(
            limit.take("acme/b", t0).is_ok(),
            "another agent is not held"
        );
        assert!(
            limit.take("acme/a", t0 + Duration::from_secs(1)).is_ok(),
            "one a second comes back"
        );
        assert!(limit.take("acme/a", t0 + Duration::from_secs(1)).is_err());
    }
}
