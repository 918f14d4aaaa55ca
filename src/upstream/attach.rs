//! The operator side of shell attach: an exec session (PTY by default) in
//! the pod of an agent (`status.podName`), its bytes carried as
//! `attach_data` frames. The session ends when the process exits, when the
//! control plane sends `attach_close`, or when the connection drops.
//!
//! Without a container in `attach_open` the operator picks it, as
//! `kubectl exec` does: the pod's `kubectl.kubernetes.io/default-container`
//! when it names one of the pod's containers (an Agent pod's `runtime`),
//! else the first. The API server itself refuses an exec into a pod of
//! several containers that names none.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use futures::SinkExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, TerminalSize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tracing::info;

use super::actions::ActionError;
use crate::crd::Agent;

use crate::meta::ANNOTATION_DEFAULT_CONTAINER;
use crate::wire::{
    self, ATTACH_EXITED_OK, AttachClose, AttachData, AttachOpen, AuditRecord, Frame,
};

/// Handles the connection loop keeps per open session.
#[derive(Debug)]
pub struct AttachHandle {
    pub stdin: mpsc::Sender<Vec<u8>>,
    pub resize: mpsc::Sender<(u16, u16)>,
}

/// Starts a session; frames for the control plane go to `out`.
pub fn spawn<F>(
    tasks: &mut tokio::task::JoinSet<()>,
    client: kube::Client,
    open: AttachOpen,
    out: F,
) -> AttachHandle
where
    F: Fn(Frame) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
{
    let (stdin_tx, stdin_rx) = mpsc::channel(64);
    let (resize_tx, resize_rx) = mpsc::channel(8);
    tasks.spawn(async move {
        let session = open.session.clone();
        let reason = match run(client, open, stdin_rx, resize_rx, &out).await {
            Ok(r) => r,
            Err(e) => e.to_string(),
        };
        out(Frame::AttachClose(AttachClose { session, reason })).await;
    });
    AttachHandle {
        stdin: stdin_tx,
        resize: resize_tx,
    }
}

async fn run<F>(
    client: kube::Client,
    open: AttachOpen,
    mut stdin_rx: mpsc::Receiver<Vec<u8>>,
    mut resize_rx: mpsc::Receiver<(u16, u16)>,
    out: &F,
) -> Result<String, ActionError>
where
    F: Fn(Frame) -> futures::future::BoxFuture<'static, ()>,
{
    let ns = &open.namespace;
    let kerr = |what: String| move |source| ActionError::Kube { what, source };
    let agent = Api::<Agent>::namespaced(client.clone(), ns)
        .get(&open.agent)
        .await
        .map_err(kerr(format!("get Agent {ns}/{}", open.agent)))?;
    let pod = agent
        .status
        .and_then(|s| s.pod_name)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            ActionError::Invalid(format!(
                "Agent {ns}/{} has no pod (status.podName is empty)",
                open.agent
            ))
        })?;
    let pods = Api::<Pod>::namespaced(client, ns);
    let container = match &open.container {
        Some(c) => c.clone(),
        None => {
            let p = pods
                .get(&pod)
                .await
                .map_err(kerr(format!("get Pod {ns}/{pod}")))?;
            default_container(&p)
                .ok_or_else(|| ActionError::Invalid(format!("Pod {ns}/{pod} has no containers")))?
        }
    };
    let ap = AttachParams::default()
        .container(container.clone())
        .stdin(true)
        .stdout(true)
        .stderr(!open.tty)
        .tty(open.tty);
    let cmd = if open.command.is_empty() {
        vec!["sh".to_owned()]
    } else {
        open.command.clone()
    };
    let mut proc = pods
        .exec(&pod, cmd, &ap)
        .await
        .map_err(kerr(format!("exec in Pod {ns}/{pod}")))?;
    // Who got a shell where: the container may be the operator's choice.
    info!(namespace = %ns, agent = %open.agent, %pod, %container, session = %open.session, "attach session opened");
    out(Frame::Audit(AuditRecord {
        at_ms: wire::now_ms(),
        actor: open.actor.clone(),
        action: "attach.exec".into(),
        target: format!("{ns}/{}", open.agent),
        outcome: "ok".into(),
        detail: serde_json::json!({ "attach_session": open.session, "pod": pod, "container": container }),
    }))
    .await;
    let missing = |s: &str| ActionError::Invalid(format!("exec gave no {s} stream"));
    let mut stdin = proc.stdin().ok_or_else(|| missing("stdin"))?;
    let mut stdout = proc.stdout().ok_or_else(|| missing("stdout"))?;
    let mut stderr = proc.stderr();
    let mut term = if open.tty { proc.terminal_size() } else { None };
    if let Some(t) = term.as_mut()
        && open.cols > 0
        && open.rows > 0
    {
        let _ = t
            .send(TerminalSize {
                width: open.cols,
                height: open.rows,
            })
            .await;
    }
    let status = proc.take_status();
    let data = |bytes: &[u8]| {
        Frame::AttachData(AttachData {
            session: open.session.clone(),
            data: B64.encode(bytes),
        })
    };
    let mut buf = vec![0u8; 8192];
    let mut ebuf = vec![0u8; 8192];
    let mut stdin_open = true;
    loop {
        tokio::select! {
            n = stdout.read(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => out(data(&buf[..n])).await,
            },
            n = async {
                match stderr.as_mut() {
                    Some(e) => e.read(&mut ebuf).await,
                    None => std::future::pending().await,
                }
            } => match n {
                Ok(0) | Err(_) => stderr = None,
                Ok(n) => out(data(&ebuf[..n])).await,
            },
            b = stdin_rx.recv(), if stdin_open => match b {
                Some(b) => {
                    if stdin.write_all(&b).await.is_err() || stdin.flush().await.is_err() {
                        stdin_open = false;
                    }
                }
                None => return Ok("closed by the control plane".into()),
            },
            r = resize_rx.recv() => {
                if let (Some((cols, rows)), Some(t)) = (r, term.as_mut()) {
                    let _ = t.send(TerminalSize { width: cols, height: rows }).await;
                }
            }
        }
    }
    let st = match status {
        Some(s) => tokio::time::timeout(std::time::Duration::from_secs(5), s)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    Ok(match st {
        Some(s) if s.status.as_deref() == Some("Success") => ATTACH_EXITED_OK.to_owned(),
        Some(s) => format!(
            "exited: {}",
            s.message.or(s.reason).unwrap_or_else(|| "failure".into())
        ),
        None => "exited".to_owned(),
    })
}

/// The container an attach that names none uses: the one the pod's
/// [`ANNOTATION_DEFAULT_CONTAINER`] names when the pod has it, else the
/// pod's first (what `kubectl exec` picks too). `None` for a pod without
/// containers.
pub fn default_container(pod: &Pod) -> Option<String> {
    let containers = &pod.spec.as_ref()?.containers;
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DEFAULT_CONTAINER));
    annotated
        .filter(|name| containers.iter().any(|c| &c.name == *name))
        .cloned()
        .or_else(|| containers.first().map(|c| c.name.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: &[&str], annotation: Option<&str>) -> Pod {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": containers.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()},
        }))
        .unwrap();
        if let Some(a) = annotation {
            p.metadata.annotations =
                Some([(ANNOTATION_DEFAULT_CONTAINER.to_owned(), a.to_owned())].into());
        }
        p
    }

    #[test]
    fn the_default_container_is_the_annotated_one_else_the_first() {
        let cases: [(&[&str], Option<&str>, Option<&str>); 5] = [
            (&["agentlet", "runtime"], Some("runtime"), Some("runtime")),
            (&["agentlet", "runtime"], None, Some("agentlet")),
            // An annotation naming no container of the pod is ignored, as
            // kubectl ignores it.
            (&["agentlet", "runtime"], Some("gone"), Some("agentlet")),
            (&["tool"], Some("tool"), Some("tool")),
            (&[], Some("runtime"), None),
        ];
        for (containers, annotation, want) in cases {
            assert_eq!(
                default_container(&pod(containers, annotation)).as_deref(),
                want,
                "{containers:?} {annotation:?}"
            );
        }
    }

    #[test]
    fn a_pod_without_a_spec_has_no_default() {
        assert_eq!(default_container(&Pod::default()), None);
    }
}
