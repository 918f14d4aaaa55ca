//! `NotificationProvider` (short name `nprov`) and `NotificationRule`
//! (`nrule`): where the operator's notifications go and which of them, in
//! the manner of Flux's notification-controller (Provider and Alert).
//!
//! A provider says how to reach one receiver: a generic webhook signed with
//! HMAC-SHA256, a Slack-compatible incoming webhook, or commit statuses on
//! a Gitea- or GitHub-compatible forge. Its secret (the HMAC key, the Slack
//! URL, the forge token) is in a Secret of the provider's namespace and is
//! never printed. A rule selects events by kind, tenant and severity and
//! names the provider they go to. Both live in the namespace the operator
//! follows Fleets in; their status says, for the generation it was computed
//! for, whether they are ready and, if not, why (the field or the Secret).
//! `docs/notifications.md` has the whole model.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::Severity;

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "NotificationProvider",
    namespaced,
    shortname = "nprov",
    category = "autonomic",
    status = "NotificationStatus",
    derive = "PartialEq",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationProviderSpec {
    #[serde(rename = "type")]
    pub type_: ProviderType,
    /// `http://` or `https://`: the webhook's URL; for `gitea` the forge's
    /// base URL (`/api/v1` is added), for `github` the API's base URL
    /// (`https://api.github.com`, or `https://HOST/api/v3`). For `slack`
    /// it may be left out when the Secret's `address` holds the URL.
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')").message("address must be an http:// or https:// URL"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// A Secret in this namespace: `hmacKey` for `webhook`, `address` (the
    /// incoming webhook's URL) for `slack`, `token` for `gitea` and
    /// `github`. Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// `owner/name` of the repository whose commits get statuses (`gitea`,
    /// `github`): the fleet repository.
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$')").message("repository must be owner/name"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// What a provider speaks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// A JSON `POST` signed with HMAC-SHA256 in `X-Exo-Signature`.
    Webhook,
    /// A Slack-compatible incoming webhook (`text`, `blocks`, `attachments`).
    Slack,
    /// Commit statuses through Gitea's API (`/api/v1`; Forgejo too).
    Gitea,
    /// Commit statuses through GitHub's REST API.
    Github,
}

impl ProviderType {
    pub const ALL: [ProviderType; 4] = [
        ProviderType::Webhook,
        ProviderType::Slack,
        ProviderType::Gitea,
        ProviderType::Github,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Webhook => "webhook",
            ProviderType::Slack => "slack",
            ProviderType::Gitea => "gitea",
            ProviderType::Github => "github",
        }
    }

    /// Whether it posts commit statuses (and takes no event kinds).
    pub fn posts_commit_statuses(self) -> bool {
        matches!(self, ProviderType::Gitea | ProviderType::Github)
    }

    /// The key of its Secret that holds what it needs.
    pub fn secret_key(self) -> &'static str {
        match self {
            ProviderType::Webhook => "hmacKey",
            ProviderType::Slack => "address",
            ProviderType::Gitea | ProviderType::Github => "token",
        }
    }
}

impl std::fmt::Display for ProviderType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "NotificationRule",
    namespaced,
    shortname = "nrule",
    category = "autonomic",
    status = "NotificationStatus",
    derive = "PartialEq",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.providerRef"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationRuleSpec {
    /// The `NotificationProvider` in this namespace the events go to.
    #[x_kube(validation = Rule::new("self.size() > 0").message("providerRef must name a NotificationProvider"))]
    pub provider_ref: String,
    /// The kinds of event sent (a `webhook` or `slack` provider needs at
    /// least one). A `gitea` or `github` provider takes none: it posts the
    /// commit statuses of the selected tenants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventKind>,
    /// Tenants whose events are sent, by name; `*` or none: every tenant.
    /// An event about a wave is sent when one of its tenants is selected,
    /// and names only the selected ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// Tenants left out even when `tenants` selects them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_tenants: Vec<String>,
    /// The least severity sent (default `info`: everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Send nothing until set back to false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
}

/// A kind of event the operator notifies of.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum EventKind {
    /// A wave's pointer moved forward to a release (`exo release promote`).
    Promoted,
    /// A tenant's Rollout reached `Verified` on its release.
    Verified,
    /// A wave's analysis failed.
    AnalysisFailed,
    /// A wave's pointer went back to a release in its history.
    RolledBack,
    /// A managed object differed from git and was put back.
    DriftReverted,
    /// The isolation audit found a broken invariant.
    AuditFinding,
}

impl EventKind {
    pub const ALL: [EventKind; 6] = [
        EventKind::Promoted,
        EventKind::Verified,
        EventKind::AnalysisFailed,
        EventKind::RolledBack,
        EventKind::DriftReverted,
        EventKind::AuditFinding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Promoted => "promoted",
            EventKind::Verified => "verified",
            EventKind::AnalysisFailed => "analysisFailed",
            EventKind::RolledBack => "rolledBack",
            EventKind::DriftReverted => "driftReverted",
            EventKind::AuditFinding => "auditFinding",
        }
    }

    /// How bad it is: what a rule's `severity` compares with.
    pub fn severity(self) -> Severity {
        match self {
            EventKind::Promoted | EventKind::Verified => Severity::Info,
            EventKind::DriftReverted | EventKind::AuditFinding => Severity::Warning,
            EventKind::AnalysisFailed | EventKind::RolledBack => Severity::Error,
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status of a provider or a rule: its `Ready` condition (reason and
/// message say why not: a field, a missing Secret or key, a missing
/// provider), for the generation in `observedGeneration`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The one condition type of both kinds.
pub const CONDITION_READY: &str = "Ready";

impl NotificationStatus {
    /// The `Ready` condition, when the status is for `generation`.
    pub fn ready_for(&self, generation: Option<i64>) -> Option<&Condition> {
        (self.observed_generation == generation)
            .then(|| self.conditions.iter().find(|c| c.type_ == CONDITION_READY))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_are_spelt_as_rules_write_them() {
        for k in EventKind::ALL {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, serde_json::json!(k.as_str()));
            let back: EventKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, k);
        }
        assert!(serde_json::from_str::<EventKind>("\"deployed\"").is_err());
    }

    #[test]
    fn provider_types_name_their_secret_key() {
        for t in ProviderType::ALL {
            let json = serde_json::to_value(t).unwrap();
            assert_eq!(json, serde_json::json!(t.as_str()));
        }
        assert_eq!(ProviderType::Webhook.secret_key(), "hmacKey");
        assert_eq!(ProviderType::Slack.secret_key(), "address");
        assert!(ProviderType::Gitea.posts_commit_statuses());
        assert!(!ProviderType::Slack.posts_commit_statuses());
    }

    #[test]
    fn a_rule_spec_reads_with_defaults_and_refuses_unknown_fields() {
        let r: NotificationRuleSpec = serde_json::from_value(serde_json::json!({
            "providerRef": "hook", "events": ["verified", "rolledBack"]
        }))
        .unwrap();
        assert_eq!(r.events, vec![EventKind::Verified, EventKind::RolledBack]);
        assert!(r.tenants.is_empty() && r.severity.is_none() && !r.suspend);
        assert!(
            serde_json::from_value::<NotificationRuleSpec>(serde_json::json!({
                "providerRef": "hook", "event": ["verified"]
            }))
            .is_err()
        );
    }
}
