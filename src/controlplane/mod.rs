//! The reference control plane: the server side of the upstream protocol
//! (`docs/protocol.md`), deployment and token administration, live state
//! per deployment, an HTTP JSON API and a status page.
//!
//! In one-way layers, each naming only those below it (`tests/layers`):
//! `model` (the row and view types), `resources`, `session` and `tls` at
//! the bottom; `bus` (the change broadcast); `store` (one facade over the
//! SQLite and PostgreSQL backends); the domain: `live` (registration,
//! eviction, health), `view` (what a deployment looks like, and its
//! queries), `fleet` (the fleet view across clusters), `replica`,
//! `disconnect` (the control plane's own alert for a lost operator), `admin` (admin authentication) and `relay` (open attach
//! and copy sessions); at the top `http` (the API, the events stream, the
//! user sockets, authentication, the hop), `ws` (the operators' endpoint)
//! and `dashboard` (pages, assets, login). This file wires them: `App`,
//! the router and `serve`.

pub mod admin;
pub mod bus;
pub mod dashboard;
pub mod disconnect;
pub mod fleet;
pub mod http;
pub mod live;
pub mod model;
pub mod relay;
pub mod replica;
pub mod resources;
pub mod session;
pub mod store;
#[cfg(test)]
pub mod test_store;
pub mod tls;
pub mod view;
pub mod ws;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

pub use live::Live;
pub use model::{Health, Thresholds};
pub use store::Store;

#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serve: {0}")]
    Serve(#[source] std::io::Error),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("joining the replica set: {0}")]
    Replica(#[from] replica::ReplicaError),
}

/// How long a stopping server waits for its operator sockets to close.
/// Under the usual 30 s Pod grace period, above the 1 s close handshake.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

/// Server settings; the defaults are the product's (90 s degraded, 5 min
/// offline), tests shorten them.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub degraded_after: Duration,
    pub offline_after: Duration,
    /// WebSocket pings detect a dead socket well before `degraded_after`.
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
    pub hello_timeout: Duration,
    /// Told to clients in `welcome`.
    pub heartbeat_interval: Duration,
    pub token_check_interval: Duration,
    pub max_frame_bytes: usize,
    /// The `--admin-token-file` token, if any (admin tokens in the database
    /// are looked up per request).
    pub admin: admin::AdminAuth,
    /// Serve HTTPS (and so `wss://`) with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// How long a dashboard session lasts after its login.
    pub session_ttl: Duration,
    /// This server as one of N replicas (only with a PostgreSQL store).
    pub replica: Option<ReplicaConfig>,
}

/// `serve --replica-id --advertise-url --replica-lease`.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    pub id: String,
    /// Where the other replicas reach this one (plain HTTP); `None`: the
    /// bound listen address.
    pub advertise_url: Option<String>,
    pub lease: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8700)),
            degraded_after: Duration::from_secs(90),
            offline_after: Duration::from_secs(300),
            ping_interval: Duration::from_secs(15),
            pong_timeout: Duration::from_secs(30),
            hello_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(15),
            token_check_interval: Duration::from_secs(1),
            max_frame_bytes: crate::wire::DEFAULT_MAX_FRAME_BYTES,
            admin: admin::AdminAuth::default(),
            tls: None,
            session_ttl: Duration::from_secs(12 * 3600),
            replica: None,
        }
    }
}

/// Counters shown at `/api/v1/stats`.
#[derive(Debug, Default)]
pub struct Stats {
    pub auth_rejected: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub frames_rejected: AtomicU64,
    pub closed_by_server: AtomicU64,
    /// `heartbeat` frames received (benchmarks compare it with the count
    /// clients sent).
    pub heartbeats_received: AtomicU64,
    /// Admin API requests refused for a missing or wrong admin token.
    pub admin_rejected: AtomicU64,
}

impl Stats {
    pub fn to_json(&self) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        serde_json::json!({
            "auth_rejected": g(&self.auth_rejected),
            "connections_accepted": g(&self.connections_accepted),
            "frames_rejected": g(&self.frames_rejected),
            "closed_by_server": g(&self.closed_by_server),
            "heartbeats_received": g(&self.heartbeats_received),
            "admin_rejected": g(&self.admin_rejected),
        })
    }
}

/// Shared server state.
#[derive(Debug)]
pub struct App {
    pub cfg: ServeConfig,
    pub store: Store,
    pub live: Live,
    pub stats: Stats,
    pub attaches: relay::Attaches,
    pub transfers: relay::Transfers,
    pub admin: admin::AdminAuth,
    /// Serialises the disconnect alert's decisions.
    pub disconnects: disconnect::DisconnectAlerts,
    /// Flips to true when the server shuts down; sockets close with 1001.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Operator sockets not yet closed and recorded; `serve` waits for 0.
    pub open_sockets: tokio::sync::watch::Sender<usize>,
    /// Every change, for the dashboard's events stream (shared with the
    /// store and the live state).
    pub bus: bus::Bus,
    /// Logged-in dashboard browsers.
    pub sessions: session::Sessions,
    /// This server's place among N replicas (PostgreSQL store only).
    pub replica: Option<Arc<replica::Replica>>,
}

pub fn router(app: Arc<App>) -> Router {
    // Everything but the liveness probe and the operators' endpoint (which
    // takes deployment tokens) needs an admin token once one exists.
    let admin = Router::new()
        .route("/", get(dashboard::overview))
        .route("/fleet/waves", get(dashboard::fleet_waves))
        .route("/deployments/{name}", get(dashboard::deployment))
        .route("/deployments/{name}/{page}", get(dashboard::subpage))
        .route("/logout", post(dashboard::logout))
        .route("/status", get(dashboard::status::page))
        .route("/lanes/{lane}", get(dashboard::lane))
        .route("/api/v1/lanes", get(http::lanes::list))
        .route("/api/v1/lanes/{lane}", get(http::lanes::get))
        .route(
            "/api/v1/lanes/{lane}/incidents",
            get(http::lanes::incidents),
        )
        .route(
            "/api/v1/lanes/{lane}/incidents/{id}",
            get(http::lanes::incident),
        )
        .route(
            "/api/v1/lanes/{lane}/incidents/{id}/{verb}",
            post(http::lanes::act_on),
        )
        .route(
            "/api/v1/lanes/{lane}/tenants/{deployment}/{tenant}",
            axum::routing::put(http::lanes::assign),
        )
        .route("/api/v1/lanes/{lane}/events", get(http::lanes::events))
        .route("/api/v1/events", get(http::sse::events))
        .route("/api/v1/stats", get(http::api::stats))
        .route(
            crate::wire::fleet::FLEET_ROLLOUTS_PATH,
            get(http::fleet::rollouts),
        )
        .route("/api/v1/deployments", get(http::api::list))
        .route("/api/v1/deployments/{name}", get(http::api::get))
        .route(
            "/api/v1/deployments/{name}/resources",
            get(http::api::resources),
        )
        .route("/api/v1/deployments/{name}/audit", get(http::api::audit))
        .route("/api/v1/deployments/{name}/alerts", get(http::api::alerts))
        .route(
            "/api/v1/deployments/{name}/alerts/active",
            get(http::api::active_alerts),
        )
        .route(
            "/api/v1/deployments/{name}/tenants",
            get(http::api::tenants),
        )
        .route(
            "/api/v1/deployments/{name}/incidents",
            get(http::api::incidents),
        )
        .route(
            "/api/v1/deployments/{name}/commands",
            post(http::api::command),
        )
        .route(
            "/api/v1/deployments/{name}/attach",
            get(http::attach::attach),
        )
        .route("/api/v1/deployments/{name}/fs", get(http::fs::fs))
        .route(
            "/api/v1/deployments/{name}/pod-control",
            post(http::api::pod_control),
        )
        // Layers run outside in: authentication first, then the hop.
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            http::hop::route,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            http::authn::require,
        ));
    Router::new()
        .route("/healthz", get(http::api::healthz))
        .route(crate::wire::CONNECT_PATH, get(ws::connect))
        .route("/login", get(dashboard::login_form).post(dashboard::login))
        .route("/assets/{*path}", get(dashboard::assets))
        .merge(admin)
        .layer(axum::middleware::from_fn(dashboard::security_headers))
        .with_state(app)
}

/// Raises the soft open-file limit to the hard one: each operator
/// connection is a file descriptor, and the usual soft default (1024) would
/// cap a control plane at about a thousand deployments. Returns `(from, to)`
/// when it changed.
pub fn raise_fd_limit() -> Option<(u64, u64)> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let (Some(cur), max) = (lim.current, lim.maximum) else {
        return None; // already unlimited
    };
    // An unlimited hard limit is not a valid soft one for fds; stay bounded.
    let want = max.unwrap_or(1 << 20).min(1 << 20);
    if want <= cur {
        return None;
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: max,
        },
    )
    .ok()
    .map(|()| (cur, want))
}

/// Binds the listener; `serve` runs it. Split so a caller can print the
/// bound address (port 0) before serving.
pub async fn bind(cfg: &ServeConfig) -> Result<tokio::net::TcpListener, ControlPlaneError> {
    tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ControlPlaneError::Listen {
            addr: cfg.listen,
            source,
        })
}

fn listener_addr(l: &tokio::net::TcpListener) -> String {
    l.local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "127.0.0.1:8700".into())
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cfg: ServeConfig,
    store: Store,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ControlPlaneError> {
    let admin = cfg.admin.clone();
    let tls = cfg.tls.clone();
    let bus = store.bus().clone();
    let replica = match (store.pg(), &cfg.replica) {
        (Some(pg), rc) => {
            let rc = rc.clone().unwrap_or_else(|| ReplicaConfig {
                id: format!("rep_{}", &crate::wire::random_id()[..12]),
                advertise_url: None,
                lease: replica::DEFAULT_LEASE,
            });
            let url = rc
                .advertise_url
                .unwrap_or_else(|| format!("http://{}", listener_addr(&listener)));
            Some(Arc::new(
                replica::Replica::join(pg.clone(), rc.id, url, rc.lease).await?,
            ))
        }
        (None, _) => None,
    };
    let app = Arc::new(App {
        live: Live::new(
            Thresholds {
                degraded_after: cfg.degraded_after,
                offline_after: cfg.offline_after,
            },
            bus.clone(),
        ),
        sessions: session::Sessions::new(cfg.session_ttl),
        bus,
        cfg,
        store,
        stats: Stats::default(),
        attaches: relay::Attaches::default(),
        transfers: relay::Transfers::default(),
        admin,
        disconnects: disconnect::DisconnectAlerts::default(),
        shutdown: tokio::sync::watch::Sender::new(false),
        open_sockets: tokio::sync::watch::Sender::new(0),
        replica: replica.clone(),
    });
    let replica_tasks = replica.as_ref().map(|r| {
        [
            tokio::spawn(replica::listen(r.clone(), app.clone())),
            tokio::spawn(replica::maintain(r.clone(), app.clone())),
        ]
    });
    let checker = tokio::spawn(ws::token_checker(app.clone()));
    let updates = tokio::spawn(ws::updates::relay(app.clone()));
    let offline_check = tokio::spawn(disconnect::watch(app.clone()));
    let health = tokio::spawn(view::watch_health(app.clone()));
    let app2 = app.clone();
    let mut open = app.open_sockets.subscribe();
    let shutdown = async move {
        shutdown.await;
        // Upgraded sockets outlive graceful shutdown unless told to close.
        app2.shutdown.send_replace(true);
    };
    let routes = router(app);
    let served = match tls {
        Some(tls) => {
            let listener =
                tls::TlsListener::new(listener, tls).map_err(ControlPlaneError::Serve)?;
            axum::serve(listener, routes)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => {
            axum::serve(listener, routes)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
    .map_err(ControlPlaneError::Serve);
    // Upgraded sockets are not the HTTP server's to wait for: each closes
    // with 1001, waits for the peer's close and writes its record; the
    // process exits only after that (or after the drain time).
    let drained = tokio::time::timeout(SHUTDOWN_DRAIN, async {
        let _ = open.wait_for(|n| *n == 0).await;
    })
    .await;
    if drained.is_err() {
        let left = *open.borrow();
        tracing::warn!(left, drain = ?SHUTDOWN_DRAIN, "operator sockets still open after the drain time");
    }
    checker.abort();
    updates.abort();
    offline_check.abort();
    health.abort();
    for t in replica_tasks.into_iter().flatten() {
        t.abort();
    }
    if let Some(r) = &replica {
        replica::leave(r).await;
    }
    served
}
