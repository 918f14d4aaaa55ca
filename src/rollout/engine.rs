//! The GitOps engine, run by the leader only: it syncs each `Fleet` from
//! git, assigns every tenant to the release its wave points at (one
//! `Rollout` per tenant), and drives each Rollout's saga step by step.
//!
//! Guarantees:
//! - a fetch, checkout or lint failure is reported on the Fleet's `Ready`
//!   condition and changes nothing in the cluster: the last good state stays;
//! - the saga's state lives in the Rollout's status and is written after
//!   every step, so a restarted operator resumes at the step it was on and
//!   never repeats a completed one;
//! - a step that is not satisfied yet is retried; a missing actuator leaves
//!   the Rollout `Waiting` with the reason; a violated postcondition leaves it
//!   `Failed` until the spec changes (a new release, or a rollback).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::RwLock;
use tracing::{Instrument, info, warn};

use super::actuate::{LABEL_TENANT, StepCtx, execute};
use super::saga::{self, Outcome, StepKind};
use crate::crd::{
    AgentFS, Fleet as FleetCr, FleetStatus, Rollout, RolloutPhase, RolloutStatus, StepState,
};
use crate::fleet::gitsync::{self, Credentials, Source};
use crate::fleet::{self, Fleet};
use crate::operator::FIELD_MANAGER;
use crate::release::{WaveName, lint, parse_duration};

/// Name of the Rollout object in each tenant namespace.
pub const ROLLOUT_NAME: &str = "release";
pub const ANNOTATION_SYNC_REQUESTED: &str = "autonomic.sh/sync-requested-at";

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where the git mirror and checkouts live.
    pub cache_dir: PathBuf,
    /// How often a Rollout in progress is looked at again.
    pub poll: Duration,
    /// How long a live-content mismatch is retried before the saga fails.
    pub verify_grace: Duration,
    /// Follow only the Fleets in this namespace (default: every namespace).
    pub fleet_namespace: Option<String>,
}

/// The fleet at the commit the engine applies.
struct Loaded {
    commit: String,
    fleet: Fleet,
}

#[derive(Default)]
struct State {
    loaded: RwLock<BTreeMap<String, Arc<Loaded>>>,
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Runs until aborted (the operator aborts it when the Lease is lost).
pub async fn run(client: Client, cfg: EngineConfig) {
    let state = Arc::new(State::default());
    let sync = tokio::spawn(sync_loop(client.clone(), cfg.clone(), state.clone()));
    let drive = drive_rollouts(client, cfg, state);
    drive.await;
    sync.abort();
}

/// Which tenant runs which release: each wave's tenants are chosen by the
/// release that wave points at; a tenant already taken by an earlier wave
/// stays there.
pub fn assign(fleet: &Fleet) -> Result<Vec<(String, WaveName, String)>, String> {
    let pointers = fleet
        .waves
        .as_ref()
        .ok_or_else(|| "releases/waves.yaml is missing".to_owned())?;
    let mut taken: BTreeMap<String, (WaveName, String)> = BTreeMap::new();
    for wave in WaveName::ORDER {
        let release_name = &pointers.value.spec.get(wave).release;
        let release = fleet.release(release_name).ok_or_else(|| {
            format!("wave {wave} points at {release_name:?}, which is not in releases/")
        })?;
        for (w, tenants) in crate::release::plan::wave_tenants(&release.value, &fleet.tenants) {
            if w != wave {
                continue;
            }
            for t in tenants {
                taken.entry(t).or_insert((wave, release_name.clone()));
            }
        }
    }
    // A tenant no wave selected follows the fleet wave.
    let fleet_release = &pointers.value.spec.fleet.release;
    for t in fleet.tenants.keys() {
        taken
            .entry(t.clone())
            .or_insert((WaveName::Fleet, fleet_release.clone()));
    }
    Ok(taken.into_iter().map(|(t, (w, r))| (t, w, r)).collect())
}

async fn source_for(client: &Client, f: &FleetCr) -> Result<Source, String> {
    let ns = f.namespace().unwrap_or_default();
    let credentials = match &f.spec.secret_ref {
        None => None,
        Some(name) => {
            let secret = Api::<Secret>::namespaced(client.clone(), &ns)
                .get(name)
                .await
                .map_err(|e| format!("Secret {ns}/{name}: {}", short_kube_error(&e)))?;
            let data = secret.data.unwrap_or_default();
            let field = |k: &str| {
                data.get(k)
                    .map(|v| String::from_utf8_lossy(&v.0).trim().to_owned())
                    .ok_or_else(|| format!("Secret {ns}/{name} has no key {k:?}"))
            };
            Some(Credentials {
                username: field("username").unwrap_or_else(|_| "git".into()),
                password: field("password")?,
            })
        }
    };
    Ok(Source {
        url: f.spec.url.clone(),
        branch: f.spec.branch.clone(),
        credentials,
        allow_insecure: f.spec.allow_insecure,
        max_file_bytes: f
            .spec
            .max_file_bytes
            .and_then(|b| u64::try_from(b).ok())
            .unwrap_or(gitsync::DEFAULT_MAX_FILE_BYTES),
    })
}

fn short_kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

async fn set_fleet_status(client: &Client, f: &FleetCr, status: FleetStatus) {
    let ns = f.namespace().unwrap_or_default();
    let api: Api<FleetCr> = Api::namespaced(client.clone(), &ns);
    let body = serde_json::json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet", "status": status});
    if let Err(e) = api
        .patch_status(
            &f.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        warn!(fleet = %f.name_any(), error = %e, "cannot write Fleet status");
    }
}

fn ready(status: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: now(),
        observed_generation: generation,
    }
}

/// Fetches, checks and applies one Fleet. Returns the loaded fleet when it
/// was good; on any failure the Fleet's status says why and nothing changes.
async fn sync_one(client: &Client, cfg: &EngineConfig, f: &FleetCr) -> Option<Arc<Loaded>> {
    let ns = f.namespace().unwrap_or_default();
    let mut status = f.status.clone().unwrap_or_default();
    status.last_sync_time = Some(now());
    let fail = |mut status: FleetStatus, reason: &str, message: String| {
        warn!(fleet = %f.name_any(), reason, %message, "fleet sync refused");
        status.conditions = vec![ready(false, reason, message, f.metadata.generation)];
        status
    };
    let source = match source_for(client, f).await {
        Ok(s) => s,
        Err(m) => {
            set_fleet_status(client, f, fail(status, "CredentialsUnavailable", m)).await;
            return None;
        }
    };
    let cache = cfg.cache_dir.join(format!("{ns}-{}", f.name_any()));
    let checkout = match tokio::task::spawn_blocking(move || gitsync::sync(&source, &cache)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let reason = match e {
                gitsync::GitSyncError::UrlRefused(_) => "URLRefused",
                gitsync::GitSyncError::Refused { .. } => "CheckoutRefused",
                _ => "FetchFailed",
            };
            set_fleet_status(client, f, fail(status, reason, e.to_string())).await;
            return None;
        }
        Err(e) => {
            set_fleet_status(client, f, fail(status, "FetchFailed", e.to_string())).await;
            return None;
        }
    };
    status.fetched_commit = Some(checkout.commit.clone());
    let loaded = match fleet::load(&checkout.path) {
        Ok(fl) => fl,
        Err(e) => {
            let m = format!(
                "commit {}: {}",
                short(&checkout.commit),
                e.to_string().replace('\n', "; ")
            );
            set_fleet_status(client, f, fail(status, "InvalidFleet", m)).await;
            return None;
        }
    };
    let findings = lint::lint_fleet(&loaded);
    if !findings.is_empty() {
        let m = format!(
            "commit {}: {} lint finding(s): {}",
            short(&checkout.commit),
            findings.len(),
            findings
                .iter()
                .take(3)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        set_fleet_status(client, f, fail(status, "LintFailed", m)).await;
        return None;
    }
    let assignment = match assign(&loaded) {
        Ok(a) => a,
        Err(m) => {
            set_fleet_status(client, f, fail(status, "InvalidFleet", m)).await;
            return None;
        }
    };
    if let Err(m) = apply_assignment(client, &loaded, &assignment, &checkout.commit).await {
        set_fleet_status(client, f, fail(status, "ApplyFailed", m)).await;
        return None;
    }
    if status.applied_commit.as_deref() != Some(checkout.commit.as_str()) {
        info!(fleet = %f.name_any(), commit = %short(&checkout.commit), "applied fleet commit");
    }
    status.applied_commit = Some(checkout.commit.clone());
    status.waves = loaded
        .waves
        .as_ref()
        .map(|w| {
            WaveName::ORDER
                .iter()
                .map(|n| (n.to_string(), w.value.spec.get(*n).release.clone()))
                .collect()
        })
        .unwrap_or_default();
    let message = format!(
        "applied {} to {} tenant(s)",
        short(&checkout.commit),
        assignment.len()
    );
    status.conditions = vec![ready(true, "Applied", message, f.metadata.generation)];
    set_fleet_status(client, f, status).await;
    Some(Arc::new(Loaded {
        commit: checkout.commit,
        fleet: loaded,
    }))
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Namespaces and AgentFS first (they do not depend on the release), then
/// each tenant's Rollout spec. Agents and Tools are applied only by sagas.
async fn apply_assignment(
    client: &Client,
    loaded: &Fleet,
    assignment: &[(String, WaveName, String)],
    commit: &str,
) -> Result<(), String> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for (tenant, wave, release) in assignment {
        let ns = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": tenant, "labels": {LABEL_TENANT: tenant, "app.kubernetes.io/managed-by": "exo"}}
        });
        Api::<Namespace>::all(client.clone())
            .patch(tenant, &params, &Patch::Apply(&ns))
            .await
            .map_err(|e| format!("namespace {tenant}: {}", short_kube_error(&e)))?;
        if let Some(t) = loaded.tenants.get(tenant) {
            for fs in &t.filesystems {
                let name = fs.value.name_any();
                let body = serde_json::json!({
                    "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
                    "metadata": {"name": name, "namespace": tenant,
                                 "labels": {LABEL_TENANT: tenant, "app.kubernetes.io/managed-by": "exo"}},
                    "spec": fs.value.spec,
                });
                Api::<AgentFS>::namespaced(client.clone(), tenant)
                    .patch(&name, &params, &Patch::Apply(&body))
                    .await
                    .map_err(|e| format!("AgentFS {tenant}/{name}: {}", short_kube_error(&e)))?;
            }
        }
        let body = serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Rollout",
            "metadata": {"name": ROLLOUT_NAME, "namespace": tenant,
                         "labels": {LABEL_TENANT: tenant, "app.kubernetes.io/managed-by": "exo"}},
            "spec": {"tenant": tenant, "wave": wave.as_str(), "release": release, "commit": commit},
        });
        Api::<Rollout>::namespaced(client.clone(), tenant)
            .patch(ROLLOUT_NAME, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| format!("Rollout {tenant}/{ROLLOUT_NAME}: {}", short_kube_error(&e)))?;
    }
    Ok(())
}

async fn sync_loop(client: Client, cfg: EngineConfig, state: Arc<State>) {
    // name -> (last sync, sync-requested annotation seen, generation seen)
    let mut last: BTreeMap<String, (Instant, Option<String>, Option<i64>)> = BTreeMap::new();
    let api: Api<FleetCr> = match &cfg.fleet_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for f in list.items {
                    let key = format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any());
                    let interval = parse_duration(&f.spec.interval)
                        .unwrap_or(Duration::from_secs(60))
                        .max(Duration::from_secs(1));
                    let requested = f.annotations().get(ANNOTATION_SYNC_REQUESTED).cloned();
                    let due = match last.get(&key) {
                        None => true,
                        Some((at, req, generation)) => {
                            at.elapsed() >= interval
                                || *req != requested
                                || *generation != f.metadata.generation
                        }
                    };
                    if !due {
                        continue;
                    }
                    last.insert(
                        key.clone(),
                        (Instant::now(), requested, f.metadata.generation),
                    );
                    if let Some(l) = sync_one(&client, &cfg, &f).await {
                        state.loaded.write().await.insert(key, l);
                    }
                }
            }
            Err(e) => warn!(error = %e, "cannot list Fleets"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

struct DriveCtx {
    client: Client,
    cfg: EngineConfig,
    state: Arc<State>,
    /// When each Rollout's status last got a progress-only write.
    progress_written: std::sync::Mutex<BTreeMap<String, Instant>>,
}

/// How often a step still running may rewrite only its progress message:
/// a tenant's saga is looked at every `poll`, and writing each new message
/// (a different pod is the one still rolling) would cost a status write per
/// look.
const PROGRESS_WRITE_EVERY: Duration = Duration::from_secs(2);

impl DriveCtx {
    /// Whether a progress-only write for `key` is due now (and, if so,
    /// records it).
    fn progress_due(&self, key: &str) -> bool {
        let Ok(mut map) = self.progress_written.lock() else {
            return true;
        };
        match map.get(key) {
            Some(at) if at.elapsed() < PROGRESS_WRITE_EVERY => false,
            _ => {
                map.insert(key.to_owned(), Instant::now());
                true
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum DriveError {
    #[error("write Rollout status: {0}")]
    Status(#[source] kube::Error),
}

async fn drive_rollouts(client: Client, cfg: EngineConfig, state: Arc<State>) {
    let api: Api<Rollout> = Api::all(client.clone());
    let ctx = Arc::new(DriveCtx {
        client,
        cfg,
        state,
        progress_written: std::sync::Mutex::default(),
    });
    Controller::new(api, watcher::Config::default())
        .run(
            reconcile,
            |_, e: &DriveError, _| {
                warn!(error = %e, "rollout reconcile failed");
                Action::requeue(Duration::from_secs(2))
            },
            ctx,
        )
        .for_each_concurrent(16, |_| async {})
        .await;
}

async fn write_status(
    client: &Client,
    ro: &Rollout,
    status: &RolloutStatus,
) -> Result<(), DriveError> {
    let ns = ro.namespace().unwrap_or_default();
    let body = serde_json::json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Rollout", "status": status});
    Api::<Rollout>::namespaced(client.clone(), &ns)
        .patch_status(
            &ro.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
        .map_err(DriveError::Status)
}

async fn reconcile(cached: Arc<Rollout>, ctx: Arc<DriveCtx>) -> Result<Action, DriveError> {
    let ns = cached.namespace().unwrap_or_default();
    // Read the saga state from the apiserver, not the watch cache: a cached
    // copy can lag our own last status write, and acting on it would run a
    // completed step again.
    let ro = match Api::<Rollout>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&cached.name_any())
        .await
    {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(Action::await_change()),
        Err(e) => return Err(DriveError::Status(e)),
    };
    // The fleet this Rollout's commit came from.
    let loaded = {
        let map = ctx.state.loaded.read().await;
        map.values()
            .find(|l| l.fleet.tenants.contains_key(&ro.spec.tenant))
            .cloned()
    };
    let Some(loaded) = loaded else {
        // Not synced yet since this leader started, or another engine's
        // fleet: look again later.
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    if loaded.commit != ro.spec.commit && loaded.fleet.release(&ro.spec.release).is_none() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let Some(release) = loaded
        .fleet
        .release(&ro.spec.release)
        .map(|r| r.value.clone())
    else {
        return Ok(Action::requeue(Duration::from_secs(5)));
    };
    let Some(tenant) = loaded.fleet.tenants.get(&ro.spec.tenant) else {
        return Ok(Action::requeue(Duration::from_secs(5)));
    };
    let workloads = saga::desired_workloads(tenant, &release);
    let kinds = saga::steps(&workloads, &release);
    let mut status = ro.status.clone().unwrap_or_default();
    if status.release.as_deref() != Some(release.metadata.name.as_str()) || status.steps.is_empty()
    {
        info!(tenant = %ro.spec.tenant, wave = %ro.spec.wave, release = %release.metadata.name, "saga started");
        status = saga::fresh_status(ro.status.as_ref(), &release.metadata.name, &kinds, now());
        status.observed_generation = ro.metadata.generation;
        write_status(&ctx.client, &ro, &status).await?;
    }
    match status.phase {
        Some(RolloutPhase::Verified) => return Ok(Action::requeue(Duration::from_secs(60))),
        Some(RolloutPhase::Failed) => return Ok(Action::await_change()),
        _ => {}
    }
    while let Some(i) = saga::next_step(&status) {
        let started = status.steps[i].started_at.as_ref().map(|t| t.0.as_second());
        let step_age = started
            .map(|s| Duration::from_secs(u64::try_from(now().0.as_second() - s).unwrap_or(0)))
            .unwrap_or_default();
        let step_ctx = StepCtx {
            client: &ctx.client,
            namespace: &ns,
            release: &release,
            fleet: &loaded.fleet,
            workloads: &workloads,
            step_age,
            verify_grace: ctx.cfg.verify_grace,
        };
        let Some(kind) = StepKind::parse(&status.steps[i].name) else {
            // Steps from an older operator: start the saga over.
            status = saga::fresh_status(Some(&status), &release.metadata.name, &kinds, now());
            write_status(&ctx.client, &ro, &status).await?;
            continue;
        };
        let span = tracing::info_span!("saga_step", tenant = %ro.spec.tenant, step = %kind.name());
        // Instrument, never enter, across an await: an entered span would
        // leak onto whatever else runs on this thread.
        let outcome = execute(&kind, &step_ctx).instrument(span).await;
        let was_running = status.steps[i].state == StepState::Running;
        let changed = saga::record(&mut status, i, &outcome, &now());
        let progress_only = was_running && matches!(outcome, Outcome::Pending(_));
        if changed && (!progress_only || ctx.progress_due(&format!("{ns}/{}", ro.name_any()))) {
            write_status(&ctx.client, &ro, &status).await?;
        }
        match outcome {
            Outcome::Done => {
                info!(tenant = %ro.spec.tenant, step = %kind.name(), "step done");
                continue;
            }
            Outcome::Pending(_) => {
                return Ok(Action::requeue(saga::next_look(ctx.cfg.poll, step_age)));
            }
            Outcome::Waiting(m) => {
                warn!(tenant = %ro.spec.tenant, step = %kind.name(), reason = %m, "saga waiting");
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
            Outcome::Failed(m) => {
                warn!(tenant = %ro.spec.tenant, step = %kind.name(), reason = %m, "saga failed");
                return Ok(Action::await_change());
            }
        }
    }
    info!(tenant = %ro.spec.tenant, release = %release.metadata.name, "tenant verified");
    Ok(Action::requeue(Duration::from_secs(60)))
}
