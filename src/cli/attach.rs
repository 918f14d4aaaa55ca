//! `exo attach AGENT`: a shell in an agent's pod, through the control plane
//! and the deployment's operator connection (never a direct kube exec from
//! the laptop). When stdin is a terminal it is put in raw mode for the
//! session (keys, Ctrl-C included, go to the remote shell as typed) and
//! restored on every way out; its size is sent at the start and on every
//! SIGWINCH. Without a terminal (pipes, scripts, tests) stdin is forwarded
//! as it is read and nothing local is changed.

use clap::Args;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};
use tokio_tungstenite::tungstenite::Message;

use crate::cli::exit;
use crate::cli::plane::{PlaneArgs, enc};
use crate::cli::terminal::{self, RawMode};
use crate::wire::ATTACH_EXITED_OK;

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The Agent to attach to.
    pub agent: String,
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// The deployment (cluster) the agent runs in.
    #[arg(long, env = "EXO_DEPLOYMENT")]
    pub deployment: String,
    #[command(flatten)]
    pub plane: PlaneArgs,
    /// Container in the agent's pod (default: the one its
    /// kubectl.kubernetes.io/default-container annotation names, `runtime`
    /// for an Agent; else the first).
    #[arg(long, short = 'c')]
    pub container: Option<String>,
    /// Command to run instead of `sh` (words separated by spaces).
    #[arg(long)]
    pub command: Option<String>,
    /// Do not allocate a terminal in the pod (for scripts and pipes).
    #[arg(long)]
    pub no_tty: bool,
}

/// The control plane's last text message of a session: its end, whole.
#[derive(Debug, Deserialize)]
struct End {
    reason: String,
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
    let mut url = format!(
        "/api/v1/deployments/{}/attach?namespace={}&agent={}&tty={}",
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
    let ws = a.plane.dial(&url).await.map_err(|e| e.to_string())?;
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
    // The end reason whole, sent before the close (whose reason may be cut).
    let mut ended: Option<String> = None;
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
                Some(Ok(Message::Text(t))) => {
                    if let Ok(End { reason }) = serde_json::from_str(t.as_str()) {
                        ended = Some(reason);
                    }
                }
                Some(Ok(Message::Close(c))) => {
                    let reason = ended
                        .take()
                        .or_else(|| c.map(|c| c.reason.to_string()))
                        .unwrap_or_default();
                    // Restore the terminal before printing to it.
                    drop(raw.take());
                    eprintln!("exo attach: session ended: {reason}");
                    return Ok(reason == ATTACH_EXITED_OK);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("read: {e}")),
                None => return Err("connection closed".into()),
            },
        }
    }
}
