//! What `exo incident list` and `show` print. Pure.

use serde::Serialize;

use crate::crd::Incident;

/// One incident as the platform sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IncidentView {
    pub id: String,
    pub tenant: String,
    pub agent: String,
    pub severity: &'static str,
    /// `received`, `routed`, `acknowledged` or `resolved` (`received`
    /// until a status for this spec says otherwise).
    pub state: &'static str,
    pub lane: Option<String>,
    pub received_at: String,
    /// What the tenant is shown.
    pub summary: String,
    /// What support reads, secrets masked.
    pub detail: String,
    pub correlation_id: String,
}

impl IncidentView {
    pub fn of(inc: &Incident) -> Self {
        let current = inc
            .status
            .as_ref()
            .filter(|s| s.observed_generation == inc.metadata.generation);
        IncidentView {
            id: inc.metadata.name.clone().unwrap_or_default(),
            tenant: inc.spec.tenant.clone(),
            agent: inc.spec.agent.clone(),
            severity: inc.spec.severity.as_str(),
            state: inc.state().as_str(),
            lane: current.and_then(|s| s.lane.clone()),
            received_at: inc.spec.received_at.0.to_string(),
            summary: inc.spec.summary.clone(),
            detail: inc.spec.detail.clone(),
            correlation_id: inc.spec.correlation_id.clone(),
        }
    }
}

/// The summary cut to `n` characters on one line.
fn short(text: &str, n: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

/// The list's table, newest first.
pub fn list_table(views: &[IncidentView]) -> String {
    if views.is_empty() {
        return "no incidents\n".to_owned();
    }
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            vec![
                v.id.clone(),
                v.tenant.clone(),
                v.agent.clone(),
                v.severity.to_owned(),
                v.state.to_owned(),
                v.lane.clone().unwrap_or_else(|| "-".into()),
                v.received_at.clone(),
                short(&v.summary, 60),
            ]
        })
        .collect();
    crate::cli::table::render(
        &[
            "ID", "TENANT", "AGENT", "SEVERITY", "STATE", "LANE", "RECEIVED", "SUMMARY",
        ],
        &rows,
    )
}

/// One incident, for `show`.
pub fn detail_text(v: &IncidentView) -> String {
    let mut out = format!(
        "Incident:    {}\nTenant:      {}\nAgent:       {}\nSeverity:    {}\nState:       {}\nLane:        {}\nReceived:    {}\nCorrelation: {}\n\nTenant sees:\n  {}\n",
        v.id,
        v.tenant,
        v.agent,
        v.severity,
        v.state,
        v.lane.as_deref().unwrap_or("-"),
        v.received_at,
        if v.correlation_id.is_empty() {
            "-"
        } else {
            &v.correlation_id
        },
        v.summary.replace('\n', "\n  "),
    );
    out.push_str("\nDetail (secrets masked):\n");
    if v.detail.is_empty() {
        out.push_str("  (none)\n");
    } else {
        for line in v.detail.lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{IncidentSpec, IncidentState, IncidentStatus, Severity};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn incident(generation: i64, status_for: i64) -> Incident {
        let mut inc = Incident::new(
            "inc-0123456789abcdef01234567",
            IncidentSpec {
                tenant: "acme".into(),
                agent: "assistant".into(),
                severity: Severity::Critical,
                summary: "The calendar sync failed and it is a rather long summary that goes on"
                    .into(),
                detail: "line one\nline two".into(),
                correlation_id: String::new(),
                idempotency_key: "k".into(),
                received_at: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            },
        );
        inc.metadata.generation = Some(generation);
        inc.status = Some(IncidentStatus {
            state: Some(IncidentState::Routed),
            lane: Some("acme-desk".into()),
            observed_generation: Some(status_for),
            ..IncidentStatus::default()
        });
        inc
    }

    #[test]
    fn a_status_for_another_generation_is_not_shown() {
        let v = IncidentView::of(&incident(1, 1));
        assert_eq!((v.state, v.lane.as_deref()), ("routed", Some("acme-desk")));
        let stale = IncidentView::of(&incident(2, 1));
        assert_eq!((stale.state, stale.lane.as_deref()), ("received", None));
        let table = list_table(std::slice::from_ref(&v));
        assert!(
            table.contains("acme-desk") && table.contains("critical"),
            "{table}"
        );
        assert!(
            table.contains("The calendar sync failed and it is a rather long summary tha…"),
            "{table}"
        );
        let text = detail_text(&v);
        assert!(
            text.contains("Correlation: -") && text.contains("  line one\n  line two\n"),
            "{text}"
        );
        assert_eq!(list_table(&[]), "no incidents\n");
    }
}
