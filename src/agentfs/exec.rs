//! Running a [`script::Op`] in the pod that shows the volume (thin I/O
//! edge over the apiserver's exec).
//!
//! The exec is spoken here over the apiserver's WebSocket
//! (`v5.channel.k8s.io`, through `kube::Client::connect`) rather than
//! through `kube`'s attached-process helper, whose stdin goes out in 4 KiB
//! messages: a copy's stream goes out in messages of up to
//! [`CHUNK_BYTES`], and stdout comes back through a pipe of that size.
//! Channels: 0 stdin, 1 stdout, 2 stderr, 3 the exit status, 255 the
//! close of a stream (v5).

use futures::{SinkExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Client;
use kube::api::AttachParams;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, DuplexStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::FsError;
use super::script::Op;
use crate::wire::fs::CHUNK_BYTES;

/// Where a volume can be reached: a running pod, its container that
/// mounts the volume, and the mount path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub mount_path: String,
    /// The short-lived helper pod rather than an agent's.
    pub helper: bool,
}

/// Bytes of stderr kept for the error message.
const STDERR_KEEP: usize = 4096;

/// An idle exec is pinged this often, so no proxy drops it.
const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// An exec in progress. Dropping it ends the exec's connection.
pub struct Running {
    stdin: Option<DuplexStream>,
    stdout: Option<DuplexStream>,
    status: Option<oneshot::Receiver<Status>>,
    /// The connection's task; its value is what the script wrote on stderr.
    task: Option<JoinHandle<String>>,
    pod: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

pub async fn start(
    client: &Client,
    t: &Target,
    op: Op,
    args: &[&str],
    stdin: bool,
) -> Result<Running, FsError> {
    let cmd = op.command(&t.namespace, &t.pod, &t.mount_path, args);
    start_command(client, t, cmd, stdin).await
}

/// Starts `cmd` (an argv, no shell around it) in `t`'s container.
pub async fn start_command(
    client: &Client,
    t: &Target,
    cmd: Vec<String>,
    stdin: bool,
) -> Result<Running, FsError> {
    let params = AttachParams::default()
        .container(t.container.clone())
        .stdin(stdin)
        .stdout(true)
        .stderr(true);
    let what = || format!("exec in pod {}/{}", t.namespace, t.pod);
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", t.namespace))
        .exec(&t.pod, cmd, &params)
        .map_err(|e| FsError::Kube {
            what: what(),
            message: e.to_string(),
        })?;
    let conn = client
        .connect(req)
        .await
        .map_err(|e| FsError::kube(what(), e))?;
    let stream_close = conn.supports_stream_close();
    let (stdout_w, stdout_r) = tokio::io::duplex(CHUNK_BYTES);
    let (stdin_w, stdin_r) = tokio::io::duplex(CHUNK_BYTES);
    let (status_tx, status_rx) = oneshot::channel();
    let task = tokio::spawn(pump(
        conn.into_stream(),
        stream_close,
        stdin.then_some(stdin_r),
        stdout_w,
        status_tx,
    ));
    Ok(Running {
        stdin: stdin.then_some(stdin_w),
        stdout: Some(stdout_r),
        status: Some(status_rx),
        task: Some(task),
        pod: format!("{}/{}", t.namespace, t.pod),
    })
}

/// Carries one exec's streams until its status arrives or the connection
/// ends; returns the start of stderr.
async fn pump<S>(
    ws: S,
    stream_close: bool,
    mut stdin: Option<DuplexStream>,
    stdout: DuplexStream,
    status: oneshot::Sender<Status>,
) -> String
where
    S: futures::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + futures::Sink<tokio_tungstenite::tungstenite::Message>
        + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let (mut sink, mut source) = ws.split();
    let mut stdout = Some(stdout);
    let mut stderr = Vec::new();
    let mut buf = vec![0u8; CHUNK_BYTES + 1];
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    loop {
        tokio::select! {
            m = source.next() => {
                let Some(Ok(m)) = m else { break };
                if !m.is_binary() {
                    continue;
                }
                let data = m.into_data();
                let Some((&channel, body)) = data.split_first() else { continue };
                match channel {
                    1 => {
                        // A reader that went away takes no more; the rest is dropped.
                        if let Some(w) = stdout.as_mut()
                            && w.write_all(body).await.is_err()
                        {
                            stdout = None;
                        }
                    }
                    2 => {
                        let room = STDERR_KEEP.saturating_sub(stderr.len());
                        stderr.extend_from_slice(&body[..body.len().min(room)]);
                    }
                    3 => {
                        if let Ok(s) = serde_json::from_slice::<Status>(body) {
                            let _ = status.send(s);
                        }
                        break;
                    }
                    _ => {}
                }
            }
            n = async { match stdin.as_mut() { Some(r) => r.read(&mut buf[1..]).await, None => std::future::pending().await } } => {
                match n {
                    Ok(n) if n > 0 => {
                        buf[0] = 0;
                        if sink.send(buf[..=n].to_vec().into()).await.is_err() {
                            break;
                        }
                    }
                    _ => {
                        stdin = None;
                        // v5 says "stdin ended" with a close of channel 0;
                        // older servers only learn it from the socket closing.
                        if stream_close {
                            if sink.send(vec![255u8, 0].into()).await.is_err() {
                                break;
                            }
                        } else {
                            let _ = sink.close().await;
                        }
                    }
                }
            }
            _ = ping.tick() => {
                if sink.send(tokio_tungstenite::tungstenite::Message::Ping(Vec::new().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    if let Some(mut w) = stdout {
        let _ = w.shutdown().await;
    }
    String::from_utf8_lossy(&stderr).into_owned()
}

impl Running {
    pub fn stdin(&mut self) -> Option<impl AsyncWrite + Unpin + use<>> {
        self.stdin.take()
    }

    pub fn stdout(&mut self) -> Option<impl AsyncRead + Unpin + use<>> {
        self.stdout.take()
    }

    /// Waits for the command to end: its status and the start of its
    /// stderr.
    pub async fn wait(mut self) -> Exit {
        let status = match self.status.take() {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        let stderr = match self.task.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        Exit { status, stderr }
    }

    /// Waits for the command to end; a non-zero exit is an error carrying
    /// what the script printed on stderr.
    pub async fn finish(self) -> Result<(), FsError> {
        let pod = self.pod.clone();
        let Exit { status, stderr } = self.wait().await;
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(()),
            Some(s) => Err(FsError::InPod {
                pod: pod.clone(),
                message: failure_message(&stderr, s.message.as_deref()),
            }),
            None => Err(FsError::InPod {
                pod,
                message: failure_message(&stderr, Some("the exec ended without a status")),
            }),
        }
    }
}

/// How an exec ended: the apiserver's status (none when the connection
/// ended without one) and the start of stderr.
#[derive(Debug, Clone, Default)]
pub struct Exit {
    pub status: Option<Status>,
    pub stderr: String,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.status.as_deref() == Some("Success"))
    }

    /// The command's exit code, when the status carries one: the kubelet
    /// gives a cause `ExitCode`; other runtimes (kwok's) only end their
    /// message with `exit status N`. Only the number is taken.
    pub fn code(&self) -> Option<i32> {
        let status = self.status.as_ref()?;
        let cause = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse().ok());
        cause.or_else(|| {
            let m = status.message.as_deref()?;
            let at = m.rfind("exit status ")?;
            m[at + "exit status ".len()..].trim().parse().ok()
        })
    }

    /// The first non-empty line of stderr, at most `max` characters.
    pub fn stderr_line(&self, max: usize) -> Option<String> {
        self.stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(max).collect())
    }
}

/// The script's own `exo: ...` line when there is one, else the first
/// line of stderr, else the apiserver's message.
fn failure_message(stderr: &str, status: Option<&str>) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .iter()
        .find_map(|l| l.strip_prefix("exo: "))
        .or_else(|| lines.first().copied())
        .or(status)
        .unwrap_or("failed")
        .to_owned()
}

/// Runs an op without stdin and returns its stdout (at most `max` bytes).
pub async fn output(
    client: &Client,
    t: &Target,
    op: Op,
    args: &[&str],
    max: usize,
) -> Result<Vec<u8>, FsError> {
    let mut run = start(client, t, op, args, false).await?;
    let mut out = Vec::new();
    if let Some(s) = run.stdout() {
        let mut s = s.take(max as u64 + 1);
        s.read_to_end(&mut out)
            .await
            .map_err(|e| FsError::io(format!("read from pod {}", t.pod), e))?;
    }
    if out.len() > max {
        return Err(FsError::Invalid(format!(
            "the pod's answer passed {max} bytes; list a smaller folder"
        )));
    }
    run.finish().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::failure_message;

    /// A hook's end: its exit code from the status's cause, and the first
    /// line of stderr, cut short.
    #[test]
    fn an_exit_has_its_code_and_first_line() {
        let status: k8s_openapi::apimachinery::pkg::apis::meta::v1::Status =
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}
            }))
            .unwrap();
        let exit = super::Exit {
            status: Some(status),
            stderr: "\npg_dumpall: connection refused, and more\nsecond\n".into(),
        };
        assert!(!exit.success());
        assert_eq!(exit.code(), Some(3));
        assert_eq!(exit.stderr_line(18).as_deref(), Some("pg_dumpall: connec"));
        assert_eq!(super::Exit::default().code(), None);
        let said: k8s_openapi::apimachinery::pkg::apis::meta::v1::Status =
            serde_json::from_value(serde_json::json!({
                "status": "Failure",
                "message": "error executing command in container: cmd wait: sh -c x: exit status 7"
            }))
            .unwrap();
        let exit = super::Exit {
            status: Some(said),
            stderr: String::new(),
        };
        assert_eq!((exit.code(), exit.stderr_line(80)), (Some(7), None));
        assert!(!super::Exit::default().success());
    }

    #[test]
    fn the_scripts_own_line_wins() {
        assert_eq!(
            failure_message("tar: x\nexo: /a: no such file or folder\n", Some("code 3")),
            "/a: no such file or folder"
        );
        assert_eq!(failure_message("boom\n", None), "boom");
        assert_eq!(failure_message("", Some("code 3")), "code 3");
    }
}
