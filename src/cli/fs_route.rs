//! The two routes of `exo fs`, one interface: a command with a JSON
//! answer, an upload fed from a channel, a download into a channel.
//! `Direct` runs `agentfs` here with the kubeconfig's credentials;
//! `Plane` sends the same command through the control plane to the
//! deployment's operator, which runs the same `agentfs` code.

use clap::Args;
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use crate::agentfs::helper::HelperOpts;
use crate::agentfs::tarstream::Limits;
use crate::agentfs::transfer::{Download, Upload};
use crate::agentfs::{FsError, ops};
use crate::cli::kube_args::KubeArgsError;
use crate::cli::plane::{PlaneArgs, PlaneError, Socket, enc};
use crate::wire::fs::Transferred;
use crate::wire::{Command, CommandResult};

#[derive(Debug, Clone, Args)]
pub struct RouteArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// Go through the control plane to this deployment's operator
    /// (without it: straight to the cluster of the current kubeconfig).
    #[arg(long, env = "EXO_DEPLOYMENT", global = true)]
    pub deployment: Option<String>,
    #[command(flatten)]
    pub plane: PlaneArgs,
    /// Direct route: image of the helper pod started when no running pod
    /// mounts the volume.
    #[arg(long, global = true)]
    pub helper_image: Option<String>,
}

pub enum Route {
    Direct {
        client: kube::Client,
        helper: HelperOpts,
    },
    Plane {
        plane: PlaneArgs,
        deployment: String,
    },
}

/// Why a command or copy over a route failed.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("{0} (or pass --deployment to go through the control plane)")]
    Client(#[source] KubeArgsError),
    #[error(transparent)]
    Plane(#[from] PlaneError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("send: {0}")]
    Send(#[source] tokio_tungstenite::tungstenite::Error),
    #[error("read: {0}")]
    Read(#[source] tokio_tungstenite::tungstenite::Error),
    #[error("the control plane closed the connection: {0}")]
    ClosedWith(String),
    #[error("the control plane closed the connection")]
    Closed,
    #[error("unexpected answer: {0}")]
    Answer(#[source] serde_json::Error),
    /// The command failed at the operator; its message as it sent it.
    #[error("{0}")]
    Failed(String),
    #[error("unexpected copy result: {0}")]
    CopyResult(#[source] serde_json::Error),
    /// The local packer refused a file; its message.
    #[error("{0}")]
    Packer(String),
    #[error("the packer stopped")]
    PackerStopped,
    #[error("the local side stopped")]
    LocalStopped,
    #[error("not an upload")]
    NotUpload,
    #[error("not a download")]
    NotDownload,
}

/// The `exo fs` verbs end in the message they print (and an exit code).
impl From<RouteError> for String {
    fn from(e: RouteError) -> String {
        e.to_string()
    }
}

impl Route {
    pub async fn open(a: &RouteArgs) -> Result<Self, RouteError> {
        if let Some(d) = &a.deployment {
            return Ok(Route::Plane {
                plane: a.plane.clone(),
                deployment: d.clone(),
            });
        }
        let client = a.kube.client().await.map_err(RouteError::Client)?;
        let mut helper = HelperOpts::default();
        if let Some(i) = &a.helper_image {
            helper.image = i.clone();
        }
        Ok(Route::Direct { client, helper })
    }

    /// The kubeconfig's client and helper settings, for a verb that works
    /// on the cluster directly (the backup verbs); refused on the control
    /// plane's route, which does not carry them.
    pub fn direct(&self, verb: &str) -> Result<(&kube::Client, &HelperOpts), String> {
        match self {
            Route::Direct { client, helper } => Ok((client, helper)),
            Route::Plane { deployment, .. } => Err(format!(
                "exo fs {verb} works with the kubeconfig's credentials only; it does not go \
                 through the control plane (--deployment {deployment})"
            )),
        }
    }

    async fn dial(
        plane: &PlaneArgs,
        deployment: &str,
        cmd: &Command,
    ) -> Result<Socket, RouteError> {
        let mut ws = plane
            .dial(&format!("/api/v1/deployments/{}/fs", enc(deployment)))
            .await?;
        let actor = std::env::var("USER").unwrap_or_else(|_| "cli".into());
        let opening = serde_json::json!({ "command": cmd, "actor": actor });
        ws.send(Message::Text(opening.to_string().into()))
            .await
            .map_err(RouteError::Send)?;
        Ok(ws)
    }

    /// A request/answer command.
    pub async fn call(&self, cmd: Command) -> Result<serde_json::Value, RouteError> {
        match self {
            Route::Direct { client, helper } => Ok(ops::run(client, &cmd, helper).await?),
            Route::Plane { plane, deployment } => {
                let mut ws = Self::dial(plane, deployment, &cmd).await?;
                loop {
                    if let Reply::Answer(t) = reply(ws.next().await)? {
                        return answer(&t);
                    }
                }
            }
        }
    }

    /// Sends the tar stream from `data`; `digest` is the packer's digest
    /// of its files (or its refusal, which aborts the copy).
    pub async fn upload(
        &self,
        cmd: Command,
        mut data: mpsc::Receiver<Vec<u8>>,
        digest: oneshot::Receiver<Result<String, String>>,
    ) -> Result<Transferred, RouteError> {
        match self {
            Route::Direct { client, helper } => {
                let Command::AgentfsWrite {
                    namespace,
                    fs_name,
                    path,
                    top,
                    max_bytes,
                } = &cmd
                else {
                    return Err(RouteError::NotUpload);
                };
                let limits = Limits {
                    max_bytes: *max_bytes,
                    ..Limits::default()
                };
                let mut up =
                    Upload::begin(client, namespace, fs_name, path, top, limits, helper).await?;
                while let Some(piece) = data.recv().await {
                    if let Err(e) = up.write(&piece).await {
                        up.abort().await;
                        return Err(e.into());
                    }
                }
                match digest.await {
                    Ok(Ok(d)) => Ok(up.finish(Some(&d)).await?),
                    Ok(Err(e)) => {
                        up.abort().await;
                        Err(RouteError::Packer(e))
                    }
                    Err(_) => {
                        up.abort().await;
                        Err(RouteError::PackerStopped)
                    }
                }
            }
            Route::Plane { plane, deployment } => {
                let ws = Self::dial(plane, deployment, &cmd).await?;
                let (mut sink, mut stream) = ws.split();
                let sender = async move {
                    while let Some(piece) = data.recv().await {
                        sink.send(Message::Binary(piece.into()))
                            .await
                            .map_err(RouteError::Send)?;
                    }
                    let d = digest
                        .await
                        .map_err(|_| RouteError::PackerStopped)?
                        .map_err(RouteError::Packer)?;
                    let end = serde_json::json!({ "end": true, "sha256": d });
                    sink.send(Message::Text(end.to_string().into()))
                        .await
                        .map_err(RouteError::Send)?;
                    // Keep the socket open until the answer arrives.
                    std::future::pending::<()>().await;
                    Ok::<(), RouteError>(())
                };
                tokio::pin!(sender);
                loop {
                    tokio::select! {
                        r = &mut sender => {
                            // Only errors end the sender; dropping the
                            // socket makes the control plane abort.
                            r?;
                        }
                        m = stream.next() => {
                            if let Reply::Answer(t) = reply(m)? {
                                return transferred(answer(&t)?);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Receives the tar stream into `out`.
    pub async fn download(
        &self,
        cmd: Command,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Transferred, RouteError> {
        match self {
            Route::Direct { client, helper } => {
                let Command::AgentfsRead {
                    namespace,
                    fs_name,
                    path,
                    max_bytes,
                } = &cmd
                else {
                    return Err(RouteError::NotDownload);
                };
                let limits = Limits {
                    max_bytes: *max_bytes,
                    ..Limits::default()
                };
                let mut down =
                    Download::begin(client, namespace, fs_name, path, limits, helper).await?;
                while let Some(piece) = down.next().await? {
                    if out.send(piece).await.is_err() {
                        return Err(RouteError::LocalStopped);
                    }
                }
                Ok(down.finish().await?)
            }
            Route::Plane { plane, deployment } => {
                let mut ws = Self::dial(plane, deployment, &cmd).await?;
                loop {
                    match reply(ws.next().await)? {
                        Reply::Data(b) => {
                            if out.send(b).await.is_err() {
                                return Err(RouteError::LocalStopped);
                            }
                        }
                        Reply::Answer(t) => return transferred(answer(&t)?),
                        Reply::Other => {}
                    }
                }
            }
        }
    }
}

/// What one message from the control plane means for a command.
enum Reply {
    /// The command's answer, always the last message.
    Answer(String),
    /// A piece of a download's tar stream.
    Data(Vec<u8>),
    /// Anything else (pings): read on.
    Other,
}

fn reply(
    m: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
) -> Result<Reply, RouteError> {
    match m {
        Some(Ok(Message::Text(t))) => Ok(Reply::Answer(t.as_str().to_owned())),
        Some(Ok(Message::Binary(b))) => Ok(Reply::Data(b.to_vec())),
        Some(Ok(Message::Close(c))) => Err(RouteError::ClosedWith(
            c.map(|c| c.reason.to_string()).unwrap_or_default(),
        )),
        Some(Ok(_)) => Ok(Reply::Other),
        Some(Err(e)) => Err(RouteError::Read(e)),
        None => Err(RouteError::Closed),
    }
}

/// A `command_result` from the control plane: its value, or its error.
fn answer(text: &str) -> Result<serde_json::Value, RouteError> {
    let r: CommandResult = serde_json::from_str(text).map_err(RouteError::Answer)?;
    if r.ok {
        Ok(r.result)
    } else {
        Err(RouteError::Failed(
            r.error.unwrap_or_else(|| "failed".into()),
        ))
    }
}

fn transferred(v: serde_json::Value) -> Result<Transferred, RouteError> {
    serde_json::from_value(v).map_err(RouteError::CopyResult)
}
