//! What wakes a Rollout whose run is in progress: a change of one of the
//! workloads in its changed set, or of such a workload's pod. A step that
//! waits on the cluster so runs on the watch event of what it waits for;
//! `--rollout-poll-ms` is only the backstop.

use futures::StreamExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::cluster::apply::Ctx;
use crate::cluster::feeds::Touch;
use crate::crd::{Rollout, RolloutPhase};

/// The Rollouts to look at again when a workload, or a workload's pod,
/// changes: those whose run is in progress and has that workload in its
/// changed set. A step that waits on the cluster (`repointed/*` for an
/// Agent's `observedGeneration`, `pods-rolled/*` for its pod) so runs on
/// the watch event of what it waits for; `--rollout-poll-ms` is only the
/// backstop.
pub(super) fn waits_woken(
    op: &Ctx,
    rollouts: Store<Rollout>,
) -> impl futures::Stream<Item = ObjectRef<Rollout>> + Send + 'static {
    use crate::meta::{LABEL_AGENT, LABEL_TOOL};
    let agents = op.hubs.agents.touches().filter_map(|t| {
        futures::future::ready(match t {
            Touch::Applied(r) => r.namespace.map(|ns| (ns, WorkloadKind::Agent, r.name)),
            Touch::Deleted(_) | Touch::Relisted => None,
        })
    });
    let tools = op.hubs.tools.touches().filter_map(|t| {
        futures::future::ready(match t {
            Touch::Applied(r) => r.namespace.map(|ns| (ns, WorkloadKind::Tool, r.name)),
            Touch::Deleted(_) | Touch::Relisted => None,
        })
    });
    let pod_cache = op.pods.clone();
    let pods = op.hubs.pods.touches().filter_map(move |t| {
        let pod = match t {
            Touch::Applied(r) => pod_cache.get(&r),
            Touch::Deleted(p) => Some(p),
            Touch::Relisted => None,
        };
        futures::future::ready(pod.and_then(|p| {
            let labels = p.metadata.labels.as_ref()?;
            let ns = p.metadata.namespace.clone()?;
            if let Some(a) = labels.get(LABEL_AGENT) {
                Some((ns, WorkloadKind::Agent, a.clone()))
            } else {
                labels
                    .get(LABEL_TOOL)
                    .map(|t| (ns, WorkloadKind::Tool, t.clone()))
            }
        }))
    });
    futures::stream::select(agents, futures::stream::select(tools, pods)).flat_map(
        move |(ns, kind, name)| {
            let woken: Vec<ObjectRef<Rollout>> = rollouts
                .state()
                .iter()
                .filter(|ro| ro.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|ro| waits_on(ro, kind, &name))
                .map(|ro| ObjectRef::from_obj(ro.as_ref()))
                .collect();
            futures::stream::iter(woken)
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkloadKind {
    Agent,
    Tool,
}

/// Whether `ro`'s run is in progress with the workload `kind`/`name` in
/// its changed set. Pure.
fn waits_on(ro: &Rollout, kind: WorkloadKind, name: &str) -> bool {
    let Some(status) = ro.status.as_ref() else {
        return false;
    };
    if status.phase != Some(RolloutPhase::Progressing) {
        return false;
    }
    match &status.changed {
        None => true,
        Some(set) if set.all => true,
        Some(set) => {
            let names = match kind {
                WorkloadKind::Agent => &set.agents,
                WorkloadKind::Tool => &set.tools,
            };
            names.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{ChangedSet, RolloutSpec, RolloutStatus};

    fn rollout(phase: RolloutPhase, changed: Option<ChangedSet>) -> Rollout {
        let mut ro = Rollout::new("tenant", RolloutSpec::default());
        ro.status = Some(RolloutStatus {
            phase: Some(phase),
            changed,
            ..RolloutStatus::default()
        });
        ro
    }

    #[test]
    fn a_run_in_progress_is_woken_by_its_changed_workloads_only() {
        let set = ChangedSet {
            agents: vec!["a1".into(), "a3".into()],
            tools: vec!["t1".into()],
            ..ChangedSet::default()
        };
        let ro = rollout(RolloutPhase::Progressing, Some(set.clone()));
        assert!(waits_on(&ro, WorkloadKind::Agent, "a1"));
        assert!(waits_on(&ro, WorkloadKind::Agent, "a3"));
        assert!(!waits_on(&ro, WorkloadKind::Agent, "a2"));
        assert!(
            !waits_on(&ro, WorkloadKind::Agent, "t1"),
            "kinds do not mix"
        );
        assert!(waits_on(&ro, WorkloadKind::Tool, "t1"));
        // Every workload, when the set is all or unknown.
        for changed in [
            None,
            Some(ChangedSet {
                all: true,
                ..ChangedSet::default()
            }),
        ] {
            let ro = rollout(RolloutPhase::Progressing, changed);
            assert!(waits_on(&ro, WorkloadKind::Agent, "anything"));
        }
        // Nothing to wake once the run is over or parked.
        for phase in [
            RolloutPhase::Verified,
            RolloutPhase::Failed,
            RolloutPhase::Waiting,
            RolloutPhase::Pending,
        ] {
            assert!(!waits_on(
                &rollout(phase, Some(set.clone())),
                WorkloadKind::Agent,
                "a1"
            ));
        }
        let mut bare = rollout(RolloutPhase::Progressing, None);
        bare.status = None;
        assert!(!waits_on(&bare, WorkloadKind::Agent, "a1"));
    }
}
