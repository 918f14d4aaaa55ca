//! The GitOps engine, run by the leader only. It follows each `Fleet`
//! (watched, fetched at its interval or at once on a push), renders every
//! tenant's desired state at (commit, release), and drives one saga per
//! tenant whenever that state changes. Between changes it keeps the
//! cluster equal to git: drift is reverted, removals are pruned from the
//! tenant's inventory, and verified pods are re-checked live.
//!
//! - [`sync`]: Fleet -> fetch, load, lint -> Namespaces, AgentFS and one
//!   `Rollout` spec per tenant (`desiredHash`, `commit`).
//! - [`drive`]: Rollout -> saga steps; once verified, drift, prune retry
//!   and live re-check (`super::drift`, `super::prune`, `super::reverify`).
//! - [`notices`]: what both tell the notifier (events and commit statuses).
//!
//! Guarantees:
//! - a fetch, checkout or lint failure is reported on the Fleet's `Ready`
//!   condition and changes nothing in the cluster: the last good state stays;
//! - the saga's state lives in the Rollout's status, stamped with the spec
//!   it is for (`observedGeneration`, `desiredHash`), so a restarted
//!   operator resumes at the step it was on and a reader never mistakes an
//!   old status for the current one. A run's first write records its
//!   changed set (`super::changed`) before any step acts; after that the
//!   status is written whenever the saga waits, fails, prunes or ends, and
//!   steps done in one pass go out in one write (every step is idempotent,
//!   so a crash in between repeats only what changes nothing);
//! - a step that waits on the cluster is woken by the watch event of what
//!   it waits for (a workload of the changed set, or its pod); the poll is
//!   a backstop;
//! - every write goes through the operator's counted write path
//!   ([`crate::cluster::apply::Ctx`]) and every read of managed objects
//!   outside a running step comes from the operator's watch caches, the
//!   Rollouts' included (the engine runs no Rollout watch of its own);
//! - nothing is applied, pruned or healed while the Fleet is suspended.

mod analysis;
mod drive;
mod error;
pub mod notices;
mod sync;
mod waits;
mod wake;

pub use analysis::{SignalSources, run_name};
pub use error::Error;
use error::namespace_of;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use tokio::sync::RwLock;
use tracing::{info, warn};

use super::desired::TenantTarget;
use crate::cluster::apply::Ctx;
use crate::crd::{DriftPolicy, Fleet as FleetCr};
use crate::fleet::Fleet;
use crate::fleet::gitsync::{self, Credentials, Source};
use crate::release::{WaveName, parse_duration};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where the git mirror and checkouts live.
    pub cache_dir: PathBuf,
    /// How often a Rollout in progress is looked at again.
    pub poll: Duration,
    /// How long a live-content mismatch is retried before the saga fails.
    pub verify_grace: Duration,
    /// Where live-content drift is raised as an upstream alert.
    pub alerts: crate::alerts::AlertSink,
    /// Where what the engine did is told (`verified`, `driftReverted`,
    /// `promoted`, `rolledBack`, and each tenant's commit status).
    pub notifier: crate::notify::Notifier,
    /// What the analysis' built-in checks read.
    pub signals: SignalSources,
    /// One PromQL query's deadline.
    pub prometheus_timeout: Duration,
    /// What the `signatures-verified` step reads registries with.
    pub registry_credentials: crate::fleet::pin::Credentials,
    /// Which cluster of the fleet this is: only the tenants placed on it
    /// are applied (a fleet with `clusters/`).
    pub cluster: crate::cluster::identity::ClusterName,
    /// The control plane's fleet view, when managed: what a
    /// `move: verify-first` tenant leaving this cluster waits on.
    pub fleet_view: Option<crate::upstream::fleet_view::Access>,
}

/// A Fleet's knobs, as its spec said at the last sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub interval: Duration,
    pub prune: bool,
    pub suspend: bool,
    pub reverify: Duration,
    pub drift: DriftPolicy,
}

impl Policy {
    /// The knobs of `f`, or which field is wrong and why.
    pub fn of(f: &FleetCr) -> Result<Self, Error> {
        let duration = |field: &'static str, text: &str| {
            parse_duration(text)
                .map(|d| d.max(Duration::from_secs(1)))
                .map_err(|e| Error::InvalidSpec {
                    field,
                    reason: e.to_string(),
                })
        };
        Ok(Policy {
            interval: duration("interval", &f.spec.interval)?,
            prune: f.spec.prune,
            suspend: f.spec.suspend,
            reverify: duration("reverifyInterval", &f.spec.reverify_interval)?,
            drift: f.spec.drift_policy,
        })
    }
}

/// One Fleet's last good sync: the commit, the fleet read at it, and what
/// each tenant should run.
pub struct Loaded {
    pub commit: String,
    pub fleet: Fleet,
    pub policy: Policy,
    pub tenants: BTreeMap<String, Arc<TenantTarget>>,
    /// The git ids of the commit's entries (see `sync::incremental`): what
    /// the next sync compares to reuse what did not change.
    pub ids: crate::fleet::gitsync::Ids,
}

#[derive(Default)]
pub struct State {
    /// `namespace/name` of the Fleet -> its last good sync.
    loaded: RwLock<BTreeMap<String, Arc<Loaded>>>,
    /// What this process last applied of the objects a sync writes each
    /// time (Namespaces, AgentFS): key -> hash of the body. An unchanged
    /// body is not sent again, so a sync of an unchanged commit writes
    /// nothing; the drift check puts back what someone else changed.
    applied: std::sync::Mutex<BTreeMap<String, String>>,
    /// `namespace/name` of the Fleet -> its last fetch (also a refused one).
    fetches: std::sync::Mutex<BTreeMap<String, sync::Fetch>>,
    /// `namespace/name` of the Fleet -> the wave pointers of the last
    /// commit applied this term, whose moves were told (`sync::moves`).
    announced: std::sync::Mutex<BTreeMap<String, crate::fleet::release::WavePointersSpec>>,
    /// `namespace/name` of the Fleet -> the head last verified this term
    /// and under which keys (`sync::signed`), so a steady head is neither
    /// verified again nor its Secret read at every interval.
    verified: std::sync::Mutex<BTreeMap<String, sync::signed::Memo>>,
}

impl State {
    /// The sync and target that hold `tenant`.
    async fn tenant(&self, tenant: &str) -> Option<(Arc<Loaded>, Arc<TenantTarget>)> {
        let map = self.loaded.read().await;
        map.values().find_map(|l| {
            l.tenants
                .get(tenant)
                .map(|p| (Arc::clone(l), Arc::clone(p)))
        })
    }
}

use super::now;

/// Runs until aborted (the operator aborts it when the Lease is lost).
pub async fn run(op: Arc<Ctx>, cfg: EngineConfig) {
    // The drift check and prune read the operator's caches: acting on a
    // cache that has not listed yet would see every object as deleted.
    let mut synced = op.caches_synced.clone();
    if synced.wait_for(|v| *v).await.is_err() {
        return;
    }
    let Some(rollouts) = op.rollouts.clone() else {
        warn!(
            "gitops engine not started: Rollouts cannot be listed (install the rollouts.autonomic.sh CRD and its RBAC, then restart the operator)"
        );
        return;
    };
    let Some(fleets) = op.fleets.clone() else {
        warn!(
            "gitops engine not started: Fleets cannot be listed (install the fleets.autonomic.sh CRD and its RBAC, then restart the operator)"
        );
        return;
    };
    info!("gitops engine started");
    let state = Arc::new(State::default());
    let controller = drive::controller(&op, rollouts.clone());
    // Stopped with the engine however it ends: the leader tasks end a term
    // by dropping this future, and a sync left running would go on past
    // the lease (and beside the next term's own).
    let _sync = AbortOnDrop(tokio::spawn(sync::run(
        op.clone(),
        cfg.clone(),
        state.clone(),
        fleets,
        rollouts,
    )));
    let _analysis = AbortOnDrop(tokio::spawn(analysis::run(
        op.clone(),
        cfg.clone(),
        state.clone(),
    )));
    drive::run(controller, op, cfg, state).await;
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Which tenant runs which release: each wave's tenants are chosen by the
/// release that wave points at; a tenant already taken by an earlier wave
/// stays there.
pub fn assign(fleet: &Fleet) -> Result<Vec<(String, WaveName, String)>, Error> {
    let pointers = fleet.waves.as_ref().ok_or(Error::NoWaves)?;
    let mut taken: BTreeMap<String, (WaveName, String)> = BTreeMap::new();
    for wave in WaveName::ORDER {
        let release_name = &pointers.value.spec.get(wave).release;
        let release = fleet
            .release(release_name)
            .ok_or_else(|| Error::UnknownRelease {
                wave,
                release: release_name.clone(),
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

async fn source_for(client: &Client, f: &FleetCr, ns: &str) -> Result<Source, Error> {
    let credentials = match &f.spec.secret_ref {
        None => None,
        Some(name) => {
            let secret = Api::<Secret>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|source| Error::Secret {
                    namespace: ns.to_owned(),
                    name: name.clone(),
                    source,
                })?;
            let data = secret.data.unwrap_or_default();
            let field = |key: &'static str| {
                data.get(key)
                    .map(|v| String::from_utf8_lossy(&v.0).trim().to_owned())
                    .ok_or_else(|| Error::SecretKey {
                        namespace: ns.to_owned(),
                        name: name.clone(),
                        key,
                    })
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
        // `all-since` walks the history since the applied commit.
        full_history: f
            .spec
            .verify
            .as_ref()
            .is_some_and(|v| v.mode == crate::crd::VerifyMode::AllSince),
    })
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}
