//! The operator assembled: from its settings ([`Config`], which `exo
//! operator run` fills from flags and the environment) to every leader task
//! (the GitOps engine, the scheduled audit, the health monitors, the
//! circuit telemetry, the `exo fs` helper reaper, the notifications'
//! delivery and, when managed, the upstream connection with its monitor),
//! the upstream `/health` server, and the runtime, until SIGTERM
//! or SIGINT.
//!
//! Guarantees: a leader task runs only while this replica holds the Lease
//! (the runtime starts and stops them); a failure to start is logged where
//! it happens and returned; alerts still undelivered at the end are logged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};

use super::monitor::thresholds::Overrides;
use super::runtime::{LeaderTask, OperatorConfig, RuntimeError, Stop};
use crate::cluster::apply::Ctx;
use crate::cluster::leader::LeaderConfig;

/// What `exo operator run` is told; each field is its flag's value.
#[derive(Debug, Clone)]
pub struct Config {
    /// Watch only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Address of /healthz, /readyz and /metrics.
    pub metrics_addr: SocketAddr,
    pub lease_name: String,
    pub lease_namespace: String,
    /// This replica's name in the Lease.
    pub identity: String,
    /// How long a Lease stays valid without renewal (at least 2s is used).
    pub lease_duration: Duration,
    /// Reconciles running at once, per controller.
    pub concurrency: u16,
    /// The GitOps engine's git mirror and checkouts.
    pub gitops_cache: PathBuf,
    /// How often a rollout in progress is looked at (at least 50ms is used).
    pub rollout_poll: Duration,
    /// How long a live-content mismatch is retried before a rollout fails.
    pub verify_grace: Duration,
    pub upstream_health_addr: SocketAddr,
    /// Overrides the upstream configuration's wedged-after.
    pub wedged_after: Option<Duration>,
    /// Follow only the Fleets of this namespace; default: [`Self::namespace`].
    pub fleet_namespace: Option<String>,
    /// This cluster's name in the fleet (`--cluster`); default: the
    /// control plane's deployment name for the token.
    pub cluster: Option<String>,
    pub fs_helper_image: String,
    pub fs_helper_idle: Duration,
    /// Largest `exo fs cp` through the control plane, in file bytes.
    pub fs_max_bytes: u64,
    /// How often the leader audits tenant isolation (at least 1s is used).
    pub audit_interval: Duration,
    /// The health monitors' thresholds given as flags.
    pub monitors: Overrides,
    pub monitor_interval: Duration,
    /// How often the backup watch looks for stale backups and drills.
    pub backup_watch_interval: Duration,
    /// How often the circuit telemetry scrapes its targets, and each
    /// scrape's deadline.
    pub circuit_scrape_interval: Duration,
    pub circuit_scrape_timeout: Duration,
    /// One PromQL query's deadline (a wave's `prometheus` checks).
    pub analysis_query_timeout: Duration,
    /// What the signature checks read registries with (`--registry-config`).
    pub registry_credentials: crate::fleet::pin::Credentials,
    /// Incidents one agent may post per minute.
    pub incident_rate: u32,
    /// How long an incident is kept once routed to its lane.
    pub incident_retention: Duration,
}

/// Why the operator did not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("upstream configuration: {0}")]
    Upstream(#[source] crate::upstream::ConfigError),
    #[error("cannot serve the upstream /health on {addr}: {source}")]
    Health {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("no randomness for the check-in key: {0}")]
    Randomness(#[source] getrandom::Error),
    /// The runtime itself failed (a missing CRD, a port it cannot bind, …).
    #[error(transparent)]
    Stopped(#[from] RuntimeError),
}

/// A leader task that runs `task` until it returns or the term ends.
fn for_the_term<F, Fut>(task: F) -> LeaderTask
where
    F: Fn(Arc<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    Arc::new(move |ctx, stop: Stop| Box::pin(stop.until(task(ctx))))
}

/// Assembles the operator and runs it until a shutdown signal.
pub async fn run(client: kube::Client, cfg: Config) -> Result<(), Error> {
    let fleet_namespace = cfg
        .fleet_namespace
        .clone()
        .or_else(|| cfg.namespace.clone());
    // Leader-only background tasks: started when this replica gains the
    // Lease, stopped when it loses it.
    let mut leader_tasks: Vec<LeaderTask> = Vec::new();
    let fs_helper = crate::agentfs::helper::HelperOpts {
        image: cfg.fs_helper_image.clone(),
        idle: cfg.fs_helper_idle,
        ..crate::agentfs::helper::HelperOpts::default()
    };
    // Idle `exo fs` helper pods go; checked a few times per idle period.
    let reap_every =
        (cfg.fs_helper_idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let idle = cfg.fs_helper_idle;
    leader_tasks.push(for_the_term(move |ctx| {
        super::fs_reaper::run(ctx, idle, reap_every)
    }));
    // Volumes with `spec.backup`: backed up on schedule and on request.
    let backups = super::backups::task::BackupTaskConfig {
        helper: fs_helper.clone(),
        tick: Duration::from_secs(2),
        parallel: 2,
    };
    leader_tasks.push(for_the_term(move |ctx| {
        super::backups::task::run(ctx, backups.clone())
    }));
    // Upstream alerts (e.g. a live-content mismatch): clones of `alerts`
    // (an AlertSink) raise them from anywhere in the process; the upstream
    // connection drains `alert_queue` while connected. Unmanaged, nothing
    // drains it and the bounded buffer drops the oldest.
    let (alerts, alert_queue) = crate::alerts::channel(crate::alerts::DEFAULT_CAPACITY);
    // The circuit telemetry's read handle: its leader task publishes a
    // snapshot after each round of scrapes; clone it for any reader (the
    // analysis checks `circuitsOpen` and `fallbackRate`).
    let circuits = crate::circuits::Circuits::new();
    // The health monitors' readings, likewise, for the analysis' built-in
    // checks (`crashloops`, `restarts`, `silentAgents`).
    let board = crate::analysis::MonitorBoard::new();
    // Notifications: clones of `notifier` emit events and commit statuses
    // from the engine and the audit (never blocking them); the leader's
    // delivery task drains `notices` to the NotificationRules' providers.
    let (notifier, notices) = crate::notify::sink::channel(crate::notify::sink::DEFAULT_CAPACITY);
    let notify = super::notify::NotifyConfig::new(notices, fleet_namespace.clone());
    leader_tasks.push(for_the_term(move |ctx| {
        super::notify::run(ctx, notify.clone())
    }));
    // The upstream connection (AUTONOMIC_MANAGED=true): leader only.
    let upstream = crate::upstream::UpstreamConfig::from_env().map_err(|e| {
        error!(error = %e, "upstream configuration");
        Error::Upstream(e)
    })?;
    let managed = upstream.is_some();
    let cluster = crate::cluster::identity::ClusterName::new(cfg.cluster.clone());
    let engine = crate::rollout::engine::EngineConfig {
        cluster: cluster.clone(),
        fleet_view: upstream
            .as_ref()
            .map(crate::upstream::fleet_view::Access::of),
        cache_dir: cfg.gitops_cache.clone(),
        poll: cfg.rollout_poll.max(Duration::from_millis(50)),
        verify_grace: cfg.verify_grace,
        alerts: alerts.clone(),
        notifier: notifier.clone(),
        signals: crate::rollout::engine::SignalSources {
            monitors: board.clone(),
            circuits: circuits.clone(),
        },
        prometheus_timeout: cfg.analysis_query_timeout,
        registry_credentials: cfg.registry_credentials.clone(),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        crate::rollout::engine::run(ctx, engine.clone())
    }));
    let audit = crate::audit::schedule::AuditConfig {
        interval: cfg.audit_interval.max(Duration::from_secs(1)),
        alerts: alerts.clone(),
        notifier: notifier.clone(),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        crate::audit::schedule::run(ctx, audit.clone())
    }));
    // Beside the backup task: the backups' staleness and drill alerts
    // (upstream only when managed), Events and gauges, looked at often
    // enough that a test's `every: 10s` sees them within seconds.
    let backup_watch = super::backups::watch::WatchConfig {
        interval: cfg.backup_watch_interval,
        alerts: managed.then(|| alerts.clone()),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        super::backups::watch::run(ctx, backup_watch.clone())
    }));
    // Tenant lifecycle sagas; the key actuator's Secret is read from the
    // operator's own namespace (the Lease's). Managed, they register each
    // tenant (and its support lane) with the control plane through the
    // upstream connection, which hands back the acks.
    let registrations = crate::upstream::registrations::Registrations::new();
    let incidents = crate::upstream::registrations::Incidents::new();
    let tenants = crate::tenant::engine::TenantConfig {
        poll: cfg.rollout_poll.max(Duration::from_millis(50)),
        retry: Duration::from_secs(5),
        operator_namespace: cfg.lease_namespace.clone(),
        fleet_namespace: fleet_namespace.clone(),
        registrations: managed.then(|| registrations.clone()),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        crate::tenant::engine::run(ctx, tenants.clone())
    }));
    // The one upstream /health server of the process, on every replica:
    // the liveness probe targets it (deploy/operator.yaml). Unmanaged it
    // always answers 200; a port it cannot bind is then only a warning,
    // since nothing else depends on it.
    let health = managed.then(crate::upstream::health_handle);
    let addr = cfg.upstream_health_addr;
    if let Err(e) = crate::upstream::health::serve(addr, health.clone()).await {
        if managed {
            error!(%addr, error = %e, "cannot serve the upstream /health");
            return Err(Error::Health { addr, source: e });
        }
        warn!(%addr, error = %e, "cannot serve the upstream /health");
    }
    match (upstream, health) {
        (Some(mut up), Some(health)) => {
            up.namespace = cfg.namespace.clone();
            up.fs_helper = fs_helper.clone();
            up.fs_max_bytes = cfg.fs_max_bytes;
            up.registrations = registrations;
            up.cluster_name = cluster.clone();
            up.incidents = incidents.clone();
            // Incidents agents posted go to their tenants' support lanes.
            let dispatch = super::dispatch::DispatchConfig {
                home: cfg.lease_namespace.clone(),
                outbox: incidents,
                updates: up.incident_updates.clone(),
                retention: cfg.incident_retention,
            };
            leader_tasks.push(for_the_term(move |ctx| {
                super::dispatch::run(ctx, dispatch.clone())
            }));
            // Its dispatcher records what support does: it takes
            // `incident_update`s.
            up.capabilities
                .push(crate::wire::CAP_INCIDENT_UPDATES.to_owned());
            up.wedged_after = cfg.wedged_after.unwrap_or(up.wedged_after);
            // The connection and its monitor (metrics, Events, the
            // wedged-upstream alert). The queue outlives a lost Lease:
            // alerts raised meanwhile wait for the next term's connection.
            let target =
                super::upstream_monitor::event_target(&cfg.lease_name, &cfg.lease_namespace);
            leader_tasks.push(super::upstream_monitor::leader_task(
                up,
                health,
                alert_queue,
                alerts.clone(),
                target,
            ));
            info!("managed: the leader connects upstream");
        }
        _ => info!("unmanaged: no upstream connection (AUTONOMIC_MANAGED is not true)"),
    }
    // Health monitors (leader only); check-ins are taken by every replica's
    // HTTP server and written to the Agent at most once per quarter of the
    // `silent` threshold the flag (or default) sets.
    let silent_after = cfg.monitors.silent_after.unwrap_or_else(|| {
        crate::duration::parse(&crate::crd::Monitors::default().silent.after)
            .unwrap_or(Duration::from_secs(900))
    });
    let checkins = match super::monitor::checkin::Checkins::new(
        super::monitor::checkin::write_interval(silent_after),
    ) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            error!(error = %e, "no randomness for the check-in key");
            return Err(Error::Randomness(e));
        }
    };
    let monitors = super::monitor::task::MonitorConfig {
        flags: cfg.monitors.clone(),
        interval: cfg.monitor_interval,
        // Alerts go upstream only from a managed installation.
        alerts: managed.then(|| alerts.clone()),
        checkins: checkins.clone(),
        board: board.clone(),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        super::monitor::task::run(ctx, monitors.clone())
    }));
    // Circuit telemetry (leader only): the model gateway's and the
    // broker's metrics, their alerts upstream when managed, and the shared
    // snapshot in `circuits` (made above).
    let circuit_task = super::circuits::CircuitConfig {
        interval: cfg.circuit_scrape_interval,
        timeout: cfg.circuit_scrape_timeout,
        namespace: cfg.namespace.clone(),
        alerts: managed.then(|| alerts.clone()),
        circuits: circuits.clone(),
    };
    leader_tasks.push(for_the_term(move |ctx| {
        super::circuits::run(ctx, circuit_task.clone())
    }));
    let operator = OperatorConfig {
        namespace: cfg.namespace.clone(),
        // The Tenants the engine drives: the upstream streams the same.
        fleet_namespace,
        metrics_addr: cfg.metrics_addr,
        leader: LeaderConfig::with_duration(
            cfg.lease_name.clone(),
            cfg.lease_namespace.clone(),
            cfg.identity.clone(),
            cfg.lease_duration.max(Duration::from_secs(2)),
        ),
        concurrency: cfg.concurrency,
        leader_tasks,
        checkins,
        incidents: Arc::new(super::http::incidents::Intake::new(
            cfg.lease_namespace.clone(),
            cfg.incident_rate,
        )),
    };
    let stop_rx = crate::shutdown::watch();
    let stopped = super::run(client, operator, stop_rx).await;
    let (undelivered, dropped) = (alerts.pending(), alerts.dropped());
    if undelivered > 0 || dropped > 0 {
        warn!(undelivered, dropped, "upstream alerts not delivered");
    }
    let (undelivered, dropped) = (notifier.pending(), notifier.dropped());
    if undelivered > 0 || dropped > 0 {
        warn!(undelivered, dropped, "notifications not delivered");
    }
    stopped.map_err(|e| {
        error!(error = %e, "operator stopped");
        Error::Stopped(e)
    })
}
