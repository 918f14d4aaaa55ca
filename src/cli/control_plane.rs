//! `exo control-plane`: run the reference control plane and administer its
//! deployments and tokens.
//!
//! A token is printed exactly once, to stdout, when it is created (by
//! `deployment create`, `token rotate` or `admin-token create`); nothing
//! else ever prints it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::cli::exit;
use crate::controlplane::{self, ServeConfig, Store};

#[derive(Debug, Args)]
pub struct ControlPlaneArgs {
    /// Where deployments, hashed tokens and audit live: the path of a SQLite
    /// file (one server), or a `postgres://user@host:port/db` URL, which N
    /// `serve` replicas share (docs/control-plane.md, "Replicas").
    #[arg(
        long,
        global = true,
        env = "EXO_CP_DB",
        default_value = "exo-control-plane.sqlite"
    )]
    pub db: String,
    #[command(subcommand)]
    pub command: ControlPlaneCommand,
}

#[derive(Debug, Subcommand)]
pub enum ControlPlaneCommand {
    /// Serve the WebSocket endpoint, the HTTP API and the status page.
    Serve(Box<ServeArgs>),
    /// Deployments: one per cluster installation.
    #[command(subcommand)]
    Deployment(DeploymentCommand),
    /// Deployment tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Admin tokens for the HTTP API and the status page.
    #[command(subcommand)]
    AdminToken(AdminTokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum AdminTokenCommand {
    /// Create an admin token and print it (once, on stdout). From then on
    /// the API and the status page need an admin token.
    Create {
        /// Limit the token to one support lane: its incidents on the API
        /// (`/api/v1/lanes/LANE`) and its dashboard page, nothing else.
        #[arg(long)]
        lane: Option<String>,
    },
    /// List admin token ids (never the tokens).
    List,
    /// Revoke an admin token by id.
    Revoke { id: String },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub log: crate::cli::logging::LogArgs,
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8700")]
    pub listen: std::net::SocketAddr,
    /// Silence (no frame received) after which a deployment is degraded.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub degraded_after: Duration,
    /// Silence after which a deployment is offline.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub offline_after: Duration,
    /// WebSocket ping cadence (dead-socket detection).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub ping_interval: Duration,
    /// A socket without a pong for this long is closed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub pong_timeout: Duration,
    /// Time a new connection has to send `hello`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub hello_timeout: Duration,
    /// Heartbeat cadence asked of clients in `welcome`.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,
    /// How often live connections' tokens are re-checked (revocation).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub token_check_interval: Duration,
    /// Largest accepted frame, in bytes.
    #[arg(long, default_value_t = crate::wire::DEFAULT_MAX_FRAME_BYTES)]
    pub max_frame_bytes: usize,
    /// A file holding one more admin token (e.g. a mounted Secret); only its
    /// hash is kept.
    #[arg(long, env = "EXO_CP_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// PEM certificate chain: serve HTTPS, so operators dial https:// (wss://).
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Serve the API without authentication on a non-loopback address when
    /// no admin token exists (behind an authenticating proxy).
    #[arg(long)]
    pub allow_unauthenticated_api: bool,
    /// How long a dashboard login lasts.
    #[arg(long, default_value = "12h", value_parser = parse_duration)]
    pub session_ttl: Duration,
    /// With `--db postgres://`: this replica's id (e.g. the pod name);
    /// default a random one.
    #[arg(long, env = "EXO_CP_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// With `--db postgres://`: the plain-HTTP URL the other replicas reach
    /// this one at (commands and shells hop to the replica holding the
    /// operator); default `http://<listen address>`.
    #[arg(long, env = "EXO_CP_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// With `--db postgres://`: a replica that does not renew its lease for
    /// this long is dead, and its connections are released.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub replica_lease: Duration,
}

#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// Create a deployment and print its first token (once, on stdout).
    Create { name: String },
    /// List deployments.
    List,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a new token (printed once); older tokens stay valid for `--overlap`.
    Rotate {
        deployment: String,
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        overlap: Duration,
    },
    /// Revoke every token of a deployment, or one with `--token-id`. A live
    /// connection on a revoked token is closed at once.
    Revoke {
        deployment: String,
        #[arg(long)]
        token_id: Option<String>,
    },
    /// List token ids and validity (never the tokens).
    List { deployment: String },
}

/// Flag durations: `250ms`, `90s`, `5m`, `1h`, or a bare number of seconds.
pub use crate::duration::parse_or_seconds as parse_duration;

fn fmt_ms(ms: Option<u64>) -> String {
    ms.map(|m| m.to_string()).unwrap_or_else(|| "-".into())
}

pub fn run(args: ControlPlaneArgs) -> u8 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo control-plane: tokio runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    rt.block_on(run_in(args))
}

async fn run_in(args: ControlPlaneArgs) -> u8 {
    let store = match Store::connect(&args.db).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("exo control-plane: {e}");
            return exit::UNUSABLE;
        }
    };
    let result: Result<(), String> = match args.command {
        ControlPlaneCommand::Serve(s) => serve(*s, store).await,
        ControlPlaneCommand::Deployment(DeploymentCommand::Create { name }) => store
            .create_deployment(&name)
            .await
            .map(|(info, token)| {
                eprintln!(
                    "created deployment {name}; token {} (shown once, store it now)",
                    info.id
                );
                println!("{}", token.expose());
            })
            .map_err(|e| e.to_string()),
        ControlPlaneCommand::Deployment(DeploymentCommand::List) => store
            .list_deployments()
            .await
            .map(|rows| {
                for r in rows {
                    println!("{}\t{}", r.name, r.created_ms);
                }
            })
            .map_err(|e| e.to_string()),
        ControlPlaneCommand::Token(TokenCommand::Rotate {
            deployment,
            overlap,
        }) => store
            .rotate(&deployment, overlap)
            .await
            .map(|(info, token)| {
                eprintln!(
                    "issued token {} for {deployment}; older tokens expire in {}s (shown once)",
                    info.id,
                    overlap.as_secs()
                );
                println!("{}", token.expose());
            })
            .map_err(|e| e.to_string()),
        ControlPlaneCommand::Token(TokenCommand::Revoke {
            deployment,
            token_id,
        }) => store
            .revoke(&deployment, token_id.as_deref())
            .await
            .map(|n| eprintln!("revoked {n} token(s) of {deployment}"))
            .map_err(|e| e.to_string()),
        ControlPlaneCommand::AdminToken(c) => admin_token(c, &store).await,
        ControlPlaneCommand::Token(TokenCommand::List { deployment }) => store
            .list_tokens(&deployment)
            .await
            .map(|rows| {
                println!("ID\tCREATED_MS\tEXPIRES_MS\tREVOKED_MS\tVALID");
                let now = crate::wire::now_ms();
                for t in rows {
                    println!(
                        "{}\t{}\t{}\t{}\t{}",
                        t.id,
                        t.created_ms,
                        fmt_ms(t.expires_ms),
                        fmt_ms(t.revoked_ms),
                        t.is_valid_at(now)
                    );
                }
            })
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("exo control-plane: {e}");
            exit::UNUSABLE
        }
    }
}

async fn admin_token(c: AdminTokenCommand, store: &Store) -> Result<(), String> {
    match c {
        AdminTokenCommand::Create { lane } => store
            .create_admin_token(lane.as_deref())
            .await
            .map(|(info, token)| {
                let scope = match &info.lane {
                    Some(l) => format!(" for support lane {l} only"),
                    None => String::new(),
                };
                eprintln!(
                    "created admin token {}{scope} (shown once, store it now); the API now needs an admin token",
                    info.id
                );
                println!("{}", token.expose());
            }),
        AdminTokenCommand::List => store.list_admin_tokens().await.map(|rows| {
            println!("ID\tCREATED_MS\tREVOKED_MS\tLANE");
            for t in rows {
                println!(
                    "{}\t{}\t{}\t{}",
                    t.id,
                    t.created_ms,
                    fmt_ms(t.revoked_ms),
                    t.lane.as_deref().unwrap_or("*")
                );
            }
        }),
        AdminTokenCommand::Revoke { id } => store
            .revoke_admin_token(&id)
            .await
            .map(|()| eprintln!("revoked admin token {id}")),
    }
    .map_err(|e| e.to_string())
}

/// The replica settings of `serve` on a PostgreSQL store, checked.
fn replica_config(s: &ServeArgs) -> Result<controlplane::ReplicaConfig, String> {
    if s.tls_cert_file.is_some() {
        return Err(
            "--tls-cert-file with --db postgres://: replicas reach each other over plain \
             HTTP at --advertise-url; terminate TLS at the load balancer in front of them \
             (docs/control-plane.md, \"Replicas\")"
                .into(),
        );
    }
    let advertise_url = match &s.advertise_url {
        Some(u) if !u.starts_with("http://") => {
            return Err(format!(
                "--advertise-url {u:?}: must be an http:// URL (replicas talk plain HTTP to \
                 each other)"
            ));
        }
        Some(u) => Some(u.trim_end_matches('/').to_owned()),
        None if s.listen.ip().is_unspecified() => {
            return Err(format!(
                "--listen {} with --db postgres://: pass --advertise-url, the address the other \
                 replicas reach this one at",
                s.listen
            ));
        }
        // The bound address (also when the port is 0).
        None => None,
    };
    if s.replica_lease < Duration::from_secs(3) {
        return Err("--replica-lease: at least 3s (it is renewed every third of it)".into());
    }
    Ok(controlplane::ReplicaConfig {
        id: s
            .replica_id
            .clone()
            .unwrap_or_else(|| format!("rep_{}", &crate::wire::random_id()[..12])),
        advertise_url,
        lease: s.replica_lease,
    })
}

async fn serve(s: ServeArgs, store: Store) -> Result<(), String> {
    crate::cli::logging::init(s.log.log_format);
    if let Some((from, to)) = controlplane::raise_fd_limit() {
        tracing::info!(from, to, "raised the open-file limit (one per connection)");
    }
    let admin = controlplane::admin::AdminAuth::from_file(s.admin_token_file.as_deref())
        .map_err(|e| e.to_string())?;
    admin
        .check_exposure(&store, s.listen, s.allow_unauthenticated_api)
        .await
        .map_err(|e| e.to_string())?;
    let tls = match (&s.tls_cert_file, &s.tls_key_file) {
        (Some(c), Some(k)) => {
            Some(controlplane::tls::server_config(c, k).map_err(|e| e.to_string())?)
        }
        _ => None,
    };
    let replica = if store.pg().is_some() {
        Some(replica_config(&s)?)
    } else {
        None
    };
    let cfg = ServeConfig {
        listen: s.listen,
        degraded_after: s.degraded_after,
        offline_after: s.offline_after,
        ping_interval: s.ping_interval,
        pong_timeout: s.pong_timeout,
        hello_timeout: s.hello_timeout,
        heartbeat_interval: s.heartbeat_interval,
        token_check_interval: s.token_check_interval,
        max_frame_bytes: s.max_frame_bytes,
        admin,
        tls,
        session_ttl: s.session_ttl,
        replica,
    };
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    // Before "listening" is printed: a signal after it stops cleanly.
    let shutdown = crate::shutdown::requested();
    let listener = controlplane::bind(&cfg).await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {scheme}://{addr}");
    let _ = std::io::stdout().flush();
    controlplane::serve(listener, cfg, store, shutdown)
        .await
        .map_err(|e| e.to_string())
}
