//! Running a [`script::Op`] in the pod that shows the volume (thin I/O
//! edge over the apiserver's exec).

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Client;
use kube::api::{Api, AttachParams, AttachedProcess};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
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

type StatusFuture = Pin<Box<dyn Future<Output = Option<Status>> + Send>>;

/// An exec in progress.
pub struct Running {
    proc: AttachedProcess,
    status: Option<StatusFuture>,
    stderr: Option<JoinHandle<String>>,
    pod: String,
}

pub async fn start(
    client: &Client,
    t: &Target,
    op: Op,
    args: &[&str],
    stdin: bool,
) -> Result<Running, FsError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &t.namespace);
    let mut params = AttachParams::default()
        .container(t.container.clone())
        .stdin(stdin)
        .stdout(true)
        .stderr(true);
    // The client's default pipe is 1 KiB: a copy's stream would cross it
    // a kilobyte at a time.
    params.max_stdout_buf_size = Some(CHUNK_BYTES);
    params.max_stdin_buf_size = Some(CHUNK_BYTES);
    let cmd = op.command(&t.namespace, &t.pod, &t.mount_path, args);
    let mut proc = api
        .exec(&t.pod, cmd, &params)
        .await
        .map_err(|e| FsError::kube(format!("exec in pod {}/{}", t.namespace, t.pod), e))?;
    let status = proc.take_status().map(|f| Box::pin(f) as StatusFuture);
    let stderr = proc.stderr().map(|mut s| {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = s.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                if buf.len() < STDERR_KEEP {
                    buf.extend_from_slice(&chunk[..n.min(STDERR_KEEP - buf.len())]);
                }
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    });
    Ok(Running {
        proc,
        status,
        stderr,
        pod: format!("{}/{}", t.namespace, t.pod),
    })
}

impl Running {
    pub fn stdin(&mut self) -> Option<impl AsyncWrite + Unpin + use<>> {
        self.proc.stdin()
    }

    pub fn stdout(&mut self) -> Option<impl AsyncRead + Unpin + use<>> {
        self.proc.stdout()
    }

    /// Waits for the command to end; a non-zero exit is an error carrying
    /// what the script printed on stderr.
    pub async fn finish(mut self) -> Result<(), FsError> {
        let status = match self.status.take() {
            Some(f) => f.await,
            None => None,
        };
        let stderr = match self.stderr.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        let _ = self.proc.join().await;
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(()),
            Some(s) => Err(FsError::InPod {
                pod: self.pod,
                message: failure_message(&stderr, s.message.as_deref()),
            }),
            None => Err(FsError::InPod {
                pod: self.pod,
                message: failure_message(&stderr, Some("the exec ended without a status")),
            }),
        }
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
