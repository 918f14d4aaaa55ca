//! The rollout saga's pure core: which steps a tenant's rollout has, in which
//! order, what each workload should look like, and how a step's outcome
//! moves the saga's durable status.
//!
//! Order (the reason is in the product documents): baseline ConfigMaps are
//! published before anything mounts them; then, component by component in
//! the release's dependency order, workloads are re-pointed, their pods
//! rolled and checked, and their live content verified, so a capability is
//! verified before any consumer that depends on it moves; the status is
//! projected last.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::{Agent, ChangedSet, RolloutPhase, RolloutStatus, StepState, Tool};
use crate::fleet::Tenant;
use crate::release::plan::apply_order;
use crate::release::repoint;
use crate::release::{ImageRef, Release};
pub use crate::saga::{Outcome, Step, combine, next_look};

pub const STEP_ISOLATED: &str = "network-isolated";
pub const STEP_SIGNATURES: &str = "signatures-verified";
pub const STEP_CONFIGMAPS: &str = "configmaps-published";
pub const STEP_PROJECTED: &str = "status-projected";
pub const STEP_PRUNED: &str = "pruned";
/// How many verified releases a Rollout remembers for rollback.
pub const VERIFIED_HISTORY: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// The tenant namespace's NetworkPolicies are applied and as built.
    Isolate,
    /// Every image of the release carries a cosign signature by a trusted
    /// key (only for a release that names keys).
    VerifySignatures,
    PublishConfigMaps,
    Repoint(String),
    PodsRolled(String),
    Verified(String),
    /// Objects in the inventory that git no longer has are deleted.
    Prune,
    ProjectStatus,
}

impl Step for StepKind {
    fn name(&self) -> String {
        match self {
            StepKind::Isolate => STEP_ISOLATED.into(),
            StepKind::VerifySignatures => STEP_SIGNATURES.into(),
            StepKind::PublishConfigMaps => STEP_CONFIGMAPS.into(),
            StepKind::Repoint(c) => format!("repointed/{c}"),
            StepKind::PodsRolled(c) => format!("pods-rolled/{c}"),
            StepKind::Verified(c) => format!("verified/{c}"),
            StepKind::Prune => STEP_PRUNED.into(),
            StepKind::ProjectStatus => STEP_PROJECTED.into(),
        }
    }

    /// The actuator that owns the step.
    fn owner(&self) -> &'static str {
        match self {
            StepKind::Isolate => "exo-operator/network-isolation (server-side apply)",
            StepKind::VerifySignatures => "exo-operator/signature-verifier (registry)",
            StepKind::PublishConfigMaps => "exo-operator/configmap-publisher",
            StepKind::Repoint(_) => "exo-operator/rollout (server-side apply)",
            StepKind::PodsRolled(_) => "exo-operator/workload-reconciler",
            StepKind::Verified(_) => "exo-operator/verifier (pods/exec)",
            StepKind::Prune => "exo-operator/rollout (inventory)",
            StepKind::ProjectStatus => "exo-operator/rollout",
        }
    }
}

impl StepKind {
    pub fn parse(name: &str) -> Option<StepKind> {
        match name {
            STEP_ISOLATED => Some(StepKind::Isolate),
            STEP_SIGNATURES => Some(StepKind::VerifySignatures),
            STEP_CONFIGMAPS => Some(StepKind::PublishConfigMaps),
            STEP_PROJECTED => Some(StepKind::ProjectStatus),
            STEP_PRUNED => Some(StepKind::Prune),
            _ => {
                let (kind, component) = name.split_once('/')?;
                let c = component.to_owned();
                match kind {
                    "repointed" => Some(StepKind::Repoint(c)),
                    "pods-rolled" => Some(StepKind::PodsRolled(c)),
                    "verified" => Some(StepKind::Verified(c)),
                    _ => None,
                }
            }
        }
    }
}

/// One workload as the release wants it.
#[derive(Debug, Clone, PartialEq)]
// An Agent is a couple of hundred bytes larger than a Tool; workloads live
// in one short Vec per tenant, where a Box per Agent would cost more than
// the padding.
#[allow(clippy::large_enum_variant)]
pub enum Workload {
    Agent(Agent),
    Tool(Tool),
}

impl Workload {
    pub fn name(&self) -> &str {
        match self {
            Workload::Agent(a) => a.metadata.name.as_deref().unwrap_or_default(),
            Workload::Tool(t) => t.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Agent(_) => "Agent",
            Workload::Tool(_) => "Tool",
        }
    }

    /// (container name in the pod, image).
    pub fn images(&self) -> Vec<(&'static str, &str)> {
        match self {
            Workload::Agent(a) => vec![
                ("agentlet", a.spec.agentlet.image.as_str()),
                ("runtime", a.spec.runtime.image.as_str()),
            ],
            Workload::Tool(t) => vec![("tool", t.spec.container.image.as_str())],
        }
    }
}

/// The tenant's workloads re-pointed to `release`: images by repository,
/// baselines by name. Everything else is the manifest as written.
pub fn desired_workloads(tenant: &Tenant, release: &Release) -> Vec<Workload> {
    let tools = tenant
        .tools
        .iter()
        .map(|t| desired_tool(&t.value, tenant, release));
    let agents = tenant
        .agents
        .iter()
        .map(|a| desired_agent(&a.value, tenant, release));
    tools.chain(agents).collect()
}

/// One Tool of `tenant` as [`desired_workloads`] renders it.
pub fn desired_tool(t: &Tool, tenant: &Tenant, release: &Release) -> Workload {
    let mut tool = t.clone();
    tool.spec.container.image = repoint::image(&tool.spec.container.image, release);
    tool.spec.node_tier.clone_from(&tenant.settings.node_tier);
    tool.spec.run_as_user = tenant.settings.uid_range.map(|r| i64::from(r.start));
    tool.status = None;
    Workload::Tool(tool)
}

/// One Agent of `tenant` as [`desired_workloads`] renders it.
pub fn desired_agent(a: &Agent, tenant: &Tenant, release: &Release) -> Workload {
    let mut agent = a.clone();
    agent.spec.runtime.image = repoint::image(&agent.spec.runtime.image, release);
    agent.spec.agentlet.image = repoint::image(&agent.spec.agentlet.image, release);
    if let Some(b) = agent.spec.baseline.as_mut() {
        b.config_map = repoint::baseline(&b.config_map, release);
    }
    agent.spec.node_tier.clone_from(&tenant.settings.node_tier);
    // The tenant's keys: a change of scopes is a change of every Agent
    // (its pod rolls onto the new keys).
    let scopes = crate::tenant::access::Scopes::of(&tenant.settings);
    agent.spec.access_scopes = (!scopes.is_empty()).then(|| scopes.hash());
    agent.spec.run_as_user = tenant.settings.uid_range.map(|r| i64::from(r.start));
    agent.status = None;
    Workload::Agent(agent)
}

/// A release's components in apply order, and the index of each one's
/// image repository: built once per grouping, not once per workload (a
/// tenant can hold a thousand).
struct Components {
    names: Vec<String>,
    by_repository: BTreeMap<String, usize>,
}

impl Components {
    fn of(release: &Release) -> Self {
        let order = apply_order(release);
        Components {
            names: order.iter().map(|c| c.name.clone()).collect(),
            by_repository: order
                .iter()
                .enumerate()
                .map(|(i, c)| (ImageRef::parse(&c.image).repository, i))
                .collect(),
        }
    }

    /// The index of the component `w` rolls with (see [`component_of`]).
    fn index(&self, w: &Workload) -> Option<usize> {
        w.images()
            .iter()
            .filter_map(|(_, image)| {
                self.by_repository
                    .get(&ImageRef::parse(image).repository)
                    .copied()
            })
            .max()
    }

    /// The group of `w`: its component, else the last component, else
    /// `workloads`.
    fn group(&self, w: &Workload) -> &str {
        self.index(w)
            .or_else(|| self.names.len().checked_sub(1))
            .map_or("workloads", |i| self.names[i].as_str())
    }
}

/// The component a workload rolls with: the last, in apply order, of the
/// components its containers run. `None` when no container's image is a
/// component of the release.
pub fn component_of(w: &Workload, release: &Release) -> Option<String> {
    let components = Components::of(release);
    components.index(w).map(|i| components.names[i].clone())
}

/// The groups of `workloads` in apply order, each with the positions of
/// its workloads; those of no component go with the last component.
fn group_positions<'r>(
    components: &'r Components,
    workloads: &[Workload],
) -> Vec<(&'r str, Vec<usize>)> {
    let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, w) in workloads.iter().enumerate() {
        by.entry(components.group(w)).or_default().push(i);
    }
    let mut out: Vec<(&str, Vec<usize>)> = components
        .names
        .iter()
        .filter_map(|c| by.remove(c.as_str()).map(|ws| (c.as_str(), ws)))
        .collect();
    out.extend(by);
    out
}

/// Components that have workloads in this tenant, in apply order, with
/// their workloads. Workloads of no component roll with the last group.
pub fn groups(workloads: &[Workload], release: &Release) -> Vec<(String, Vec<Workload>)> {
    let components = Components::of(release);
    group_positions(&components, workloads)
        .into_iter()
        .map(|(c, at)| {
            (
                c.to_owned(),
                at.into_iter().map(|i| workloads[i].clone()).collect(),
            )
        })
        .collect()
}

/// The saga's steps for a tenant's workloads under `release`.
pub fn steps(workloads: &[Workload], release: &Release) -> Vec<StepKind> {
    // Isolation first: no workload of a release runs before its
    // namespace's policies hold. Then, for a release that names signing
    // keys, its signatures: nothing of it is published or applied before
    // every image verifies.
    let mut out = vec![StepKind::Isolate];
    if release.spec.signatures.is_some() {
        out.push(StepKind::VerifySignatures);
    }
    out.push(StepKind::PublishConfigMaps);
    // The names only: no workload is copied (this runs on each pass).
    let components = Components::of(release);
    for (c, _) in group_positions(&components, workloads) {
        out.push(StepKind::Repoint(c.to_owned()));
        out.push(StepKind::PodsRolled(c.to_owned()));
        out.push(StepKind::Verified(c.to_owned()));
    }
    // Removals last: whatever replaces a pruned object is verified first.
    out.push(StepKind::Prune);
    out.push(StepKind::ProjectStatus);
    out
}

/// Baseline versions the tenant's agents mount under `release`, with the
/// release's sha256 for each.
pub fn baselines_needed(
    workloads: &[Workload],
    release: &Release,
) -> BTreeMap<String, Option<String>> {
    let versions: BTreeSet<&str> = workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Agent(a) => a.spec.baseline.as_ref().map(|b| b.config_map.as_str()),
            Workload::Tool(_) => None,
        })
        .collect();
    versions
        .into_iter()
        .map(|v| {
            let sha = release
                .spec
                .config_maps
                .iter()
                .find(|cm| cm.version == v)
                .map(|cm| cm.sha256.clone());
            (v.to_owned(), sha)
        })
        .collect()
}

/// A fresh saga for `release`: every step Pending.
pub fn fresh_status(
    previous: Option<&RolloutStatus>,
    release: &str,
    kinds: &[StepKind],
    now: Time,
) -> RolloutStatus {
    RolloutStatus {
        phase: Some(RolloutPhase::Progressing),
        release: Some(release.to_owned()),
        current_step: kinds.first().map(StepKind::name),
        steps: crate::saga::fresh(kinds),
        started_at: Some(now),
        verified_at: None,
        message: None,
        observed_generation: None,
        desired_hash: None,
        applied_commit: None,
        // What outlives one saga: the releases verified (for rollback),
        // the pending prunes, and the drift and re-check record. The
        // inventory lives in its own object (`super::inventory`); the
        // deprecated field is never written.
        verified_releases: previous
            .map(|p| p.verified_releases.clone())
            .unwrap_or_default(),
        inventory: Vec::new(),
        pending_prunes: previous
            .map(|p| p.pending_prunes.clone())
            .unwrap_or_default(),
        conditions: previous.map(|p| p.conditions.clone()).unwrap_or_default(),
        last_drift: previous.and_then(|p| p.last_drift.clone()),
        last_live_check: previous.and_then(|p| p.last_live_check.clone()),
        last_full_check: previous.and_then(|p| p.last_full_check.clone()),
        // Each run records its own (see `super::changed`), and verifies
        // its release's signatures afresh.
        changed: None,
        signatures: Vec::new(),
    }
}

/// What a saga is started for: the spec's desired hash, commit and
/// generation, stamped on the status so every reader can tell whether the
/// status is about the spec it sees.
#[derive(Debug, Clone, Copy)]
pub struct StartedFor<'a> {
    pub desired_hash: &'a str,
    pub commit: &'a str,
    pub generation: Option<i64>,
}

/// A fresh saga for the current spec (see [`fresh_status`]), stamped with
/// what it is for and with what it changes (`changed`, stored with this
/// first write, before any step acts). The objects git wants join the
/// inventory before this is written (see `super::inventory`), so one
/// applied and then dropped from git before the saga ends is still pruned.
pub fn start(
    previous: Option<&RolloutStatus>,
    release: &str,
    kinds: &[StepKind],
    now: Time,
    for_: StartedFor<'_>,
    changed: ChangedSet,
) -> RolloutStatus {
    let mut s = fresh_status(previous, release, kinds, now);
    s.changed = Some(changed);
    s.desired_hash = Some(for_.desired_hash.to_owned());
    s.applied_commit = Some(for_.commit.to_owned());
    s.observed_generation = for_.generation;
    s
}

/// Runs the saga again for the same spec (after a drift revert or a
/// healed pod): every step Pending over every workload, the stamp and the
/// record kept, and `why` as the message until the first step reports.
pub fn restart(
    status: &RolloutStatus,
    kinds: &[StepKind],
    now: Time,
    why: String,
) -> RolloutStatus {
    let release = status.release.clone().unwrap_or_default();
    let mut s = fresh_status(Some(status), &release, kinds, now);
    s.desired_hash.clone_from(&status.desired_hash);
    s.applied_commit.clone_from(&status.applied_commit);
    s.observed_generation = status.observed_generation;
    s.message = Some(why);
    s.changed = Some(ChangedSet {
        all: true,
        ..ChangedSet::default()
    });
    s
}

/// Index of the step to run: the first that is not Done.
pub fn next_step(status: &RolloutStatus) -> Option<usize> {
    crate::saga::next_step(&status.steps)
}

/// Records `outcome` for step `i`, and the Rollout's phase with it: the
/// last step Done makes it Verified and remembers the release for
/// rollback. Returns whether anything changed.
pub fn record(status: &mut RolloutStatus, i: usize, outcome: &Outcome, now: &Time) -> bool {
    let before = status.clone();
    let Some((state, message)) = crate::saga::record_step(&mut status.steps, i, outcome, now)
    else {
        return false;
    };
    status.current_step = Some(status.steps[i].name.clone());
    status.message = message;
    status.phase = Some(match state {
        StepState::Failed => RolloutPhase::Failed,
        StepState::Waiting => RolloutPhase::Waiting,
        _ => RolloutPhase::Progressing,
    });
    if state == StepState::Done && next_step(status).is_none() {
        status.phase = Some(RolloutPhase::Verified);
        status.current_step = None;
        status.verified_at = Some(now.clone());
        if status.changed.as_ref().is_none_or(|c| c.all) {
            // Every pod of the tenant was verified by this run.
            status.last_full_check = Some(now.clone());
        }
        if let Some(r) = status.release.clone() {
            status.verified_releases.retain(|v| *v != r);
            status.verified_releases.insert(0, r);
            status.verified_releases.truncate(VERIFIED_HISTORY);
        }
    }
    *status != before
}

/// The digest in a container status `imageID`, whatever runtime prefix it has
/// (`docker-pullable://repo@sha256:…`, `repo@sha256:…`, `sha256:…`).
pub fn digest_of_image_id(image_id: &str) -> Option<&str> {
    let at = image_id.rfind("sha256:")?;
    Some(&image_id[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> crate::fleet::Fleet {
        crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn steps_follow_dependency_order() {
        let f = example();
        let r = &f.release("2026.11.1").unwrap().value;
        let ws = desired_workloads(&f.tenants["acme"], r);
        let names: Vec<String> = steps(&ws, r).iter().map(StepKind::name).collect();
        assert_eq!(
            names,
            [
                "network-isolated",
                "configmaps-published",
                "repointed/broker",
                "pods-rolled/broker",
                "verified/broker",
                "repointed/router",
                "pods-rolled/router",
                "verified/router",
                "repointed/agent-runtime",
                "pods-rolled/agent-runtime",
                "verified/agent-runtime",
                "pruned",
                "status-projected"
            ]
        );
        for n in &names {
            assert_eq!(
                StepKind::parse(n).map(|k| k.name()).as_deref(),
                Some(n.as_str())
            );
        }
    }

    #[test]
    fn workloads_are_repointed_to_the_release() {
        let f = example();
        let r = &f.release("2026.11.1").unwrap().value;
        let ws = desired_workloads(&f.tenants["acme"], r);
        let agent = ws
            .iter()
            .find_map(|w| match w {
                Workload::Agent(a) => Some(a),
                _ => None,
            })
            .unwrap();
        assert!(
            agent
                .spec
                .runtime
                .image
                .ends_with("05e6813e7dcf2fc989281d830a22b88b75cfc9a5b80c88a1aeb43c5772259ee6")
        );
        assert_eq!(
            agent.spec.baseline.as_ref().unwrap().config_map,
            "agent-baseline-10c9acf82b"
        );
        let need = baselines_needed(&ws, r);
        assert_eq!(need.len(), 1);
        assert!(
            need["agent-baseline-10c9acf82b"]
                .as_deref()
                .unwrap()
                .starts_with("10c9acf82b")
        );
    }

    #[test]
    fn status_moves_step_by_step_and_remembers_verified_releases() {
        let kinds = vec![StepKind::PublishConfigMaps, StepKind::ProjectStatus];
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut s = fresh_status(None, "r2", &kinds, now.clone());
        assert_eq!(next_step(&s), Some(0));
        assert!(record(&mut s, 0, &Outcome::Pending("rolling".into()), &now));
        assert!(
            !record(&mut s, 0, &Outcome::Pending("rolling".into()), &now),
            "no change, no write"
        );
        record(&mut s, 0, &Outcome::Waiting("no exec".into()), &now);
        assert_eq!(s.phase, Some(RolloutPhase::Waiting));
        record(&mut s, 0, &Outcome::Done, &now);
        assert_eq!(next_step(&s), Some(1));
        record(&mut s, 1, &Outcome::Done, &now);
        assert_eq!(s.phase, Some(RolloutPhase::Verified));
        assert_eq!(s.verified_releases, ["r2"]);
        let again = fresh_status(Some(&s), "r3", &kinds, now.clone());
        assert_eq!(again.verified_releases, ["r2"]);
        let mut failed = again.clone();
        record(&mut failed, 0, &Outcome::Failed("hash".into()), &now);
        assert_eq!(failed.phase, Some(RolloutPhase::Failed));
    }

    #[test]
    fn the_worst_outcome_wins() {
        let p = Outcome::Pending("p".into());
        let w = Outcome::Waiting("w".into());
        let f = Outcome::Failed("f".into());
        assert_eq!(combine(vec![]), Outcome::Done);
        assert_eq!(combine(vec![Outcome::Done, p.clone()]), p);
        assert_eq!(combine(vec![p.clone(), w.clone(), Outcome::Done]), w);
        assert_eq!(combine(vec![w, f.clone(), p]), f);
    }

    #[test]
    fn parses_runtime_outputs() {
        assert_eq!(
            digest_of_image_id("docker-pullable://r/x@sha256:abc"),
            Some("sha256:abc")
        );
        assert_eq!(digest_of_image_id("r/x@sha256:abc"), Some("sha256:abc"));
        assert_eq!(digest_of_image_id("r/x:1"), None);
    }
}
