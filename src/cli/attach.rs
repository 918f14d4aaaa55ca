//! `exo attach AGENT`: a shell in an agent's pod, through the control plane
//! and the deployment's operator connection (never a direct kube exec from
//! the laptop). When stdin is a terminal it is put in raw mode for the
//! session (keys, Ctrl-C included, go to the remote shell as typed) and
//! restored on every way out; its size is sent at the start and on every
//! SIGWINCH. Without a terminal (pipes, scripts, tests) stdin is forwarded
//! as it is read and nothing local is changed.

use clap::Args;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};
use tokio_tungstenite::tungstenite::Message;

use crate::cli::exit;
use crate::cli::terminal::{self, RawMode};

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The Agent to attach to.
    pub agent: String,
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// The deployment (cluster) the agent runs in.
    #[arg(long, env = "EXO_DEPLOYMENT")]
    pub deployment: String,
    /// Base URL of the control plane.
    #[arg(
        long,
        env = "EXO_CONTROL_PLANE",
        default_value = "http://127.0.0.1:8700"
    )]
    pub control_plane: String,
    /// Container in the agent's pod (default: the first).
    #[arg(long, short = 'c')]
    pub container: Option<String>,
    /// Command to run instead of `sh` (words separated by spaces).
    #[arg(long)]
    pub command: Option<String>,
    /// Do not allocate a terminal in the pod (for scripts and pipes).
    #[arg(long)]
    pub no_tty: bool,
    /// File holding the control plane's admin token (or set
    /// EXO_CP_ADMIN_TOKEN); needed once the control plane has one.
    #[arg(long, env = "EXO_CP_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<std::path::PathBuf>,
}

/// The admin token from `--admin-token-file` or `EXO_CP_ADMIN_TOKEN`.
fn admin_token(a: &AttachArgs) -> Result<Option<String>, String> {
    if let Some(p) = &a.admin_token_file {
        let t = std::fs::read_to_string(p)
            .map_err(|e| format!("admin token file {}: {e}", p.display()))?;
        let t = t.trim();
        if t.is_empty() {
            return Err(format!("admin token file {} is empty", p.display()));
        }
        return Ok(Some(t.to_owned()));
    }
    Ok(std::env::var("EXO_CP_ADMIN_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty()))
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub fn run(args: AttachArgs) -> u8 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo attach: tokio runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    let result = rt.block_on(attach(args));
    // tokio's stdin reader is a blocking thread stuck in read(2) until the
    // next key press; do not wait for it once the session is over.
    rt.shutdown_background();
    match result {
        Ok(true) => exit::OK,
        Ok(false) => exit::FINDINGS,
        Err(e) => {
            eprintln!("exo attach: {e}");
            exit::UNUSABLE
        }
    }
}

/// `Ok(true)` when the remote command exited 0.
async fn attach(a: AttachArgs) -> Result<bool, String> {
    let base = a.control_plane.trim_end_matches('/');
    let base = if let Some(r) = base.strip_prefix("https://") {
        format!("wss://{r}")
    } else if let Some(r) = base.strip_prefix("http://") {
        format!("ws://{r}")
    } else {
        base.to_owned()
    };
    let mut url = format!(
        "{base}/api/v1/deployments/{}/attach?namespace={}&agent={}&tty={}",
        enc(&a.deployment),
        enc(&a.namespace),
        enc(&a.agent),
        !a.no_tty
    );
    if let Some(c) = &a.container {
        url.push_str(&format!("&container={}", enc(c)));
    }
    if let Some(c) = &a.command {
        url.push_str(&format!("&command={}", enc(c)));
    }
    if let Ok(user) = std::env::var("USER") {
        url.push_str(&format!("&actor={}", enc(&user)));
    }
    let interactive = !a.no_tty;
    if interactive && let Some((cols, rows)) = terminal::size() {
        url.push_str(&format!("&cols={cols}&rows={rows}"));
    }
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        url.as_str(),
    )
    .map_err(|e| format!("bad control-plane URL {base}: {e}"))?;
    if let Some(t) = admin_token(&a)? {
        let v = format!("Bearer {t}")
            .parse()
            .map_err(|_| "the admin token is not a valid header value".to_owned())?;
        req.headers_mut().insert("authorization", v);
    }
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| match e {
            tokio_tungstenite::tungstenite::Error::Http(r) => {
                let body = r
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                format!("refused: HTTP {} {body}", r.status())
            }
            e => format!("connect {base}: {e}"),
        })?;
    let (mut sink, mut stream) = ws.split();
    // From here on every return drops `raw`, which restores the terminal.
    let mut raw = if interactive {
        RawMode::enable().map_err(|e| e.to_string())?
    } else {
        None
    };
    let resize_events = interactive && terminal::size().is_some();
    let sig = |k: SignalKind| signal(k).map_err(|e| format!("signal handler: {e}"));
    let mut winch = sig(SignalKind::window_change())?;
    let mut term = sig(SignalKind::terminate())?;
    let mut hup = sig(SignalKind::hangup())?;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 4096];
    let mut stdin_open = true;
    loop {
        tokio::select! {
            n = stdin.read(&mut buf), if stdin_open => match n {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => sink
                    .send(Message::Binary(buf[..n].to_vec().into()))
                    .await
                    .map_err(|e| format!("send: {e}"))?,
            },
            _ = winch.recv(), if resize_events => {
                if let Some((cols, rows)) = terminal::size() {
                    let msg = serde_json::json!({"resize": {"cols": cols, "rows": rows}});
                    sink.send(Message::Text(msg.to_string().into()))
                        .await
                        .map_err(|e| format!("send: {e}"))?;
                }
            }
            _ = term.recv() => return Err("terminated".into()),
            _ = hup.recv() => return Err("hang-up".into()),
            m = stream.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    stdout.write_all(&b).await.map_err(|e| e.to_string())?;
                    stdout.flush().await.map_err(|e| e.to_string())?;
                }
                Some(Ok(Message::Close(c))) => {
                    let reason = c.map(|c| c.reason.to_string()).unwrap_or_default();
                    // Restore the terminal before printing to it.
                    drop(raw.take());
                    eprintln!("exo attach: session ended: {reason}");
                    return Ok(reason == "exited: 0");
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("read: {e}")),
                None => return Err("connection closed".into()),
            },
        }
    }
}
