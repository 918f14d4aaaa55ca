//! What goes on the wire, per provider type. Pure.
//!
//! - `webhook`: `POST` of the event as JSON (below), with
//!   `X-Exo-Signature: sha256=<hex>`, the HMAC-SHA256 of the exact body
//!   under the Secret's `hmacKey`, `X-Exo-Event: <kind>` and
//!   `X-Exo-Delivery: <id>` (the same for a retry).
//! - `slack`: `POST` of `text` (mrkdwn), `blocks` (a section and a context
//!   line) and one `attachments` entry coloured by severity, for the
//!   Slack-compatible receivers that read only those.
//! - `gitea`, `github`: a commit status on the event's commit, context
//!   `exo/<tenant>`.
//!
//! The webhook body: `{"id", "kind", "severity", "tenants", "wave"?,
//! "release"?, "commit"?, "message", "time"}` (RFC 3339, UTC).

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use super::check::{Address, Target};
use super::event::{CommitStatus, Event, Notice, Severity};
use crate::forge::{Dialect, NewStatus, RepoName, STATUS_DESCRIPTION_MAX, Settings};

/// The header carrying the body's signature.
pub const SIGNATURE_HEADER: &str = "x-exo-signature";
/// The header naming the event's kind.
pub const EVENT_HEADER: &str = "x-exo-event";
/// The header carrying the event's id.
pub const DELIVERY_HEADER: &str = "x-exo-delivery";

/// `sha256=<hex>`: the HMAC-SHA256 of `body` under `key`.
pub fn sign(key: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of every length; `new_from_slice` cannot fail here.
    let mac = <Hmac<Sha256> as Mac>::new_from_slice(key).map(|mut m| {
        m.update(body);
        m.finalize().into_bytes()
    });
    match mac {
        Ok(bytes) => format!("sha256={}", hex::encode(bytes)),
        Err(_) => String::from("sha256="),
    }
}

#[derive(Serialize)]
struct WebhookBody<'a> {
    id: String,
    kind: &'a str,
    severity: &'a str,
    tenants: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    wave: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    release: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<&'a str>,
    message: &'a str,
    time: String,
}

/// The webhook's JSON body for `event`, naming `tenants` (the rule's
/// selection of the event's tenants).
pub fn webhook_body(event: &Event, tenants: &[String]) -> Vec<u8> {
    let body = WebhookBody {
        id: event.id(),
        kind: event.kind.as_str(),
        severity: event.severity().as_str(),
        tenants,
        wave: event.wave.map(|w| w.as_str()),
        release: event.release.as_deref(),
        commit: event.commit.as_deref(),
        message: &event.message,
        time: format!("{:.0}", event.time),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The facts of an event in one line: tenants, wave, release, commit.
fn facts(event: &Event, tenants: &[String]) -> String {
    let mut parts = Vec::new();
    if !tenants.is_empty() {
        parts.push(format!("tenants: {}", tenants.join(", ")));
    }
    if let Some(w) = event.wave {
        parts.push(format!("wave: {w}"));
    }
    if let Some(r) = &event.release {
        parts.push(format!("release: {r}"));
    }
    if let Some(c) = &event.commit {
        parts.push(format!("commit: {}", short(c)));
    }
    parts.join(" · ")
}

fn colour(s: Severity) -> &'static str {
    match s {
        Severity::Info => "#2eb67d",
        Severity::Warning => "#ecb22e",
        Severity::Error | Severity::Critical => "#e01e5a",
    }
}

/// A Slack-compatible body for `event`.
pub fn slack_body(event: &Event, tenants: &[String]) -> Vec<u8> {
    let title = format!("*exo {}*: {}", event.kind, event.message);
    let facts = facts(event, tenants);
    let text = if facts.is_empty() {
        title.clone()
    } else {
        format!("{title}\n{facts}")
    };
    let mut blocks = vec![serde_json::json!({
        "type": "section", "text": {"type": "mrkdwn", "text": title}
    })];
    if !facts.is_empty() {
        blocks.push(serde_json::json!({
            "type": "context", "elements": [{"type": "mrkdwn", "text": facts}]
        }));
    }
    let body = serde_json::json!({
        "text": text,
        "blocks": blocks,
        "attachments": [{
            "color": colour(event.severity()),
            "fallback": text,
            "text": facts,
            "ts": event.time.as_second(),
        }],
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The commit status for `status`: its description cut to what every
/// forge takes.
pub fn status_body(status: &CommitStatus) -> NewStatus {
    let mut description = String::new();
    if let Some(w) = status.wave {
        description.push_str(&format!("{w}: "));
    }
    description.push_str(&status.description);
    NewStatus {
        state: status.state.as_str().to_owned(),
        context: status.context(),
        description: crate::wire::clip_to(&description, STATUS_DESCRIPTION_MAX).to_owned(),
        target_url: None,
    }
}

/// One `POST`: where, which headers, which body.
#[derive(Debug, Clone)]
pub struct Post {
    pub address: Address,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// A rendered delivery, ready to send.
#[derive(Debug, Clone)]
pub enum Outgoing {
    Post(Post),
    Status {
        dialect: Dialect,
        settings: Settings,
        repo: RepoName,
        sha: String,
        body: NewStatus,
    },
}

/// What `target` sends for `notice`, naming `tenants`; `None` when the
/// target has nothing to send for it (an event to a forge, a commit status
/// to a webhook: [`super::select::select`] never pairs those).
pub fn render(target: &Target, notice: &Notice, tenants: &[String]) -> Option<Outgoing> {
    match (target, notice) {
        (Target::Webhook { address, key }, Notice::Event(e)) => {
            let body = webhook_body(e, tenants);
            let headers = vec![
                ("content-type", "application/json".to_owned()),
                (SIGNATURE_HEADER, sign(key.expose(), &body)),
                (EVENT_HEADER, e.kind.as_str().to_owned()),
                (DELIVERY_HEADER, e.id()),
            ];
            Some(Outgoing::Post(Post {
                address: address.clone(),
                headers,
                body,
            }))
        }
        (Target::Slack { address }, Notice::Event(e)) => Some(Outgoing::Post(Post {
            address: address.clone(),
            headers: vec![("content-type", "application/json".to_owned())],
            body: slack_body(e, tenants),
        })),
        (
            Target::Forge {
                dialect,
                settings,
                repo,
            },
            Notice::Status(s),
        ) => Some(Outgoing::Status {
            dialect: *dialect,
            settings: settings.clone(),
            repo: repo.clone(),
            sha: s.commit.clone(),
            body: status_body(s),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::fleet::release::WaveName;
    use crate::notify::check::SecretValue;
    use crate::notify::event::{CommitState, EventKind};

    fn event() -> Event {
        Event::new(EventKind::Verified, "release 2026.11.1 verified")
            .tenants(["acme", "globex"])
            .wave(WaveName::Canary)
            .release("2026.11.1")
            .commit("0123456789abcdef0123")
            .at(Timestamp::from_second(1_767_225_600).unwrap())
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_exact_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_webhook_body_names_the_selected_tenants_only() {
        let e = event();
        let body = webhook_body(&e, &["acme".to_owned()]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "id": e.id(), "kind": "verified", "severity": "info",
                "tenants": ["acme"], "wave": "canary", "release": "2026.11.1",
                "commit": "0123456789abcdef0123",
                "message": "release 2026.11.1 verified",
                "time": "2026-01-01T00:00:00Z",
            })
        );
    }

    #[test]
    fn a_webhook_post_is_signed_and_labelled() {
        let target = Target::Webhook {
            address: Address::Spec("http://hook".into()),
            key: SecretValue::from_secret(b"k").unwrap(),
        };
        let e = event();
        let Some(Outgoing::Post(p)) =
            render(&target, &Notice::Event(e.clone()), &["acme".to_owned()])
        else {
            panic!("not a post")
        };
        let header = |name: &str| {
            p.headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header(SIGNATURE_HEADER), Some(sign(b"k", &p.body)));
        assert_eq!(header(EVENT_HEADER).as_deref(), Some("verified"));
        assert_eq!(header(DELIVERY_HEADER), Some(e.id()));
        // A commit status is nothing a webhook sends.
        let s = CommitStatus::new(CommitState::Pending, "c", "acme", "applying");
        assert!(render(&target, &Notice::Status(s), &[]).is_none());
    }

    #[test]
    fn the_slack_body_has_text_blocks_and_a_coloured_attachment() {
        let body = slack_body(&event(), &["acme".to_owned()]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let text = v["text"].as_str().unwrap();
        assert!(text.starts_with("*exo verified*: release 2026.11.1 verified"));
        assert!(
            text.contains(
                "tenants: acme · wave: canary · release: 2026.11.1 · commit: 0123456789ab"
            )
        );
        assert_eq!(v["blocks"].as_array().unwrap().len(), 2);
        assert_eq!(v["attachments"][0]["color"], "#2eb67d");
    }

    #[test]
    fn a_commit_status_is_cut_to_the_forges_limit() {
        let s = CommitStatus::new(CommitState::Failure, "c", "acme", "x".repeat(500))
            .wave(WaveName::LowRisk);
        let b = status_body(&s);
        assert_eq!(b.state, "failure");
        assert_eq!(b.context, "exo/acme");
        assert!(b.description.starts_with("low-risk: xxx"));
        assert_eq!(b.description.len(), STATUS_DESCRIPTION_MAX);
    }
}
