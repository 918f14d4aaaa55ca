//! `exo operator connect`: run only the upstream connection, as the
//! operator runtime will on its leader. Configuration comes from the
//! environment (`AUTONOMIC_MANAGED`, `AUTONOMIC_BASE_URL`,
//! `AUTONOMIC_AUTH_TOKEN` or `AUTONOMIC_AUTH_TOKEN_FILE`); flags tune timings (tests shorten them).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::cli::control_plane::parse_duration;
use crate::cli::exit;
use crate::upstream::{self, UpstreamConfig};

#[derive(Debug, Args)]
pub struct ConnectArgs {
    #[command(flatten)]
    pub log: crate::cli::logging::LogArgs,
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// Watch one namespace only (default: all namespaces).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Serve `GET /health` (connection state as JSON) on this address.
    #[arg(long)]
    pub health_listen: Option<SocketAddr>,
    #[arg(long, value_parser = parse_duration)]
    pub heartbeat_interval: Option<Duration>,
    #[arg(long, value_parser = parse_duration)]
    pub snapshot_interval: Option<Duration>,
    #[arg(long, value_parser = parse_duration)]
    pub backoff_base: Option<Duration>,
    #[arg(long, value_parser = parse_duration)]
    pub backoff_max: Option<Duration>,
    /// After losing an established connection, the first redial waits a
    /// random time up to this (capped by --backoff-max).
    #[arg(long, value_parser = parse_duration)]
    pub reconnect_spread: Option<Duration>,
    #[arg(long, value_parser = parse_duration)]
    pub healthy_after: Option<Duration>,
    /// Wait after a refusal that will repeat (401, revoked, version, evicted).
    #[arg(long, value_parser = parse_duration)]
    pub fatal_retry: Option<Duration>,
    #[arg(long, value_parser = parse_duration)]
    pub read_timeout: Option<Duration>,
    /// Connected with nothing received for longer than this: /health
    /// answers 503 (default 90s; env AUTONOMIC_WEDGED_AFTER).
    #[arg(long, value_parser = parse_duration)]
    pub wedged_after: Option<Duration>,
    /// Most resources per snapshot chunk.
    #[arg(long)]
    pub chunk_max_resources: Option<usize>,
    /// How often a connected operator re-reads AUTONOMIC_AUTH_TOKEN_FILE
    /// for a rotated token.
    #[arg(long, value_parser = parse_duration)]
    pub token_reload_interval: Option<Duration>,
    /// Label selector of the Pods streamed.
    #[arg(long)]
    pub pod_selector: Option<String>,
    /// Raise one `warning` alert with reason `TestAlert` at start, to check
    /// that alerts reach the control plane.
    #[arg(long)]
    pub send_test_alert: bool,
}

fn apply(cfg: &mut UpstreamConfig, a: &ConnectArgs) {
    cfg.namespace = a.namespace.clone();
    let set = |d: &mut Duration, v: Option<Duration>| {
        if let Some(v) = v {
            *d = v;
        }
    };
    set(&mut cfg.heartbeat_interval, a.heartbeat_interval);
    set(&mut cfg.snapshot_interval, a.snapshot_interval);
    set(&mut cfg.backoff_base, a.backoff_base);
    set(&mut cfg.backoff_max, a.backoff_max);
    set(&mut cfg.healthy_after, a.healthy_after);
    set(&mut cfg.reconnect_spread, a.reconnect_spread);
    set(&mut cfg.fatal_retry, a.fatal_retry);
    set(&mut cfg.read_timeout, a.read_timeout);
    set(&mut cfg.wedged_after, a.wedged_after);
    set(&mut cfg.token_reload_interval, a.token_reload_interval);
    cfg.token_reload_interval = cfg.token_reload_interval.max(Duration::from_millis(10));
    if let Some(n) = a.chunk_max_resources {
        cfg.chunk_max_resources = n;
    }
    if let Some(s) = &a.pod_selector {
        cfg.pod_selector = s.clone();
    }
}

pub fn run(args: ConnectArgs) -> u8 {
    crate::cli::logging::init(args.log.log_format);
    let mut cfg = match UpstreamConfig::from_env() {
        Ok(Some(cfg)) => cfg,
        Ok(None) => {
            eprintln!(
                "exo operator connect: unmanaged (AUTONOMIC_MANAGED is not true); nothing to do"
            );
            return exit::OK;
        }
        Err(e) => {
            eprintln!("exo operator connect: {e}");
            return exit::UNUSABLE;
        }
    };
    apply(&mut cfg, &args);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo operator connect: tokio runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    let result: Result<(), String> = rt.block_on(async move {
        let shutdown = crate::shutdown::requested();
        let client = args.kube.client().await.map_err(|e| e.to_string())?;
        let health = upstream::health_handle();
        if let Some(addr) = args.health_listen {
            let bound = upstream::health::serve(addr, Some(health.clone()))
                .await
                .map_err(|e| format!("health listen {addr}: {e}"))?;
            println!("health on http://{bound}/health");
        }
        // Nothing in this process raises alerts but the test alert; the
        // sink is here so the connection runs as in the operator.
        let (alerts, alert_queue) = crate::alerts::channel(crate::alerts::DEFAULT_CAPACITY);
        if args.send_test_alert {
            alerts.send(upstream::Alert::new(
                upstream::Severity::Warning,
                "TestAlert",
                cfg.namespace.clone().unwrap_or_default(),
                "Operator/exo",
                "test alert from exo operator connect --send-test-alert",
            ));
        }
        upstream::run_with_alerts(client, cfg, health, alert_queue, shutdown)
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("exo operator connect: {e}");
            exit::UNUSABLE
        }
    }
}
