#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The health monitors against the real apiserver, kwok and a real
//! `exo operator run` (short thresholds through the `--monitor-*` flags):
//! crash-looping pods of an Agent and a Tool (the test environment's kwok
//! stage, driven by the pod annotation `exo.test/crashloop: "true"`, then "false") raise
//! `crashloop` and the tenant's `restarts` (metrics, Events, upstream
//! alerts through a real control plane), and all clear once they stop; an Agent that checks
//! in at `POST /checkin/<ns>/<agent>` stays out of `silent`, one that does
//! not goes silent; the endpoint answers one 401 to every refusal.

mod support;
mod upstream_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use exo::crd::{Agent, AgentPhase, CrashloopMonitor, Fleet, FleetSpec, Monitors, Tool, ToolPhase};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::Value;
use support::eventually;
use support::operator::{
    OperatorProcess, agent, create, pod_name, restricted_namespace, tool, wait_for,
};
use upstream_support::ControlPlane;

const CRASHLOOP: &str = "exo.test/crashloop";

/// `exo_operator_monitor_active{monitor, namespace}`, if it was ever set.
fn gauge(op: &OperatorProcess, monitor: &str, ns: &str) -> Option<i64> {
    let (_, body) = op.get("/metrics")?;
    let want = format!("exo_operator_monitor_active{{monitor=\"{monitor}\",namespace=\"{ns}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
}

async fn until_gauge(op: &OperatorProcess, monitor: &str, ns: &str, want: i64, timeout: u64) {
    eventually(
        &format!("{monitor} gauge in {ns} to be {want}"),
        Duration::from_secs(timeout),
        || async { (gauge(op, monitor, ns) == Some(want)).then_some(()) },
    )
    .await;
}

/// The Events with `reason` about the `kind` object `name`.
async fn events(ns: &support::TestNamespace, reason: &str, kind: &str, name: &str) -> Vec<Event> {
    support::events(&ns.name, reason)
        .await
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect()
}

async fn until_event(ns: &support::TestNamespace, reason: &str, kind: &str, name: &str) -> Event {
    eventually(
        &format!("a {reason} Event on {kind} {name}"),
        Duration::from_secs(40),
        || async { events(ns, reason, kind, name).await.into_iter().next() },
    )
    .await
}

async fn set_crashloop(pods: &Api<Pod>, pod: &str, on: bool) {
    // "false", not removed: the stop stage acts only on pods that ask.
    let value = Value::from(if on { "true" } else { "false" });
    pods.patch(
        pod,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {CRASHLOOP: value}}})),
    )
    .await
    .expect("annotate the pod");
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum()
}

/// The alerts the control plane stored for a deployment (newest first).
fn listed(cp: &ControlPlane, dep: &str) -> Vec<Value> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{dep}/alerts"));
    assert_eq!(status, 200, "{v}");
    v["alerts"].as_array().cloned().unwrap_or_default()
}

fn alerts_about(cp: &ControlPlane, dep: &str, reason: &str, object: &str) -> Vec<Value> {
    listed(cp, dep)
        .into_iter()
        .filter(|a| a["reason"] == reason && a["object"] == object)
        .collect()
}

#[tokio::test]
async fn a_crash_looping_pod_raises_crashloop_and_it_clears_when_it_stops() {
    let ns = restricted_namespace("mon-crash").await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("monitors");
    let op = OperatorProcess::start_managed(
        &ns.name,
        "m",
        &[
            "--monitor-interval",
            "1s",
            "--monitor-crashloop-restarts",
            "3",
            "--monitor-crashloop-window",
            "8s",
            "--monitor-restarts",
            "6",
            "--monitor-restarts-window",
            "8s",
        ],
        &cp.base,
        &token,
    );
    let agents = ns.api::<Agent>();
    let tools = ns.api::<Tool>();
    let pods = ns.api::<Pod>();
    create(&agents, &agent("looper")).await;
    create(&agents, &agent("steady")).await;
    create(&tools, &tool("tooler", true)).await;
    for name in ["looper", "steady"] {
        wait_for(&agents, name, "Active", |a| {
            a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
        })
        .await;
    }
    wait_for(&tools, "tooler", "Ready", |t| {
        t.status.as_ref().and_then(|s| s.phase) == Some(ToolPhase::Ready)
    })
    .await;
    let looper = pod_name(&pods, "agent", "looper").await;
    let tooler = pod_name(&pods, "tool", "tooler").await;
    let steady = pod_name(&pods, "agent", "steady").await;
    // Healthy: the monitors have looked, nothing fires.
    eventually(
        "the monitors to report",
        Duration::from_secs(30),
        || async { op.log().contains("health monitors started").then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(gauge(&op, "crashloop", &ns.name), None, "{}", op.log());

    // The kwok stage restarts the containers of the annotated pods once a
    // second.
    set_crashloop(&pods, &looper, true).await;
    set_crashloop(&pods, &tooler, true).await;
    eventually(
        "kwok to restart the annotated pod's containers",
        Duration::from_secs(30),
        || async { (restarts(&pods.get(&looper).await.ok()?) >= 2).then_some(()) },
    )
    .await;
    until_gauge(&op, "crashloop", &ns.name, 2, 30).await;
    until_gauge(&op, "restarts", &ns.name, 1, 30).await;
    let fired = until_event(&ns, "CrashLoop", "Agent", "looper").await;
    assert_eq!(fired.type_.as_deref(), Some("Warning"));
    assert!(
        fired.note.as_deref().unwrap_or("").contains("Agent/looper"),
        "{fired:?}"
    );
    until_event(&ns, "CrashLoop", "Tool", "tooler").await;
    // The Agent next to them did not restart: nothing about it.
    assert!(events(&ns, "CrashLoop", "Agent", "steady").await.is_empty());
    assert_eq!(restarts(&pods.get(&steady).await.unwrap()), 0);
    // Firing is reported once, not at every tick.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(events(&ns, "CrashLoop", "Agent", "looper").await.len(), 1);
    let up = eventually(
        "the crashloop alert upstream",
        Duration::from_secs(30),
        || async {
            let a = alerts_about(&cp, "monitors", "CrashLoop", "Agent/looper");
            (!a.is_empty()).then_some(a)
        },
    )
    .await;
    assert_eq!(up.len(), 1, "sent once while it holds: {up:?}");
    assert_eq!(up[0]["namespace"], ns.name.as_str());
    assert_eq!(up[0]["severity"], "warning");

    // It stops: after a whole quiet window everything clears.
    set_crashloop(&pods, &looper, false).await;
    set_crashloop(&pods, &tooler, false).await;
    until_gauge(&op, "crashloop", &ns.name, 0, 40).await;
    until_gauge(&op, "restarts", &ns.name, 0, 40).await;
    let cleared = until_event(&ns, "CrashLoopCleared", "Agent", "looper").await;
    assert_eq!(cleared.type_.as_deref(), Some("Normal"));
    until_event(&ns, "CrashLoopCleared", "Tool", "tooler").await;
    assert!(
        events(&ns, "CrashLoopCleared", "Agent", "steady")
            .await
            .is_empty()
    );
    let up = eventually(
        "the resolved alert upstream",
        Duration::from_secs(30),
        || async {
            let a = alerts_about(&cp, "monitors", "CrashLoop", "Agent/looper");
            (a.len() >= 2).then_some(a)
        },
    )
    .await;
    // Newest first: the resolution, then the firing one.
    assert_eq!(up.len(), 2, "{up:?}");
    assert_eq!(up[0]["message"], "cleared", "{up:?}");
    let tenant = alerts_about(
        &cp,
        "monitors",
        "RestartRate",
        &format!("Namespace/{}", ns.name),
    );
    assert!(!tenant.is_empty(), "{:?}", listed(&cp, "monitors"));
    wait_for(&agents, "looper", "Active again", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
}

/// The thresholds in force, as the operator last logged them.
fn thresholds_logged(op: &OperatorProcess) -> Option<String> {
    op.log()
        .lines()
        .rfind(|l| l.contains("monitor thresholds"))
        .map(str::to_owned)
}

/// A Fleet's `spec.monitors` is read from the operator's one Fleet watch:
/// a change to it is in force at the next look (`--monitor-interval`), not
/// after a list on a timer, and a flag still wins over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleets_monitor_thresholds_apply_at_the_next_look() {
    let ns = restricted_namespace("mon-fleet").await;
    let op = OperatorProcess::start_with(
        &ns.name,
        "m",
        &["--monitor-interval", "1s", "--monitor-silent-after", "77s"],
    );
    let fleets = ns.api::<Fleet>();
    let mut fleet = Fleet::new(
        "fleet",
        FleetSpec {
            url: "git://127.0.0.1:1/none.git".into(),
            allow_insecure: true,
            // Nothing to sync: only its monitors are read.
            suspend: true,
            monitors: Monitors {
                crashloop: CrashloopMonitor {
                    restarts: 7,
                    ..CrashloopMonitor::default()
                },
                ..Monitors::default()
            },
            ..FleetSpec::default()
        },
    );
    fleet.metadata.namespace = Some(ns.name.clone());
    fleets
        .create(&PostParams::default(), &fleet)
        .await
        .expect("create Fleet");
    let logged = |want: &'static str| {
        let op = &op;
        move || async move { thresholds_logged(op).filter(|l| l.contains(want)) }
    };
    let line = eventually(
        "the Fleet's crashloop threshold (7 restarts) in force",
        Duration::from_secs(30),
        logged("restarts: 7,"),
    )
    .await;
    assert!(line.contains("77s"), "the flag wins over the Fleet: {line}");
    let patch = serde_json::json!({"spec": {"monitors": {"crashloop": {"restarts": 9}}}});
    fleets
        .patch("fleet", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch Fleet");
    // Looked at once a second: well inside this wait, which a 30 s
    // re-list would not be.
    let line = eventually(
        "the changed threshold (9 restarts) in force",
        Duration::from_secs(10),
        logged("restarts: 9,"),
    )
    .await;
    assert!(line.contains("77s"), "{line}");
}

/// `POST path` over HTTP/1.0 with an optional bearer token: (status, body).
fn post(addr: &str, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the operator");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn token_of(ns: &support::TestNamespace, agent: &str) -> String {
    let s = ns
        .api::<Secret>()
        .get(&format!("agent-token-{agent}"))
        .await
        .unwrap();
    String::from_utf8(s.data.unwrap()["token"].0.clone()).unwrap()
}

#[tokio::test]
async fn check_ins_keep_an_agent_out_of_silent_and_refusals_look_alike() {
    let ns = restricted_namespace("mon-silent").await;
    let flags = ["--monitor-interval", "1s", "--monitor-silent-after", "6s"];
    let op = OperatorProcess::start_with(&ns.name, "leader", &flags);
    op.wait_leader().await;
    // A second replica: it answers check-ins too, but runs no monitor.
    let standby = OperatorProcess::start_with(&ns.name, "standby", &flags);
    standby.wait_ready().await;
    let agents = ns.api::<Agent>();
    create(&agents, &agent("talker")).await;
    create(&agents, &agent("mute")).await;
    for name in ["talker", "mute"] {
        wait_for(&agents, name, "Active", |a| {
            a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
        })
        .await;
    }
    let talker = token_of(&ns, "talker").await;
    let mute = token_of(&ns, "mute").await;
    let path = |a: &str| format!("/checkin/{}/{a}", ns.name);
    let addr = op.addr.clone();

    // Every refusal is the same 401: no header, a wrong token, another
    // agent's token, an agent that does not exist.
    let refusals = [
        post(&addr, "POST", &path("talker"), None),
        post(&addr, "POST", &path("talker"), Some("not-the-token")),
        post(&addr, "POST", &path("talker"), Some(&mute)),
        post(&addr, "POST", &path("ghost"), Some(&talker)),
    ];
    for (i, r) in refusals.iter().enumerate() {
        assert_eq!(r, &refusals[0], "refusal {i}");
    }
    assert_eq!(refusals[0].0, 401);
    assert_eq!(post(&addr, "GET", &path("talker"), Some(&talker)).0, 405);
    assert_eq!(post(&addr, "POST", &path("talker"), Some(&talker)).0, 204);
    assert_eq!(post(&addr, "POST", &path("mute"), Some(&mute)).0, 204);

    // The talker keeps checking in, at the standby only: the leader learns
    // of it from the Agent's annotation. The mute agent stops.
    let stop = Arc::new(AtomicBool::new(false));
    let beat = {
        let (stop, addr, p, token) = (
            stop.clone(),
            standby.addr.clone(),
            path("talker"),
            talker.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(post(&addr, "POST", &p, Some(&token)).0, 204);
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    until_gauge(&op, "silent", &ns.name, 1, 40).await;
    let fired = until_event(&ns, "AgentSilent", "Agent", "mute").await;
    assert_eq!(fired.type_.as_deref(), Some("Warning"));
    // The check-in time reached the Agent, for whichever replica leads.
    let a = agents.get("talker").await.unwrap();
    let stamp = a.metadata.annotations.unwrap_or_default();
    assert!(stamp.contains_key("autonomic.sh/last-checkin"), "{stamp:?}");

    // One check-in clears it.
    assert_eq!(post(&addr, "POST", &path("mute"), Some(&mute)).0, 204);
    let cleared = until_event(&ns, "AgentSilentCleared", "Agent", "mute").await;
    assert_eq!(cleared.type_.as_deref(), Some("Normal"));
    stop.store(true, Ordering::Relaxed);
    beat.join().expect("the talker's check-ins all succeeded");
    assert!(
        events(&ns, "AgentSilent", "Agent", "talker")
            .await
            .is_empty()
    );
    assert_eq!(
        gauge(&standby, "silent", &ns.name),
        None,
        "only the leader monitors"
    );
    for log in [op.log(), standby.log()] {
        for t in [&talker, &mute] {
            assert!(!log.contains(t.as_str()), "a token reached the log");
        }
    }
    let accepted = op
        .get("/metrics")
        .unwrap()
        .1
        .lines()
        .any(|l| l.starts_with("exo_operator_checkins_total{outcome=\"accepted\"}"));
    assert!(accepted);
}
