//! The pure steps of the Agent pipeline: `validate` the mounts, `build`
//! the desired pod, and compute the `status`. No client here: each step
//! is a function over what `observe` read and what `apply` did.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::cluster::build::{self, Owner};
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::error::Result;
use crate::cluster::fs::{effective_mounts, unavailable_mounts, validate_mounts};
use crate::cluster::pods::PodSet;
use crate::crd::{Agent, AgentPhase, AgentStatus, FilesystemMount};
use crate::meta::ANNOTATION_RESTART_REQUESTED;
use crate::operator::phase::{PodState, agent_phase};
use crate::operator::pod_roll::Rolled;

/// The mounts the Agent asks for, or why its spec is refused (the
/// problems joined into one message).
pub fn validate(agent: &Agent) -> Result<Vec<FilesystemMount>, String> {
    let mounts = effective_mounts(&agent.spec, agent.status.as_ref());
    let baseline_path = agent.spec.baseline.as_ref().map(|b| b.mount_path());
    let problems = validate_mounts(&mounts, baseline_path);
    if problems.is_empty() {
        Ok(mounts)
    } else {
        Err(problems.join("; "))
    }
}

/// The status of an Agent whose spec is refused.
pub fn invalid_status(agent: &Agent, pods: &[Pod], message: &str, now: Timestamp) -> AgentStatus {
    let old = agent.status.clone().unwrap_or_default();
    let generation = agent.metadata.generation;
    AgentStatus {
        phase: Some(AgentPhase::Error),
        observed_generation: generation,
        conditions: merge(
            &old.conditions,
            &[Cond::new("Ready", false, "InvalidSpec", message.to_owned())],
            generation,
            now,
        ),
        pod_name: pods.first().and_then(|p| p.metadata.name.clone()),
        filesystems: old.filesystems,
        message: Some(message.to_owned()),
    }
}

/// What the Agent's children should be, from the valid mounts and the
/// file systems found `missing` or `closing` (being deleted).
#[derive(Debug)]
pub struct Desired {
    /// The mounts to apply: a refused one is not recorded as applied, so
    /// it stays refused and never holds the volume's deletion.
    pub mounts: Vec<FilesystemMount>,
    /// Every mounted file system exists and is not closing.
    pub available: bool,
    /// The pod to run; none while paused or unavailable.
    pub pod: Option<Pod>,
}

pub fn build(
    agent: &Agent,
    owner: &Owner,
    mounts: Vec<FilesystemMount>,
    missing: &[String],
    closing: &[String],
) -> Result<Desired> {
    let mounts: Vec<FilesystemMount> = mounts
        .into_iter()
        .filter(|m| !closing.contains(&m.name))
        .collect();
    let available = missing.is_empty() && closing.is_empty();
    let pod = if agent.spec.paused || !available {
        None
    } else {
        let annotation = |key: &str| {
            agent
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        Some(build::agent_pod_restarted(
            owner,
            &agent.spec,
            &mounts,
            annotation(ANNOTATION_RESTART_REQUESTED),
        )?)
    };
    Ok(Desired {
        mounts,
        available,
        pod,
    })
}

/// The live pods sorted against the desired one. With file systems
/// missing or refused nothing is rolled: the pod stays as it is.
pub fn pod_set<'a>(agent: &Agent, pods: &'a [Pod], desired: &Desired) -> PodSet<'a> {
    if desired.available || agent.spec.paused {
        PodSet::split(pods, desired.pod.as_ref())
    } else {
        PodSet {
            current: pods.first(),
            stale: Vec::new(),
        }
    }
}

/// The next status and what goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub status: AgentStatus,
    /// The status differs only in its conditions (a candidate for a hold).
    pub same: bool,
    /// The Agent is coming up: its first status, or a new generation
    /// rolling out, while the pod is replaced, created or started.
    pub coming_up: bool,
    pub requeue: Option<Duration>,
    /// The note of a `FilesystemTerminating` Event, once per refusal.
    pub terminating: Option<String>,
}

pub fn status(
    agent: &Agent,
    ns: &str,
    desired: Desired,
    missing: &[String],
    closing: &[String],
    rolled: Rolled,
    now: Timestamp,
) -> Next {
    let old = agent.status.clone().unwrap_or_default();
    let generation = agent.metadata.generation;
    let Rolled {
        state,
        shown,
        mut requeue,
    } = rolled;
    let mut report = agent_phase(false, agent.spec.paused, agent.spec.restart_policy, &state);
    let mut terminating = None;
    let fs_cond = if desired.available {
        Cond::new(
            "FilesystemsReady",
            true,
            "Mounted",
            format!("{} file system(s) mounted", desired.mounts.len()),
        )
    } else {
        let (reason, msg) = unavailable_mounts(ns, missing, closing);
        if !agent.spec.paused {
            report.phase = AgentPhase::Pending;
            report.reason = reason;
            report.message = msg.clone();
        }
        requeue = Some(Duration::from_secs(10));
        // Once per refusal (FilesystemNotFound has its Event after the write).
        let shown = old
            .conditions
            .iter()
            .find(|c| c.type_ == "FilesystemsReady")
            .is_some_and(|c| c.message == msg);
        if !closing.is_empty() && !shown {
            terminating = Some(msg.clone());
        }
        Cond::new("FilesystemsReady", false, reason, msg)
    };
    let status = AgentStatus {
        phase: Some(report.phase),
        observed_generation: generation,
        conditions: merge(
            &old.conditions,
            &[
                Cond::new(
                    "Ready",
                    report.phase == AgentPhase::Active,
                    report.reason,
                    report.message.clone(),
                ),
                fs_cond,
            ],
            generation,
            now,
        ),
        pod_name: if agent.spec.paused { None } else { shown },
        filesystems: desired.mounts,
        message: Some(report.message),
    };
    let same = old.phase == status.phase
        && old.observed_generation == status.observed_generation
        && old.filesystems == status.filesystems;
    // A refused mount is not progress: it is shown at once.
    let coming_up = desired.available
        && old.filesystems == status.filesystems
        && matches!(
            state,
            PodState::Missing | PodState::Deleting | PodState::Starting
        )
        && report.phase == AgentPhase::Pending
        && (old.phase.is_none() || old.observed_generation != status.observed_generation);
    Next {
        status,
        same,
        coming_up,
        requeue,
        terminating,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{AgentSpec, Container};

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn mount(name: &str) -> FilesystemMount {
        FilesystemMount {
            name: name.into(),
            mount_path: None,
            read_only: false,
        }
    }

    fn agent(paused: bool, mounts: &[&str]) -> Agent {
        let mut a = Agent::new(
            "writer",
            AgentSpec {
                runtime: Container {
                    image: format!("reg/runtime@{DIGEST}"),
                    ..Container::default()
                },
                agentlet: Container {
                    image: format!("reg/agentlet@{DIGEST}"),
                    ..Container::default()
                },
                paused,
                filesystems: Some(mounts.iter().map(|m| mount(m)).collect()),
                ..AgentSpec::default()
            },
        );
        a.metadata.namespace = Some("team".into());
        a.metadata.uid = Some("uid-1".into());
        a.metadata.generation = Some(1);
        a
    }

    fn names(mounts: &[FilesystemMount]) -> Vec<&str> {
        mounts.iter().map(|m| m.name.as_str()).collect()
    }

    #[test]
    fn validate_accepts_distinct_mounts_and_refuses_duplicates() {
        assert_eq!(
            names(&validate(&agent(false, &["a", "b"])).unwrap()),
            ["a", "b"]
        );
        assert!(validate(&agent(false, &["a", "a"])).is_err());
    }

    #[test]
    fn invalid_status_is_an_error_with_the_message() {
        let s = invalid_status(&agent(false, &[]), &[], "bad", Timestamp::now());
        assert_eq!(s.phase, Some(AgentPhase::Error));
        assert_eq!(s.message.as_deref(), Some("bad"));
        assert_eq!(s.observed_generation, Some(1));
        assert!(
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "InvalidSpec")
        );
    }

    type Case = (
        bool,
        &'static [&'static str],
        &'static [&'static str],
        bool,
        bool,
        &'static [&'static str],
    );

    #[test]
    fn build_runs_a_pod_only_when_unpaused_and_available() {
        // (paused, missing, closing) -> (pod?, available, mounts kept)
        let cases: [Case; 4] = [
            (false, &[], &[], true, true, &["a", "b"]),
            (true, &[], &[], false, true, &["a", "b"]),
            (false, &["a"], &[], false, false, &["a", "b"]),
            (false, &[], &["b"], false, false, &["a"]),
        ];
        for (paused, missing, closing, pod, available, kept) in cases {
            let a = agent(paused, &["a", "b"]);
            let owner = Owner::of(&a).unwrap();
            let missing: Vec<String> = missing.iter().map(|s| s.to_string()).collect();
            let closing: Vec<String> = closing.iter().map(|s| s.to_string()).collect();
            let mounts = validate(&a).unwrap();
            let d = build(&a, &owner, mounts, &missing, &closing).unwrap();
            assert_eq!(d.pod.is_some(), pod, "{paused} {missing:?} {closing:?}");
            assert_eq!(d.available, available);
            assert_eq!(names(&d.mounts), kept);
        }
    }

    #[test]
    fn status_by_availability_and_pod_state() {
        let rolled = |state: PodState| Rolled {
            state,
            shown: Some("writer-pod".into()),
            requeue: None,
        };
        // A first status while the pod is created: coming up, no requeue
        // (a new mount is not progress, so none here).
        let fresh = agent(false, &[]);
        let d = build(&fresh, &Owner::of(&fresh).unwrap(), vec![], &[], &[]).unwrap();
        let n = status(
            &fresh,
            "team",
            d,
            &[],
            &[],
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert_eq!(n.status.phase, Some(AgentPhase::Pending));
        assert!(n.coming_up);
        assert!(!n.same);
        assert_eq!(n.requeue, None);
        assert_eq!(n.terminating, None);
        assert_eq!(n.status.pod_name.as_deref(), Some("writer-pod"));
        let a = agent(false, &["a"]);
        let d = build(&a, &Owner::of(&a).unwrap(), validate(&a).unwrap(), &[], &[]).unwrap();
        let n = status(
            &a,
            "team",
            d,
            &[],
            &[],
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert_eq!(n.status.phase, Some(AgentPhase::Pending));
        assert!(!n.coming_up);
        assert_eq!(names(&n.status.filesystems), ["a"]);

        // A missing file system: Pending, requeued, never coming up.
        let missing = vec!["a".to_owned()];
        let d = build(
            &a,
            &Owner::of(&a).unwrap(),
            validate(&a).unwrap(),
            &missing,
            &[],
        )
        .unwrap();
        let n = status(
            &a,
            "team",
            d,
            &missing,
            &[],
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert_eq!(n.status.phase, Some(AgentPhase::Pending));
        assert!(!n.coming_up);
        assert_eq!(n.requeue, Some(Duration::from_secs(10)));
        assert_eq!(n.terminating, None);
        let ready = |n: &Next, t: &str| {
            n.status
                .conditions
                .iter()
                .find(|c| c.type_ == t)
                .map(|c| c.status.clone())
        };
        assert_eq!(ready(&n, "FilesystemsReady").as_deref(), Some("False"));

        // A closing file system: an Event once, until the condition shows it.
        let closing = vec!["a".to_owned()];
        let d = build(
            &a,
            &Owner::of(&a).unwrap(),
            validate(&a).unwrap(),
            &[],
            &closing,
        )
        .unwrap();
        let n = status(
            &a,
            "team",
            d,
            &[],
            &closing,
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert!(n.terminating.is_some());
        assert!(n.status.filesystems.is_empty());
        let mut shown = a.clone();
        shown.status = Some(n.status.clone());
        let d = build(
            &shown,
            &Owner::of(&shown).unwrap(),
            vec![mount("a")],
            &[],
            &closing,
        )
        .unwrap();
        let again = status(
            &shown,
            "team",
            d,
            &[],
            &closing,
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert_eq!(again.terminating, None);

        // Paused: no pod named.
        let p = agent(true, &[]);
        let d = build(&p, &Owner::of(&p).unwrap(), vec![], &[], &[]).unwrap();
        let n = status(
            &p,
            "team",
            d,
            &[],
            &[],
            rolled(PodState::Missing),
            Timestamp::now(),
        );
        assert_eq!(n.status.pod_name, None);
        assert_eq!(ready(&n, "FilesystemsReady").as_deref(), Some("True"));
    }
}
