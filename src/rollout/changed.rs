//! Which workloads a saga run changes: the durable changed set. Pure.
//!
//! A run's steps that act per workload (`repointed`, `pods-rolled`,
//! `verified`, `status-projected`) act on the changed set only, so a
//! one-Agent edit rolls, execs into and stamps one Agent, whatever the
//! tenant's size.
//!
//! Guarantees:
//! - the set is computed once, when the run starts, and stored in the
//!   Rollout's status with the run's first write, before any step acts; a
//!   run resumed after a crash reads it back and acts on the same set;
//! - a workload is in the set when the cluster does not hold its desired
//!   spec (absent, or any field differs), so an image change puts the
//!   workloads that run the image in it, and a baseline change every Agent
//!   that mounts the map (its `spec.baseline` names the new version);
//! - nothing that was never verified drops out: a run that starts while
//!   the previous one had not reached `Verified` carries the previous set
//!   forward (the previous run may have re-pointed a workload it never
//!   verified, which the cluster now holds as desired);
//! - with no previous run, or one whose set is unknown, the set is every
//!   workload;
//! - pods outside the set stay covered by the scheduled live re-check; the
//!   status's `lastFullCheck` says when every pod was last checked.

use std::collections::BTreeSet;

use super::saga::Workload;
use crate::crd::{ChangedSet, RolloutPhase, RolloutStatus};

/// The whole tenant.
pub fn everything() -> ChangedSet {
    ChangedSet {
        all: true,
        ..ChangedSet::default()
    }
}

/// Whether `w` is in `set`; no set (a status from before the field) means
/// every workload.
pub fn contains(set: Option<&ChangedSet>, w: &Workload) -> bool {
    let Some(set) = set else {
        return true;
    };
    if set.all {
        return true;
    }
    let names = match w {
        Workload::Agent(_) => &set.agents,
        Workload::Tool(_) => &set.tools,
    };
    names.binary_search_by(|n| n.as_str().cmp(w.name())).is_ok()
}

/// Whether the set covers every workload of the tenant.
pub fn is_full(set: Option<&ChangedSet>) -> bool {
    set.is_none_or(|s| s.all)
}

/// The workloads of `desired` in `set`, in their order.
pub fn select(set: Option<&ChangedSet>, desired: &[Workload]) -> Vec<Workload> {
    desired
        .iter()
        .filter(|w| contains(set, w))
        .cloned()
        .collect()
}

/// The changed set of a run that starts now: every desired workload that
/// `holds_desired` says the cluster does not hold as desired, plus what
/// the previous run (`previous`) changed if it never reached `Verified`.
pub fn compute(
    desired: &[Workload],
    holds_desired: impl Fn(&Workload) -> bool,
    previous: Option<&RolloutStatus>,
) -> ChangedSet {
    let Some(previous) = previous else {
        return everything();
    };
    let carried = match previous.phase {
        Some(RolloutPhase::Verified) => None,
        // A run that never finished (or never started: `Pending`) may have
        // re-pointed workloads it did not verify.
        _ => Some(previous.changed.clone().unwrap_or_else(everything)),
    };
    if carried.as_ref().is_some_and(|c| c.all) {
        return everything();
    }
    let carried_has = |w: &Workload| carried.as_ref().is_some_and(|c| contains(Some(c), w));
    let changed: Vec<&Workload> = desired
        .iter()
        .filter(|w| carried_has(w) || !holds_desired(w))
        .collect();
    if !desired.is_empty() && changed.len() == desired.len() {
        return everything();
    }
    let mut set = ChangedSet::default();
    let mut maps = BTreeSet::new();
    for w in changed {
        match w {
            Workload::Agent(a) => {
                set.agents.push(w.name().to_owned());
                if let Some(b) = &a.spec.baseline {
                    maps.insert(b.config_map.clone());
                }
            }
            Workload::Tool(_) => set.tools.push(w.name().to_owned()),
        }
    }
    set.agents.sort();
    set.agents.dedup();
    set.tools.sort();
    set.tools.dedup();
    set.config_maps = maps.into_iter().collect();
    set
}

/// A one-line account of `set` for logs and messages.
pub fn describe(set: Option<&ChangedSet>, total: usize) -> String {
    match set {
        Some(s) if !s.all => format!(
            "{} of {total} workload(s) changed",
            s.agents.len() + s.tools.len()
        ),
        _ => format!("all {total} workload(s)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Agent, Tool};

    fn agent(name: &str, image: &str, baseline: Option<&str>) -> Workload {
        let mut a: Agent = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
            "metadata": {"name": name, "namespace": "t"},
            "spec": {
                "agentlet": {"image": "reg/agentlet@sha256:aa"},
                "runtime": {"image": image},
            }
        }))
        .unwrap();
        if let Some(b) = baseline {
            a.spec.baseline =
                Some(serde_json::from_value(serde_json::json!({"configMap": b})).unwrap());
        }
        Workload::Agent(a)
    }

    fn tool(name: &str) -> Workload {
        let t: Tool = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
            "metadata": {"name": name, "namespace": "t"},
            "spec": {"container": {"image": "reg/tool@sha256:bb"}}
        }))
        .unwrap();
        Workload::Tool(t)
    }

    fn status(phase: RolloutPhase, changed: Option<ChangedSet>) -> RolloutStatus {
        RolloutStatus {
            phase: Some(phase),
            changed,
            ..RolloutStatus::default()
        }
    }

    fn fleet() -> Vec<Workload> {
        vec![
            agent("a1", "reg/rt@sha256:01", Some("base-1")),
            agent("a2", "reg/rt@sha256:01", Some("base-1")),
            agent("a3", "reg/rt@sha256:01", None),
            tool("t1"),
        ]
    }

    #[test]
    fn a_first_run_changes_everything() {
        let set = compute(&fleet(), |_| true, None);
        assert!(set.all);
        assert!(fleet().iter().all(|w| contains(Some(&set), w)));
    }

    #[test]
    fn one_edit_after_a_verified_run_is_one_workload() {
        let prev = status(RolloutPhase::Verified, Some(everything()));
        let set = compute(&fleet(), |w| w.name() != "a2", Some(&prev));
        assert!(!set.all);
        assert_eq!(set.agents, ["a2"]);
        assert!(set.tools.is_empty());
        assert_eq!(set.config_maps, ["base-1"]);
        let picked: Vec<String> = select(Some(&set), &fleet())
            .iter()
            .map(|w| w.name().to_owned())
            .collect();
        assert_eq!(picked, ["a2"]);
        assert_eq!(describe(Some(&set), 4), "1 of 4 workload(s) changed");
    }

    #[test]
    fn an_unfinished_run_is_carried_forward() {
        let mut prev_set = ChangedSet::default();
        prev_set.agents.push("a1".into());
        for phase in [
            RolloutPhase::Progressing,
            RolloutPhase::Failed,
            RolloutPhase::Waiting,
            RolloutPhase::Pending,
        ] {
            let prev = status(phase, Some(prev_set.clone()));
            // a1 was re-pointed by the unfinished run: the cluster holds it
            // as desired, and it still must be verified.
            let set = compute(&fleet(), |w| w.name() != "t1", Some(&prev));
            assert_eq!(set.agents, ["a1"], "{phase:?}");
            assert_eq!(set.tools, ["t1"], "{phase:?}");
        }
        // An unfinished run whose set is unknown (an older status) carries
        // everything.
        let prev = status(RolloutPhase::Progressing, None);
        assert!(compute(&fleet(), |_| true, Some(&prev)).all);
        let prev = status(RolloutPhase::Failed, Some(everything()));
        assert!(compute(&fleet(), |_| true, Some(&prev)).all);
    }

    #[test]
    fn nothing_changed_is_an_empty_set_and_every_change_is_all() {
        let prev = status(RolloutPhase::Verified, None);
        let set = compute(&fleet(), |_| true, Some(&prev));
        assert_eq!(set, ChangedSet::default());
        assert!(select(Some(&set), &fleet()).is_empty());
        let set = compute(&fleet(), |_| false, Some(&prev));
        assert!(set.all);
        assert!(is_full(Some(&set)) && is_full(None) && !is_full(Some(&ChangedSet::default())));
    }

    #[test]
    fn kinds_do_not_mix() {
        let mut set = ChangedSet::default();
        set.tools.push("a1".into());
        assert!(!contains(Some(&set), &agent("a1", "x", None)));
        assert!(contains(Some(&set), &tool("a1")));
        assert!(contains(None, &tool("zz")), "no set is every workload");
    }
}
