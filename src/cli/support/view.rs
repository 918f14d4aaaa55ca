//! What `exo support` prints: a lane's incidents and the lanes, read from
//! the control plane's JSON (the API's own row types). Pure.

pub use crate::controlplane::model::{IncidentRow as LaneIncident, LaneRow as Lane};

fn short(text: &str, n: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

fn ms_time(ms: Option<i64>) -> String {
    ms.and_then(|m| k8s_openapi::jiff::Timestamp::from_millisecond(m).ok())
        .map(|t| t.to_string())
        .unwrap_or_else(|| "-".into())
}

/// The state, marked while the tenant's view does not show it yet.
fn state_cell(i: &LaneIncident) -> String {
    if i.delivered {
        i.state.as_str().to_owned()
    } else {
        format!("{} (tenant not told yet)", i.state.as_str())
    }
}

pub fn incidents_table(rows: &[LaneIncident]) -> String {
    if rows.is_empty() {
        return "no incidents\n".to_owned();
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|i| {
            vec![
                i.id.clone(),
                i.deployment.clone(),
                i.tenant.clone(),
                i.severity.clone(),
                state_cell(i),
                i.received_at.clone(),
                short(&i.summary, 60),
            ]
        })
        .collect();
    crate::cli::table::render(
        &[
            "ID",
            "DEPLOYMENT",
            "TENANT",
            "SEVERITY",
            "STATE",
            "RECEIVED",
            "SUMMARY",
        ],
        &cells,
    )
}

pub fn incident_text(i: &LaneIncident) -> String {
    let mut out = format!(
        "Incident:     {}\nDeployment:   {}\nTenant:       {}\nAgent:        {}\nSeverity:     {}\n\
         State:        {}\nLane:         {}\nReceived:     {}\n",
        i.id,
        i.deployment,
        i.tenant,
        i.agent,
        i.severity,
        state_cell(i),
        i.lane.as_deref().unwrap_or("-"),
        i.received_at,
    );
    if i.acknowledged_ms.is_some() {
        out.push_str(&format!(
            "Acknowledged: {} by {}\n",
            ms_time(i.acknowledged_ms),
            i.acknowledged_by.as_deref().unwrap_or("-")
        ));
    }
    if i.resolved_ms.is_some() {
        out.push_str(&format!(
            "Resolved:     {} by {}\n",
            ms_time(i.resolved_ms),
            i.resolved_by.as_deref().unwrap_or("-")
        ));
    }
    if !i.correlation_id.is_empty() {
        out.push_str(&format!("Correlation:  {}\n", i.correlation_id));
    }
    out.push_str(&format!(
        "\nSummary (what the tenant sees):\n  {}\n",
        i.summary
    ));
    if !i.detail.is_empty() {
        out.push_str("\nDetail (support only, secrets masked):\n");
        for l in i.detail.lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    if !i.note.is_empty() {
        out.push_str(&format!("\nNote: {}\n", i.note));
    }
    out
}

pub fn lanes_table(rows: &[Lane]) -> String {
    if rows.is_empty() {
        return "no lanes\n".to_owned();
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|l| {
            vec![
                l.lane.clone(),
                l.routed.to_string(),
                l.acknowledged.to_string(),
                l.resolved.to_string(),
                if l.tenants.is_empty() {
                    "-".into()
                } else {
                    l.tenants.join(",")
                },
            ]
        })
        .collect();
    crate::cli::table::render(
        &["LANE", "OPEN", "ACKNOWLEDGED", "RESOLVED", "TENANTS"],
        &cells,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incident(state: &str, delivered: bool) -> LaneIncident {
        serde_json::from_value(serde_json::json!({
            "deployment": "eu", "id": "inc-0123456789abcdef01234567", "tenant": "acme",
            "agent": "assistant", "severity": "error", "summary": "The sync failed.\nmore",
            "detail": "Traceback\n  at x", "received_at": "2026-12-06T10:00:00Z",
            "lane": "desk", "state": state, "delivered": delivered,
            "acknowledged_ms": 1_765_015_200_000_i64, "acknowledged_by": "adm_x",
            "stored_ms": 1, "future_field": true
        }))
        .unwrap()
    }

    #[test]
    fn tables_and_text_show_the_state_and_whether_the_tenant_knows() {
        let t = incidents_table(&[incident("acknowledged", false)]);
        assert!(t.contains("acknowledged (tenant not told yet)"), "{t}");
        assert!(t.contains("The sync failed.") && !t.contains("more"), "{t}");
        let d = incident_text(&incident("acknowledged", true));
        assert!(
            d.contains("Acknowledged: 2025-12-06T10:00:00Z by adm_x"),
            "{d}"
        );
        assert!(d.contains("  Traceback\n    at x"), "{d}");
        assert_eq!(incidents_table(&[]), "no incidents\n");
        let lanes = lanes_table(&[Lane {
            lane: "desk".into(),
            tenants: vec!["eu/acme".into()],
            routed: 2,
            acknowledged: 1,
            resolved: 0,
        }]);
        assert!(
            lanes.contains("desk") && lanes.contains("eu/acme"),
            "{lanes}"
        );
    }
}
