#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo fs` through the control plane: CLI -> `exo control-plane serve` ->
//! the operator's upstream WebSocket -> the real apiserver -> kwok's exec
//! over the volume's hostPath folder. Every verb; offline and
//! capability refusals; 100 MiB both ways on both routes, checked by hash;
//! a copy killed halfway leaves nothing under its final name.

mod support;
mod upstream_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use exo::crd::AgentFS;
use support::fs::{json, ok, refused, staging};
use support::operator::{OperatorProcess, restricted_namespace, volume_folder, wait_for};
use support::{env, eventually};
use upstream_support::{ControlPlane, managed_operator, python_client};

struct Routes {
    ns: String,
    base: String,
}

impl Routes {
    fn cmd(&self, deployment: Option<&str>, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_exo"));
        c.arg("fs").args(args).args(["-n", &self.ns]);
        c.env("KUBECONFIG", &env().kubeconfig)
            .env_remove("EXO_DEPLOYMENT")
            .env("EXO_CONTROL_PLANE", &self.base);
        if let Some(d) = deployment {
            c.args(["--deployment", d]);
        }
        c
    }

    fn run(&self, deployment: Option<&str>, args: &[&str]) -> Output {
        self.cmd(deployment, args).output().expect("run exo fs")
    }
}

fn sha256_file(p: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(p).unwrap()))
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

/// A control plane, a deployment whose operator is connected, an AgentFS.
async fn setup(
    prefix: &str,
) -> (
    support::TestNamespace,
    ControlPlane,
    OperatorProcess,
    PathBuf,
) {
    let ns = restricted_namespace(prefix).await;
    let (cp, op) = managed_operator(&ns.name, "prod").await;
    let routes = Routes {
        ns: ns.name.clone(),
        base: cp.base.clone(),
    };
    json(&routes.run(
        Some("prod"),
        &[
            "create",
            "data",
            "--size",
            "1Gi",
            "--max-size",
            "2Gi",
            "-o",
            "json",
        ],
    ));
    wait_for(&ns.api::<AgentFS>(), "data", "Bound", |f| {
        f.status
            .as_ref()
            .and_then(|s| s.provisioned.clone())
            .is_some()
    })
    .await;
    let vol = volume_folder(&ns, "agentfs-data").await;
    (ns, cp, op, vol)
}

#[tokio::test]
async fn control_plane_route_every_verb_and_refusal() {
    let (ns, cp, _op, vol) = setup("fs-plane").await;
    let r = Routes {
        ns: ns.name.clone(),
        base: cp.base.clone(),
    };
    let p = Some("prod");

    let list = json(&r.run(p, &["list", "-o", "json"]));
    assert_eq!(list["items"][0]["pvc"], "agentfs-data");
    // The control plane's URL as a flag after the verb, as the help shows.
    let mut flagged = r.cmd(p, &["list", "-o", "json", "--control-plane", &cp.base]);
    flagged.env_remove("EXO_CONTROL_PLANE");
    assert_eq!(json(&flagged.output().unwrap())["items"][0]["name"], "data");
    assert_eq!(list["items"][0]["provisioned"], "1Gi");
    ok(&r.run(p, &["mkdir", "data:/docs/x"]));
    ok(&r.run(p, &["touch", "data:/docs/x/readme"]));
    assert!(vol.join("docs/x/readme").is_file());
    let ls = json(&r.run(p, &["ls", "data:/docs", "-o", "json"]));
    assert_eq!(ls["entries"][0]["name"], "x");
    assert!(ls["usage"]["total_bytes"].as_u64().unwrap() > 0);
    assert!(ok(&r.run(p, &["ls", "data:/docs/x"])).contains("readme"));

    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("n")).unwrap();
    std::fs::write(tree.join("n/one"), b"1").unwrap();
    std::fs::write(tree.join("two"), vec![7u8; 300_000]).unwrap();
    let up = json(&r.run(p, &["cp", tree.to_str().unwrap(), "data:/t", "-o", "json"]));
    assert_eq!(up["files"], 2);
    assert_eq!(
        std::fs::read(vol.join("t/two")).unwrap(),
        vec![7u8; 300_000]
    );
    let back = tmp.path().join("back");
    let down = json(&r.run(p, &["cp", "data:/t", back.to_str().unwrap(), "-o", "json"]));
    assert_eq!(down["files"], up["files"]);
    assert_eq!(std::fs::read(back.join("n/one")).unwrap(), b"1");

    // Refusals travel back through the control plane unchanged.
    refused(
        &r.run(p, &["cp", tree.to_str().unwrap(), "data:/a/../../x"]),
        &[".."],
    );
    std::os::unix::fs::symlink("/etc", vol.join("t/evil")).unwrap();
    let out2 = tmp.path().join("out2");
    refused(
        &r.run(p, &["cp", "data:/t", out2.to_str().unwrap()]),
        &["evil", "symbolic"],
    );
    assert!(!out2.exists());
    std::fs::remove_file(vol.join("t/evil")).unwrap();
    refused(
        &r.run(
            p,
            &[
                "cp",
                tree.to_str().unwrap(),
                "data:/t3",
                "--max-size",
                "1000",
            ],
        ),
        &["limit"],
    );
    assert!(!vol.join("t3").exists());
    refused(
        &r.run(p, &["resize", "data", "--size", "5Gi"]),
        &["5Gi", "2Gi"],
    );
    refused(
        &r.run(p, &["resize", "data", "--size", "1Mi"]),
        &["1Mi", "1Gi"],
    );
    assert_eq!(
        json(&r.run(p, &["resize", "data", "--size", "2Gi", "-o", "json"]))["size"],
        "2Gi"
    );

    // Audited on the control plane.
    let (_, audit) = cp.get("/api/v1/deployments/prod/audit");
    let text = audit.to_string();
    assert!(
        text.contains("fs.agentfs_write") && text.contains("fs.agentfs_read"),
        "{text}"
    );

    // Offline deployment; an operator without the capability.
    cp.create_deployment("offline");
    refused(&r.run(Some("offline"), &["list"]), &["offline"]);
    let old = cp.create_deployment("old");
    let mut py = python_client(&cp.base, &old, "register")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(py.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("READY"), "{line}");
    }
    refused(
        &r.run(Some("old"), &["ls", "data:/"]),
        &["mount-filesystems"],
    );
    let (status, _) = cp.post(
        "/api/v1/deployments/old/commands",
        &serde_json::json!({"command": {"name": "agentfs_list"}}),
    );
    assert_eq!(status, 409);
    let _ = py.kill();
    let _ = py.wait();

    // Delete goes through (nothing mounts it).
    ok(&r.run(p, &["delete", "data"]));
}

/// A 100 MiB file both ways on both routes, by hash; then each route's
/// upload and download killed halfway.
#[tokio::test]
async fn hundred_mib_both_ways_both_routes_and_killed_halfway() {
    let (ns, cp, _op, vol) = setup("fs-big").await;
    let r = Routes {
        ns: ns.name.clone(),
        base: cp.base.clone(),
    };
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.bin");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big).unwrap();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut buf = vec![0u8; 1 << 20];
        for _ in 0..100 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            f.write_all(&buf).unwrap();
        }
    }
    let want = sha256_file(&big);
    for (route, dep) in [("direct", None), ("plane", Some("prod"))] {
        let dest = format!("data:/{route}.bin");
        ok(&r.run(dep, &["cp", big.to_str().unwrap(), &dest]));
        assert_eq!(
            sha256_file(&vol.join(format!("{route}.bin"))),
            want,
            "{route} upload"
        );
        let local = tmp.path().join(format!("{route}-back.bin"));
        ok(&r.run(dep, &["cp", &dest, local.to_str().unwrap()]));
        assert_eq!(sha256_file(&local), want, "{route} download");
    }

    for (route, dep) in [("direct", None), ("plane", Some("prod"))] {
        // Upload killed once bytes are staged in the volume.
        let dest = format!("data:/killed-{route}.bin");
        let mut child = r
            .cmd(dep, &["cp", big.to_str().unwrap(), &dest])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        eventually(
            &format!("{route}: bytes staged"),
            Duration::from_secs(60),
            || async { staging(&vol).iter().any(|s| dir_bytes(s) > 0).then_some(()) },
        )
        .await;
        child.kill().unwrap();
        let _ = child.wait();
        assert!(
            !vol.join(format!("killed-{route}.bin")).exists(),
            "{route}: no file under the final name"
        );
        // The staging folder goes too (the pod's tar sees the stream end,
        // or the operator aborts the copy).
        eventually(
            &format!("{route}: staging removed"),
            Duration::from_secs(90),
            || async { staging(&vol).is_empty().then_some(()) },
        )
        .await;
        assert!(!vol.join(format!("killed-{route}.bin")).exists());

        // Download killed halfway: nothing under the final local name.
        let local = tmp.path().join(format!("killed-{route}-back.bin"));
        let mut child = r
            .cmd(
                dep,
                &["cp", &format!("data:/{route}.bin"), local.to_str().unwrap()],
            )
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        eventually(
            &format!("{route}: bytes arriving"),
            Duration::from_secs(60),
            || async {
                staging(tmp.path())
                    .iter()
                    .any(|s| dir_bytes(s) > 0)
                    .then_some(())
            },
        )
        .await;
        child.kill().unwrap();
        let _ = child.wait();
        assert!(
            !local.exists(),
            "{route}: nothing under the final local name"
        );
        for s in staging(tmp.path()) {
            std::fs::remove_dir_all(s).unwrap();
        }
    }
}
