//! A `Tenant` as the CLI shows it. A status is trusted only when it is
//! about the spec the resource has now (its `desiredHash` is the hash of
//! the spec, its `observedGeneration` the resource's generation);
//! otherwise the tenant shows as `Stale` and its steps are not shown as
//! current.

use serde::Serialize;

use crate::cli::table;
use crate::crd::StepState;
use crate::crd::tenant::{ControlPlaneAcks, RegistrationAck, Tenant};
use crate::saga::Step;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub name: String,
    /// The status's phase, or `Stale` when it is about another spec.
    pub phase: String,
    /// Whether the status is about the current spec.
    pub current: bool,
    pub operation: Option<String>,
    pub current_step: Option<String>,
    pub wave: Option<String>,
    pub tier: Option<String>,
    pub offboarding: bool,
    pub message: Option<String>,
    pub steps: Vec<StepView>,
    /// What the control plane acknowledged storing (managed installations),
    /// each record with the generation it is for.
    pub control_plane: Option<ControlPlaneAcks>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    pub name: String,
    pub owner: String,
    pub state: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub message: Option<String>,
}

fn state(s: StepState) -> &'static str {
    match s {
        StepState::Pending => "Pending",
        StepState::Running => "Running",
        StepState::Waiting => "Waiting",
        StepState::Done => "Done",
        StepState::Failed => "Failed",
    }
}

impl TenantView {
    pub fn of(t: &Tenant) -> Self {
        let name = t.metadata.name.clone().unwrap_or_default();
        let hash = crate::tenant::plan::settings_hash(&t.spec);
        let status = t.status.as_ref();
        let current = status.is_some_and(|s| {
            s.desired_hash.as_deref() == Some(hash.as_str())
                && s.observed_generation == t.metadata.generation
                && (s.operation == Some(crate::crd::tenant::TenantOperation::Offboard))
                    == t.spec.offboarding
        });
        let phase = match (status.and_then(|s| s.phase), current) {
            (Some(p), true) => format!("{p:?}"),
            (None, _) => "Pending".to_owned(),
            (Some(_), false) => "Stale".to_owned(),
        };
        let steps = status
            .filter(|_| current)
            .map(|s| {
                s.steps
                    .iter()
                    .map(|st| StepView {
                        name: st.name.clone(),
                        owner: crate::tenant::plan::TenantStep::parse(&st.name)
                            .map_or_else(|| st.owner.clone(), |k| k.owner().to_owned()),
                        state: state(st.state).to_owned(),
                        started_at: st.started_at.as_ref().map(|t| t.0.to_string()),
                        finished_at: st.finished_at.as_ref().map(|t| t.0.to_string()),
                        message: st.message.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        TenantView {
            name,
            phase,
            current,
            operation: status
                .filter(|_| current)
                .and_then(|s| s.operation)
                .map(|o| format!("{o:?}").to_lowercase()),
            current_step: status
                .filter(|_| current)
                .and_then(|s| s.current_step.clone()),
            wave: t.spec.settings.wave.clone(),
            tier: t.spec.settings.tier.clone(),
            offboarding: t.spec.offboarding,
            message: status.filter(|_| current).and_then(|s| s.message.clone()),
            steps,
            control_plane: status.and_then(|s| s.control_plane.clone()),
        }
    }
}

fn or_dash(v: Option<&String>) -> String {
    v.cloned().unwrap_or_else(|| "-".to_owned())
}

pub fn list_table(views: &[TenantView]) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.phase.clone(),
                or_dash(v.operation.as_ref()),
                or_dash(v.current_step.as_ref()),
                or_dash(v.wave.as_ref()),
                or_dash(v.tier.as_ref()),
                v.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table::render_trimmed(
        &["TENANT", "PHASE", "SAGA", "STEP", "WAVE", "TIER", "MESSAGE"],
        &rows,
    )
}

pub fn show_text(v: &TenantView) -> String {
    let mut out = format!(
        "tenant {}: {}{}\n",
        v.name,
        v.phase,
        v.operation
            .as_ref()
            .map(|o| format!(" ({o})"))
            .unwrap_or_default()
    );
    if !v.current {
        out.push_str(
            "the status is about an earlier spec: the operator has not looked at this one yet\n",
        );
    }
    if let Some(m) = &v.message {
        out.push_str(&format!("message: {m}\n"));
    }
    let rows: Vec<Vec<String>> = v
        .steps
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.state.clone(),
                s.owner.clone(),
                s.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table::render_trimmed(
            &["STEP", "STATE", "OWNER", "MESSAGE"],
            &rows,
        ));
    }
    let acked = |what: &str, a: &RegistrationAck| {
        format!(
            "control plane: {what} {} (generation {}, acknowledged {}, record {})\n",
            a.record, a.generation, a.acked_at.0, a.id
        )
    };
    if let Some(cp) = &v.control_plane {
        if let Some(a) = &cp.enrollment {
            out.push_str(&acked("tenant", a));
        }
        if let Some(a) = &cp.support_lane {
            out.push_str(&acked("support", a));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::{TenantOperation, TenantPhase, TenantResourceSpec, TenantStatus};
    use crate::tenant::plan;

    fn tenant(generation: i64) -> Tenant {
        let mut t = Tenant::new("acme", TenantResourceSpec::default());
        t.metadata.generation = Some(generation);
        t
    }

    #[test]
    fn a_status_for_another_spec_is_shown_stale_without_its_steps() {
        let mut t = tenant(2);
        let hash = plan::settings_hash(&t.spec);
        let steps = plan::onboard(&t.spec.settings);
        let mut st = plan::start(
            None,
            TenantOperation::Onboard,
            &steps,
            crate::rollout::now(),
            plan::StartedFor {
                desired_hash: &hash,
                commit: None,
                generation: Some(2),
            },
        );
        st.phase = Some(TenantPhase::Onboarding);
        t.status = Some(st.clone());
        let v = TenantView::of(&t);
        assert!(v.current);
        assert_eq!(v.phase, "Onboarding");
        assert_eq!(v.steps.len(), steps.len());
        assert_eq!(v.steps[0].owner, steps[0].owner());
        assert!(list_table(std::slice::from_ref(&v)).contains("identity-enrolled"));
        assert!(show_text(&v).contains("exo-operator/tenant-enrollment"));
        assert!(!show_text(&v).contains("control plane:"), "unmanaged");
        let mut acked = t.clone();
        acked.status.as_mut().unwrap().control_plane = Some(ControlPlaneAcks {
            enrollment: Some(RegistrationAck {
                id: "9f2c".into(),
                generation: 2,
                record: "enrolled".into(),
                acked_at: crate::rollout::now(),
            }),
            support_lane: None,
        });
        let text = show_text(&TenantView::of(&acked));
        assert!(
            text.contains("control plane: tenant enrolled (generation 2"),
            "{text}"
        );
        // A newer generation: the old status is not about it.
        t.metadata.generation = Some(3);
        let v = TenantView::of(&t);
        assert_eq!(
            (v.phase.as_str(), v.current, v.steps.len()),
            ("Stale", false, 0)
        );
        // Gone from git but the status is still the onboarding's: stale too.
        let mut gone = tenant(2);
        gone.spec.offboarding = true;
        gone.status = Some(TenantStatus {
            operation: Some(TenantOperation::Onboard),
            ..st
        });
        assert_eq!(TenantView::of(&gone).phase, "Stale");
    }
}
