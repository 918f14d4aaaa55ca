//! `exo operator run`: the in-cluster operator (also runs locally with
//! only a KUBECONFIG against a cluster that has the CRDs). This module
//! parses the flags, builds the kube client that names this replica, and
//! hands the rest to [`crate::operator::assemble`].

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Subcommand};
use tracing::{error, info};

use crate::cli::exit;
use crate::operator::assemble::{self, Config};
use crate::operator::monitor::thresholds::Overrides;

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Run the operator: reconcile Agents, Tools and AgentFS volumes.
    /// (Both boxed: their many flags would make every `exo` command as
    /// large.)
    Run(Box<RunArgs>),
    /// Run only the upstream connection (watch and stream to the control plane).
    Connect(Box<crate::cli::operator_connect::ConnectArgs>),
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
    /// How often the leader looks for stale backups and drills (the
    /// `backup/*` alerts, Events and `exo_fs_backup_*` gauges).
    #[arg(long, default_value = "5s", env = "EXO_BACKUP_WATCH_INTERVAL", value_parser = crate::duration::parse)]
    pub backup_watch_interval: Duration,
    /// How often the leader scrapes the circuit telemetry of the Services
    /// labelled autonomic.sh/metrics (the model gateway's, the broker's).
    #[arg(long, default_value = "30s", env = "EXO_CIRCUIT_SCRAPE_INTERVAL", value_parser = positive_duration)]
    pub circuit_scrape_interval: Duration,
    /// One scrape's deadline, the answer's body included (at most the
    /// interval is used).
    #[arg(long, default_value = "10s", env = "EXO_CIRCUIT_SCRAPE_TIMEOUT", value_parser = positive_duration)]
    pub circuit_scrape_timeout: Duration,
    /// One PromQL query's deadline for a wave's `prometheus` checks (an
    /// answer later than this is an inconclusive measurement).
    #[arg(long, default_value = "10s", env = "EXO_ANALYSIS_QUERY_TIMEOUT", value_parser = positive_duration)]
    pub analysis_query_timeout: Duration,
    /// A docker config file (`config.json`, or a mounted
    /// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`) whose
    /// `auths` the saga's `signatures-verified` step reads image signatures
    /// with; without it, registries are asked anonymously.
    #[arg(long, env = "EXO_REGISTRY_CONFIG")]
    pub registry_config: Option<std::path::PathBuf>,
    /// This cluster's name among the fleet repository's `clusters/`: only
    /// the tenants placed on it are applied here. Default: the deployment
    /// name the control plane gives this operator's token. A fleet without
    /// `clusters/` runs every tenant on every cluster, whatever this says.
    #[arg(long, env = "EXO_CLUSTER", value_parser = cluster_name)]
    pub cluster: Option<String>,
    /// Incidents one agent may post per minute (`POST /v1/incidents`);
    /// a burst of a quarter of that is taken at once.
    #[arg(long, default_value_t = 60, env = "EXO_INCIDENT_RATE", value_parser = clap::value_parser!(u32).range(1..))]
    pub incident_rate: u32,
    /// How long an incident is kept in the cluster once the control plane
    /// has it (managed operators; unmanaged ones keep every incident).
    #[arg(long, default_value = "7d", env = "EXO_INCIDENT_RETENTION", value_parser = crate::duration::parse)]
    pub incident_retention: Duration,
}

/// Why a flag's duration is refused.
#[derive(Debug, thiserror::Error)]
enum FlagDurationError {
    #[error(transparent)]
    Syntax(#[from] crate::duration::DurationError),
    #[error("must be longer than 0")]
    Zero,
}

/// A duration longer than 0 (`0s` would scrape without pause).
fn positive_duration(text: &str) -> Result<Duration, FlagDurationError> {
    match crate::duration::parse(text)? {
        d if d.is_zero() => Err(FlagDurationError::Zero),
        d => Ok(d),
    }
}

/// A cluster name is a DNS label, as `clusters/<name>.yaml` and a
/// deployment name are.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a cluster name (a DNS label: lowercase letters, digits and '-', at most 63)")]
struct ClusterNameError(String);

fn cluster_name(text: &str) -> Result<String, ClusterNameError> {
    if crate::names::is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        Err(ClusterNameError(text.to_owned()))
    }
}

pub fn run(cmd: OperatorCommand) -> u8 {
    match cmd {
        OperatorCommand::Run(args) => run_operator(*args),
        OperatorCommand::Connect(args) => crate::cli::operator_connect::run(*args),
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
        let fs_max_bytes = match crate::quantity::to_bytes(&args.fs_max_size) {
            Ok(b) => u64::try_from(b).unwrap_or(u64::MAX),
            Err(e) => {
                error!(error = %e, "--fs-max-size");
                return exit::UNUSABLE;
            }
        };
        let registry_credentials = match &args.registry_config {
            None => crate::fleet::pin::Credentials::default(),
            Some(path) => match crate::fleet::pin::Credentials::from_file(path) {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %e, "--registry-config");
                    return exit::UNUSABLE;
                }
            },
        };
        let cfg = Config {
            namespace: args.namespace,
            metrics_addr: args.metrics_addr,
            lease_name: args.lease_name,
            lease_namespace,
            identity,
            lease_duration: Duration::from_secs(args.lease_duration),
            concurrency: args.concurrency,
            gitops_cache: args.gitops_cache,
            rollout_poll: Duration::from_millis(args.rollout_poll_ms),
            verify_grace: Duration::from_secs(args.verify_grace),
            upstream_health_addr: args.upstream_health_addr,
            wedged_after: args.wedged_after,
            fleet_namespace: args.fleet_namespace,
            cluster: args.cluster,
            fs_helper_image: args.fs_helper_image,
            fs_helper_idle: args.fs_helper_idle,
            fs_max_bytes,
            audit_interval: args.audit_interval,
            monitors: Overrides {
                crashloop_restarts: args.monitor_crashloop_restarts,
                crashloop_window: args.monitor_crashloop_window,
                tenant_restarts: args.monitor_restarts,
                tenant_window: args.monitor_restarts_window,
                silent_after: args.monitor_silent_after,
            },
            monitor_interval: args.monitor_interval,
            backup_watch_interval: args.backup_watch_interval,
            circuit_scrape_interval: args.circuit_scrape_interval,
            circuit_scrape_timeout: args.circuit_scrape_timeout,
            analysis_query_timeout: args.analysis_query_timeout,
            registry_credentials,
            incident_rate: args.incident_rate,
            incident_retention: args.incident_retention,
        };
        match assemble::run(client, cfg).await {
            Ok(()) => exit::OK,
            Err(assemble::Error::Stopped(e)) => {
                eprintln!("exo operator: {e}");
                exit::UNUSABLE
            }
            // Logged where it happened.
            Err(_) => exit::UNUSABLE,
        }
    })
}
