//! Which notices a rule sends: by kind (events) or by provider (commit
//! statuses), by severity, and by tenant. Pure.

use crate::crd::{NotificationRuleSpec, ProviderType, Severity};

use super::event::Notice;

/// The tenants of `notice` that `rule` (whose provider is of `provider`
/// type) sends it with, or `None` when it sends nothing:
/// - a suspended rule sends nothing;
/// - a commit status provider takes commit statuses only, the others
///   events of the rule's kinds only;
/// - an event less severe than the rule's `severity` is not sent;
/// - `tenants` (names, or `*`/none for all) less `excludeTenants` must
///   select one of the notice's tenants; a notice about no tenant (the
///   fleet as a whole) goes only to a rule that selects every tenant.
///
/// The tenants returned are the selected ones only, so a rule for one
/// tenant never shows a receiver the names of a wave's other tenants.
pub fn select(
    rule: &NotificationRuleSpec,
    provider: ProviderType,
    notice: &Notice,
) -> Option<Vec<String>> {
    if rule.suspend {
        return None;
    }
    match notice {
        Notice::Event(e) => {
            if provider.posts_commit_statuses() || !rule.events.contains(&e.kind) {
                return None;
            }
            if e.severity() < rule.severity.unwrap_or(Severity::Info) {
                return None;
            }
        }
        Notice::Status(_) => {
            if !provider.posts_commit_statuses() {
                return None;
            }
        }
    }
    let all = rule.tenants.is_empty() || rule.tenants.iter().any(|t| t == "*");
    let tenants = notice.tenants();
    if tenants.is_empty() {
        return all.then(Vec::new);
    }
    let chosen: Vec<String> = tenants
        .iter()
        .filter(|t| all || rule.tenants.contains(t))
        .filter(|t| !rule.exclude_tenants.contains(t))
        .cloned()
        .collect();
    (!chosen.is_empty()).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::event::{CommitState, CommitStatus, Event, EventKind};

    fn rule(json: serde_json::Value) -> NotificationRuleSpec {
        let mut base = serde_json::json!({"providerRef": "p"});
        if let (Some(b), Some(extra)) = (base.as_object_mut(), json.as_object()) {
            b.extend(extra.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    fn event(kind: EventKind, tenants: &[&str]) -> Notice {
        Notice::Event(Event::new(kind, "m").tenants(tenants.iter().copied()))
    }

    #[test]
    fn rules_select_by_kind_severity_and_tenant() {
        use EventKind::*;
        let hook = ProviderType::Webhook;
        let cases: Vec<(serde_json::Value, Notice, Option<Vec<&str>>)> = vec![
            // Kind.
            (
                serde_json::json!({"events": ["verified"]}),
                event(Verified, &["a"]),
                Some(vec!["a"]),
            ),
            (
                serde_json::json!({"events": ["verified"]}),
                event(Promoted, &["a"]),
                None,
            ),
            // Severity: rolledBack is an error, driftReverted a warning.
            (
                serde_json::json!({"events": ["rolledBack", "driftReverted"], "severity": "error"}),
                event(RolledBack, &["a"]),
                Some(vec!["a"]),
            ),
            (
                serde_json::json!({"events": ["rolledBack", "driftReverted"], "severity": "error"}),
                event(DriftReverted, &["a"]),
                None,
            ),
            // Tenants: by name, all, excluded; a wave's names cut to the
            // selected ones.
            (
                serde_json::json!({"events": ["promoted"], "tenants": ["b"]}),
                event(Promoted, &["a", "b", "c"]),
                Some(vec!["b"]),
            ),
            (
                serde_json::json!({"events": ["promoted"], "tenants": ["*"], "excludeTenants": ["a"]}),
                event(Promoted, &["a", "b"]),
                Some(vec!["b"]),
            ),
            (
                serde_json::json!({"events": ["promoted"], "tenants": ["z"]}),
                event(Promoted, &["a", "b"]),
                None,
            ),
            // An event about no tenant: only a rule for all of them.
            (
                serde_json::json!({"events": ["auditFinding"]}),
                event(AuditFinding, &[]),
                Some(vec![]),
            ),
            (
                serde_json::json!({"events": ["auditFinding"], "tenants": ["a"]}),
                event(AuditFinding, &[]),
                None,
            ),
            // Suspended.
            (
                serde_json::json!({"events": ["verified"], "suspend": true}),
                event(Verified, &["a"]),
                None,
            ),
        ];
        for (json, notice, want) in cases {
            let got = select(&rule(json.clone()), hook, &notice);
            let want: Option<Vec<String>> =
                want.map(|w| w.into_iter().map(str::to_owned).collect());
            assert_eq!(got, want, "{json} / {notice:?}");
        }
    }

    #[test]
    fn commit_statuses_go_to_forges_only_and_events_never_do() {
        let status = Notice::Status(CommitStatus::new(CommitState::Success, "c", "a", "ok"));
        let r = rule(serde_json::json!({"tenants": ["a"]}));
        assert_eq!(
            select(&r, ProviderType::Gitea, &status),
            Some(vec!["a".to_owned()])
        );
        assert_eq!(select(&r, ProviderType::Webhook, &status), None);
        let r = rule(serde_json::json!({"tenants": ["b"]}));
        assert_eq!(select(&r, ProviderType::Github, &status), None);
        let r = rule(serde_json::json!({"events": ["verified"]}));
        assert_eq!(
            select(&r, ProviderType::Gitea, &event(EventKind::Verified, &["a"])),
            None
        );
    }
}
