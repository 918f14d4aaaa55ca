//! `exo operator run`: the in-cluster operator (also runs locally with
//! only a KUBECONFIG against a cluster that has the CRDs).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Subcommand};
use tracing::{error, info, warn};

use crate::cli::exit;
use crate::operator::leader::LeaderConfig;
use crate::operator::runtime::LeaderTask;
use crate::operator::{self, OperatorConfig};

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Run the operator: reconcile Agents, Tools and AgentFS volumes.
    Run(RunArgs),
    /// Run only the upstream connection (watch and stream to the control plane).
    Connect(crate::cli::operator_connect::ConnectArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, short = 'n', env = "EXO_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "EXO_METRICS_ADDR")]
    pub metrics_addr: SocketAddr,
    /// Name of the coordination.k8s.io Lease used for leader election.
    #[arg(long, default_value = "exo-operator", env = "EXO_LEASE_NAME")]
    pub lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, then --namespace,
    /// then `default`).
    #[arg(long, env = "EXO_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease (default: $POD_NAME, then
    /// host name and process id).
    #[arg(long, env = "EXO_IDENTITY")]
    pub identity: Option<String>,
    /// How long a Lease stays valid without renewal, in seconds.
    #[arg(long, default_value_t = 15, env = "EXO_LEASE_DURATION")]
    pub lease_duration: u64,
    /// Reconciles running at once, per controller.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    #[command(flatten)]
    pub log: crate::cli::logging::LogArgs,
    /// Where the GitOps engine keeps its git mirror and checkouts. The
    /// engine follows every `Fleet` resource; with none it does nothing.
    #[arg(long, default_value = "/tmp/exo-gitops", env = "EXO_GITOPS_CACHE")]
    pub gitops_cache: std::path::PathBuf,
    /// How often a rollout in progress is looked at again, in milliseconds.
    #[arg(long, default_value_t = 500, env = "EXO_ROLLOUT_POLL_MS")]
    pub rollout_poll_ms: u64,
    /// How long a live-content mismatch is retried before a rollout fails,
    /// in seconds (volumes can lag a pod's start).
    #[arg(long, default_value_t = 30, env = "EXO_VERIFY_GRACE")]
    pub verify_grace: u64,
    /// Where the upstream connection's /health is served (connection state
    /// and last-event age; 503 while wedged). Unmanaged it answers 200
    /// `{"managed": false}`, so one liveness probe fits both.
    #[arg(long, default_value = "0.0.0.0:8081", env = "EXO_UPSTREAM_HEALTH_ADDR")]
    pub upstream_health_addr: SocketAddr,
    /// Connected with nothing received from the control plane for longer
    /// than this: the upstream /health answers 503 (default 90s; env
    /// AUTONOMIC_WEDGED_AFTER).
    #[arg(long, value_parser = crate::duration::parse)]
    pub wedged_after: Option<Duration>,
    /// Follow only the Fleet resources in this namespace (default: all).
    #[arg(long, env = "EXO_FLEET_NAMESPACE")]
    pub fleet_namespace: Option<String>,
    /// Image of the short-lived pod `exo fs` starts when no running pod
    /// mounts a volume (needs sh, tar, df, find, sha256sum).
    #[arg(long, default_value = "busybox:1.37", env = "EXO_FS_HELPER_IMAGE")]
    pub fs_helper_image: String,
    /// How long an unused `exo fs` helper pod is kept (e.g. 5m).
    #[arg(long, default_value = "5m", env = "EXO_FS_HELPER_IDLE", value_parser = crate::duration::parse)]
    pub fs_helper_idle: Duration,
    /// How often the leader audits tenant isolation (placement, network,
    /// credentials, mounts, immutability), e.g. 5m.
    #[arg(long, default_value = "5m", env = "EXO_AUDIT_INTERVAL", value_parser = crate::duration::parse)]
    pub audit_interval: Duration,
    /// Largest `exo fs cp` accepted through the control plane (file bytes).
    #[arg(long, default_value = "10Gi", env = "EXO_FS_MAX_SIZE")]
    pub fs_max_size: String,
    /// `crashloop` monitor: this many restarts of an Agent's or Tool's pods
    /// within the window fire it. Overrides the Fleet's
    /// `spec.monitors.crashloop.restarts` (default 3).
    #[arg(long, env = "EXO_MONITOR_CRASHLOOP_RESTARTS")]
    pub monitor_crashloop_restarts: Option<u32>,
    /// `crashloop` monitor window (e.g. 10m); it clears after a whole window
    /// without a restart. Overrides `spec.monitors.crashloop.window`.
    #[arg(long, env = "EXO_MONITOR_CRASHLOOP_WINDOW", value_parser = crate::duration::parse)]
    pub monitor_crashloop_window: Option<Duration>,
    /// `restarts` monitor: this many pod restarts in one namespace within
    /// the window fire it. Overrides `spec.monitors.restarts.restarts`
    /// (default 10).
    #[arg(long, env = "EXO_MONITOR_RESTARTS")]
    pub monitor_restarts: Option<u32>,
    /// `restarts` monitor window (e.g. 1h). Overrides
    /// `spec.monitors.restarts.window`.
    #[arg(long, env = "EXO_MONITOR_RESTARTS_WINDOW", value_parser = crate::duration::parse)]
    pub monitor_restarts_window: Option<Duration>,
    /// `silent` monitor: an Active Agent without a check-in for this long
    /// (e.g. 15m) is silent. Overrides `spec.monitors.silent.after`.
    #[arg(long, env = "EXO_MONITOR_SILENT_AFTER", value_parser = crate::duration::parse)]
    pub monitor_silent_after: Option<Duration>,
    /// How often the health monitors look (leader only).
    #[arg(long, default_value = "15s", env = "EXO_MONITOR_INTERVAL", value_parser = crate::duration::parse)]
    pub monitor_interval: Duration,
}

pub fn run(cmd: OperatorCommand) -> u8 {
    match cmd {
        OperatorCommand::Run(args) => run_operator(args),
        OperatorCommand::Connect(args) => crate::cli::operator_connect::run(args),
    }
}

fn default_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME") {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "exo".to_owned());
    format!("{host}-{}", std::process::id())
}

fn run_operator(args: RunArgs) -> u8 {
    crate::cli::logging::init(args.log.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo operator: cannot start the async runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    rt.block_on(async move {
        let identity = args.identity.clone().unwrap_or_else(default_identity);
        if identity.is_empty() || !identity.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            eprintln!(
                "exo operator: --identity {identity:?}: want visible ASCII (it names this replica in the Lease and in every request's User-Agent)"
            );
            return exit::UNUSABLE;
        }
        // Every request names this replica, so the apiserver's audit log
        // tells the replicas' writes apart.
        let agent = crate::cli::kube_args::user_agent("exo-operator", Some(&identity));
        let client = match args.kube.client_as(&agent).await {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "no usable Kubernetes configuration");
                eprintln!("exo operator: {e}");
                return exit::UNUSABLE;
            }
        };
        let lease_namespace = args
            .lease_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        info!(%identity, lease = %args.lease_name, %lease_namespace, namespace = args.namespace.as_deref().unwrap_or("*"), "starting the operator");
        // Leader-only background tasks. The upstream WebSocket connector
        // (src/upstream/) plugs in here: push a LeaderTask that runs it; it
        // is started when this replica gains the Lease and stopped when it
        // loses it.
        let mut leader_tasks: Vec<LeaderTask> = Vec::new();
        let fs_max_bytes = match crate::operator::quantity::to_bytes(&args.fs_max_size) {
            Ok(b) => u64::try_from(b).unwrap_or(u64::MAX),
            Err(e) => {
                error!(error = %e, "--fs-max-size");
                return exit::UNUSABLE;
            }
        };
        let fs_helper = crate::agentfs::helper::HelperOpts {
            image: args.fs_helper_image.clone(),
            idle: args.fs_helper_idle,
            ..crate::agentfs::helper::HelperOpts::default()
        };
        // Idle `exo fs` helper pods go; checked a few times per idle period.
        let reap_every = (args.fs_helper_idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
        let idle = args.fs_helper_idle;
        leader_tasks.push(std::sync::Arc::new(move |ctx, stop: crate::operator::runtime::Stop| {
            Box::pin(stop.until(crate::operator::fs_reaper::run(ctx, idle, reap_every)))
        }));
        // Upstream alerts (e.g. a live-content mismatch): clones of `alerts`
        // (an AlertSink) raise them from anywhere in the process; the
        // upstream connection drains `alert_queue` while connected.
        // Unmanaged, nothing drains it and the bounded buffer drops the
        // oldest.
        let (alerts, alert_queue) =
            crate::upstream::alerts::channel(crate::upstream::alerts::DEFAULT_CAPACITY);
        let engine = crate::rollout::engine::EngineConfig {
            cache_dir: args.gitops_cache.clone(),
            poll: Duration::from_millis(args.rollout_poll_ms.max(50)),
            verify_grace: Duration::from_secs(args.verify_grace),
            // A namespace-scoped operator follows only its own namespace's Fleets.
            fleet_namespace: args.fleet_namespace.clone().or_else(|| args.namespace.clone()),
            alerts: alerts.clone(),
        };
        leader_tasks.push(std::sync::Arc::new(move |ctx, stop: crate::operator::runtime::Stop| {
            Box::pin(stop.until(crate::rollout::engine::run(ctx, engine.clone())))
        }));
        let audit = crate::audit::schedule::AuditConfig {
            interval: args.audit_interval.max(Duration::from_secs(1)),
            fleet_namespace: args.fleet_namespace.clone().or_else(|| args.namespace.clone()),
            alerts: alerts.clone(),
        };
        leader_tasks.push(std::sync::Arc::new(move |ctx, stop: crate::operator::runtime::Stop| {
            Box::pin(stop.until(crate::audit::schedule::run(ctx, audit.clone())))
        }));
        // The upstream connection (AUTONOMIC_MANAGED=true): leader only.
        let upstream = match crate::upstream::UpstreamConfig::from_env() {
            Ok(u) => u,
            Err(e) => {
                error!(error = %e, "upstream configuration");
                return exit::UNUSABLE;
            }
        };
        let managed = upstream.is_some();
        // The one upstream /health server of the process, on every
        // replica: the liveness probe targets it (deploy/operator.yaml).
        // Unmanaged it always answers 200; a port it cannot bind is then
        // only a warning, since nothing else depends on it.
        let health = managed.then(crate::upstream::health_handle);
        if let Err(e) = crate::upstream::health::serve(args.upstream_health_addr, health.clone()).await {
            if managed {
                error!(addr = %args.upstream_health_addr, error = %e, "cannot serve the upstream /health");
                return exit::UNUSABLE;
            }
            warn!(addr = %args.upstream_health_addr, error = %e, "cannot serve the upstream /health");
        }
        match (upstream, health) {
            (Some(mut up), Some(health)) => {
                up.namespace = args.namespace.clone();
                up.fs_helper = fs_helper.clone();
                up.fs_max_bytes = fs_max_bytes;
                up.wedged_after = args.wedged_after.unwrap_or(up.wedged_after);
                // The connection and its monitor (metrics, Events, the
                // wedged-upstream alert). The queue outlives a lost Lease:
                // alerts raised meanwhile wait for the next term's connection.
                let target = crate::operator::upstream_monitor::event_target(&args.lease_name, &lease_namespace);
                leader_tasks.push(crate::operator::upstream_monitor::leader_task(up, health, alert_queue, alerts.clone(), target));
                info!("managed: the leader connects upstream");
            }
            _ => info!("unmanaged: no upstream connection (AUTONOMIC_MANAGED is not true)"),
        }
        // Health monitors (leader only); check-ins are taken by every
        // replica's HTTP server and written to the Agent at most once per
        // quarter of the `silent` threshold the flag (or default) sets.
        let silent_after = args.monitor_silent_after.unwrap_or_else(|| {
            crate::duration::parse(&crate::crd::Monitors::default().silent.after)
                .unwrap_or(Duration::from_secs(900))
        });
        let checkins = match crate::operator::monitor::checkin::Checkins::new(
            crate::operator::monitor::checkin::write_interval(silent_after),
        ) {
            Ok(c) => std::sync::Arc::new(c),
            Err(e) => {
                error!(error = %e, "no randomness for the check-in key");
                return exit::UNUSABLE;
            }
        };
        let monitors = crate::operator::monitor::task::MonitorConfig {
            flags: crate::operator::monitor::thresholds::Overrides {
                crashloop_restarts: args.monitor_crashloop_restarts,
                crashloop_window: args.monitor_crashloop_window,
                tenant_restarts: args.monitor_restarts,
                tenant_window: args.monitor_restarts_window,
                silent_after: args.monitor_silent_after,
            },
            interval: args.monitor_interval,
            fleet_namespace: args.fleet_namespace.clone().or_else(|| args.namespace.clone()),
            // Alerts go upstream only from a managed installation.
            alerts: managed.then(|| alerts.clone()),
            checkins: checkins.clone(),
        };
        leader_tasks.push(std::sync::Arc::new(move |ctx, stop: crate::operator::runtime::Stop| {
            Box::pin(stop.until(crate::operator::monitor::task::run(ctx, monitors.clone())))
        }));
        let cfg = OperatorConfig {
            namespace: args.namespace.clone(),
            metrics_addr: args.metrics_addr,
            leader: LeaderConfig::with_duration(
                args.lease_name.clone(),
                lease_namespace,
                identity,
                Duration::from_secs(args.lease_duration.max(2)),
            ),
            concurrency: args.concurrency,
            leader_tasks,
            checkins,
        };
        let stop_rx = crate::shutdown::watch();
        let stopped = operator::run(client, cfg, stop_rx).await;
        let (undelivered, dropped) = (alerts.pending(), alerts.dropped());
        if undelivered > 0 || dropped > 0 {
            warn!(undelivered, dropped, "upstream alerts not delivered");
        }
        match stopped {
            Ok(()) => exit::OK,
            Err(e) => {
                error!(error = %e, "operator stopped");
                eprintln!("exo operator: {e}");
                exit::UNUSABLE
            }
        }
    })
}
