#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo attach`: user -> control plane -> operator connection -> kube exec
//! in the agent's pod (kwok runs the command on this host), all real
//! processes; one Agent pod built by a managed `exo operator run`.

mod support;
mod upstream_support;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use exo::crd::Agent;

use exo::meta::ANNOTATION_DEFAULT_CONTAINER;
use exo::wire;
use k8s_openapi::api::core::v1::Pod;
use support::TestNamespace;
use support::operator::{agent, create, restricted_namespace, wait_for, wait_pod};
use upstream_support::shell::{agent_with_pod, attach_cmd, shell_script};
use upstream_support::{Connector, ControlPlane, connector_until, install_crds, managed_operator};

/// A namespace with an agent and its pod, a control plane with deployment
/// `shell`, and a connected operator.
async fn shell_session(prefix: &str) -> (TestNamespace, ControlPlane, Connector) {
    let ns = TestNamespace::new(prefix).await;
    install_crds(&ns.client).await;
    agent_with_pod(&ns).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("shell");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;
    (ns, cp, c)
}

#[tokio::test]
async fn attach_runs_a_shell_in_the_agents_pod_through_the_control_plane() {
    let (ns, cp, _c) = shell_session("up-attach").await;

    let (out, stdout, stderr) = shell_script(&cp, &ns.name);
    assert!(
        stdout.contains("exo-42"),
        "stdout: {stdout:?} stderr: {stderr:?}"
    );
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stderr.contains("session ended: exited: 0"), "{stderr}");

    // Audited on the control plane.
    let (_, audit) = cp.get("/api/v1/deployments/shell/audit");
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert!(actions.contains(&"attach.opened"), "{actions:?}");
    assert!(actions.contains(&"attach.closed"), "{actions:?}");

    // An agent without a pod: the operator's reason reaches the user.
    let out = attach_cmd(&cp, &ns.name, "missing", &["--no-tty"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Agent") && stderr.contains("missing"),
        "{stderr}"
    );
}

/// A real Agent, reconciled by a managed `exo operator run` into its pod of
/// two containers (`agentlet` first): `exo attach` without `-c` gets a
/// shell, in `runtime`, the container the pod's default-container
/// annotation names, as `kubectl exec` would pick. An error longer than a
/// close reason reaches the user whole.
#[tokio::test]
async fn attach_without_a_container_uses_the_agent_pods_default() {
    let ns = restricted_namespace("up-attach-default").await;
    let (cp, op) = managed_operator(&ns.name, "shell").await;
    create(&ns.api::<Agent>(), &agent("worker")).await;
    let pod = wait_pod(&ns.api::<Pod>(), "agent", "worker", "a Running pod", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    let names: Vec<_> = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["agentlet", "runtime"]);
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()[ANNOTATION_DEFAULT_CONTAINER],
        "runtime"
    );
    // The reconciler writes status.podName once the pod is Running; the
    // operator's attach reads it.
    wait_for(&ns.api::<Agent>(), "worker", "status.podName", |a| {
        a.status.as_ref().and_then(|s| s.pod_name.as_deref()) == pod.metadata.name.as_deref()
    })
    .await;

    let (out, stdout, stderr) = shell_script(&cp, &ns.name);
    assert!(
        out.status.success() && stdout.contains("exo-42"),
        "stdout: {stdout:?} stderr: {stderr:?}\noperator log: {}",
        support::fleet::tail(&op.log())
    );
    // Which container: the operator's audit record of the exec says.
    let (_, audit) = cp.get("/api/v1/deployments/shell/audit");
    let exec = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "attach.exec")
        .unwrap_or_else(|| panic!("no attach.exec record: {audit}"))
        .clone();
    assert_eq!(exec["source"], "operator", "{exec}");
    assert_eq!(exec["target"], format!("{}/worker", ns.name), "{exec}");
    assert_eq!(exec["detail"]["container"], "runtime", "{exec}");
    assert_eq!(
        exec["detail"]["pod"],
        pod.metadata.name.clone().unwrap(),
        "{exec}"
    );

    // A container the pod does not have: the API server's refusal, far
    // longer than a close reason, is printed whole.
    let out = attach_cmd(&cp, &ns.name, "worker", &["--no-tty", "-c", "sidecar"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ended = stderr
        .lines()
        .find_map(|l| l.strip_prefix("exo attach: session ended: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(ended.len() > wire::close::MAX_REASON_BYTES, "{ended}");
    assert!(
        ended.starts_with(&format!(
            "exec in Pod {}/{}: ",
            ns.name,
            pod.metadata.name.clone().unwrap()
        )) && ended.contains("container sidecar is not valid for pod")
            && !ended.contains(wire::close::ELLIPSIS),
        "{ended}"
    );
}

#[tokio::test]
async fn attach_is_refused_while_offline() {
    let cp = ControlPlane::start(&[]);
    cp.create_deployment("shell");
    let out = attach_cmd(&cp, "default", "worker", &["--no-tty"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("409") && stderr.contains("offline"),
        "{stderr}"
    );
}

#[tokio::test]
async fn attach_allocates_a_terminal_by_default() {
    let (ns, cp, _c) = shell_session("up-attach-tty").await;
    let mut child = attach_cmd(&cp, &ns.name, "worker", &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interactive: type `tty`, wait for its answer, then exit. (Typing
    // `exit` at once can lose the last output in kwok's PTY copy.)
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    stdin.write_all(b"tty\n").unwrap();
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains("/dev/pts/") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(b) => seen.push_str(&String::from_utf8_lossy(&b)),
            Err(e) => panic!("no terminal name ({e}); output so far: {seen:?}"),
        }
    }
    stdin.write_all(b"exit 0\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}

/// The last 2000 characters, for failure messages.
fn tail(s: &str) -> &str {
    let mut i = s.len().saturating_sub(2000);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// Runs `script` (util-linux) so that `exo attach` gets a real terminal: its
/// stdin is a PTY whose master this test writes to and reads from.
/// The shell's trap ends everything in its session (exo included) when the
/// terminal hangs up, so a failed test leaves nothing running.
fn in_a_terminal(shell: &str) -> Terminal {
    let shell = format!("trap 'kill 0' HUP TERM; {shell}");
    Terminal(
        std::process::Command::new("script")
            .args(["-qefc", &shell, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux is part of the test environment"),
    )
}

/// `script` killed on drop: its terminal hangs up, which ends the session.
struct Terminal(std::process::Child);

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn attach_on_a_terminal_goes_raw_forwards_its_size_and_restores_it() {
    let (ns, cp, _c) = shell_session("up-attach-raw").await;

    let exo_bin = env!("CARGO_BIN_EXE_exo");
    let dir = tempfile::tempdir().unwrap();
    let trigger = dir.path().join("resize");
    // The local terminal starts at 100x30 and becomes 120x40 when the test
    // creates `trigger` (the kernel then sends SIGWINCH to exo). After exo
    // exits the shell prints exo's status and the local terminal's modes.
    let shell = format!(
        "stty cols 100 rows 30; \
         (while [ ! -e {trigger} ]; do sleep 0.05; done; stty cols 120 rows 40 < /dev/tty) & \
         {exo_bin} attach worker -n {ns} --deployment shell --control-plane {base}; \
         echo \"EXIT:$?\"; \
         echo \"AFTER:$(stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo|isig)' | tr '\\n' ,)\"",
        trigger = trigger.display(),
        ns = ns.name,
        base = cp.base
    );
    let mut child = in_a_terminal(&shell);
    let mut stdin = child.0.stdin.take().unwrap();
    let mut stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    // Output after `from`, so that earlier matches do not count.
    let wait_for = |what: &str, from: usize, seen: &mut String| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !seen[from..].contains(what) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(b) => seen.push_str(&String::from_utf8_lossy(&b)),
                Err(e) => panic!("no {what:?} ({e}); output ends with: {:?}", tail(seen)),
            }
        }
        seen.len()
    };
    let mut type_ = |s: &str| {
        stdin.write_all(s.as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    // Raw mode: Enter is a CR, turned into a newline by the remote terminal.
    // `SI''ZE` in the echo of the typed line is not `SIZE` in the output. The
    // size reaches the remote terminal asynchronously (as with kubectl), so
    // ask until it shows.
    let mut at = 0;
    let mut remote_size = |want: &str, at: &mut usize, seen: &mut String| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let from = *at;
            type_("stty size; echo SI''ZE\r");
            *at = wait_for("SIZE", from, seen);
            if seen[from..].contains(want) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the remote terminal never reported {want:?}: {:?}",
                tail(seen)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    remote_size("30 100", &mut at, &mut seen);
    std::fs::write(&trigger, b"").unwrap();
    remote_size("40 120", &mut at, &mut seen);

    // Ctrl-D and Ctrl-C are bytes for the remote terminal, not a local EOF
    // or SIGINT: `cat` ends at the remote EOF and the shell prompts again;
    // the remote terminal echoes `^C` and the session goes on. The ^C is
    // typed at the prompt: whether it signals a `cat` running in kwok's
    // shell (no controlling terminal) depends on timing, and a `cat` it
    // killed would leave the ^D to end the shell.
    type_("cat\r");
    let at = wait_for("cat", at, &mut seen);
    type_("\x04");
    let at = wait_for("# ", at, &mut seen);
    type_("\x03");
    let at = wait_for("^C", at, &mut seen);
    type_("echo CA''UGHT\r");
    let at = wait_for("CAUGHT", at, &mut seen);
    type_("exit 0\r");
    wait_for("AFTER:", at, &mut seen);
    let after_at = seen.find("AFTER:").unwrap();
    wait_for("\n", after_at, &mut seen);
    drop(stdin);
    let _ = child.0.wait();
    assert!(
        seen.contains("session ended: exited: 0"),
        "{:?}",
        tail(&seen)
    );
    assert!(seen.contains("EXIT:0"), "{:?}", tail(&seen));
    let after = seen[after_at..].lines().next().unwrap_or_default();
    assert!(
        after.contains("icanon,") && after.contains("echo,") && after.contains("isig,"),
        "the terminal was not restored: {after:?} in {:?}",
        tail(&seen)
    );
    assert!(
        !after.contains("-icanon") && !after.contains("-echo,") && !after.contains("-isig"),
        "{after:?}"
    );
}
