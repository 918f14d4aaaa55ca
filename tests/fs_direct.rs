#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo fs` on the direct route (the kubeconfig's credentials, no control
//! plane), end to end against the real apiserver, the real operator and
//! kwok's exec over the volume's hostPath folder: every verb, every
//! refusal, the helper pod in a restricted namespace and its idle reaping.

mod support;

use std::path::Path;
use std::time::Duration;

use exo::crd::{Agent, AgentFS};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use support::eventually;
use support::fs::{bound, exo_fs, files_of, json, ok, refused, staging};
use support::operator::{OperatorProcess, active_agent_mounting, restricted_namespace, wait_for};

fn write_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha\n").unwrap();
    std::fs::write(
        root.join("sub/b.bin"),
        (0..=255u8).cycle().take(70_000).collect::<Vec<_>>(),
    )
    .unwrap();
    std::fs::write(root.join("sub/deeper/empty"), b"").unwrap();
}

#[tokio::test]
async fn direct_route_every_verb_and_refusal() {
    let ns = restricted_namespace("fs-direct").await;
    let n = ns.name.as_str();
    let op = OperatorProcess::start_with(n, "a", &["--fs-helper-idle", "3s"]);
    op.wait_leader().await;

    // create, list
    let created = json(&exo_fs(
        n,
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
    assert_eq!(created["name"], "data");
    refused(
        &exo_fs(n, &["create", "big", "--size", "3Gi", "--max-size", "2Gi"]),
        &["3Gi", "2Gi"],
    );
    refused(
        &exo_fs(
            n,
            &["create", "Bad_Name", "--size", "1Gi", "--max-size", "2Gi"],
        ),
        &["Bad_Name"],
    );
    let vol = bound(&ns, "data").await;
    let list = json(&exo_fs(n, &["list", "-o", "json"]));
    let item = &list["items"][0];
    assert_eq!(item["name"], "data");
    assert_eq!(item["pvc"], "agentfs-data");
    assert_eq!(item["provisioned"], "1Gi");
    // No backup policy: no raw backup fields, and `-` in both columns.
    assert!(
        item.get("backup").is_none() && item.get("backupStatus").is_none(),
        "{item}"
    );
    assert_eq!(item["generation"], 1, "{item}");
    let table = ok(&exo_fs(n, &["list"]));
    assert!(
        table.contains("MOUNTED-BY") && table.contains("agentfs-data"),
        "{table}"
    );
    let head: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.contains("agentfs-data"))
        .unwrap()
        .split_whitespace()
        .collect();
    let column = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    assert_eq!((column("BACKUP"), column("DRILL")), ("-", "-"), "{table}");

    // No agent mounts it: a helper pod, admitted in a restricted namespace.
    let ls = json(&exo_fs(n, &["ls", "data:/", "-o", "json"]));
    assert!(ls["pod"].as_str().unwrap().starts_with("exo-fs-"), "{ls}");
    assert!(
        ls["usage"]["total_bytes"].as_u64().unwrap() > 0,
        "usage from df: {ls}"
    );
    assert!(ls["usage"]["used_bytes"].as_u64().is_some());

    // mkdir (parents), touch, ls shows them with kinds
    ok(&exo_fs(n, &["mkdir", "data:/a/b"]));
    ok(&exo_fs(n, &["touch", "data:/a/b/x"]));
    assert!(vol.join("a/b/x").is_file());
    let ls = json(&exo_fs(n, &["ls", "data:/a", "-o", "json"]));
    assert_eq!(ls["entries"][0]["name"], "b");
    assert_eq!(ls["entries"][0]["kind"], "dir");
    refused(&exo_fs(n, &["ls", "data:/nope"]), &["/nope", "no such"]);
    refused(&exo_fs(n, &["ls", "data:/../etc"]), &[".."]);

    // cp a folder in, recursively, then out again; sha256 checked
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write_tree(&tree);
    let up = json(&exo_fs(
        n,
        &["cp", tree.to_str().unwrap(), "data:/in", "-o", "json"],
    ));
    assert_eq!(up["files"], 3);
    assert_eq!(up["path"], "/in");
    assert_eq!(files_of(&vol.join("in")), files_of(&tree));
    // Into an existing folder: under its own name, as cp does.
    ok(&exo_fs(
        n,
        &["cp", tree.join("a.txt").to_str().unwrap(), "data:/in/sub"],
    ));
    assert_eq!(std::fs::read(vol.join("in/sub/a.txt")).unwrap(), b"alpha\n");
    std::fs::remove_file(vol.join("in/sub/a.txt")).unwrap();
    let out = tmp.path().join("out");
    let down = json(&exo_fs(
        n,
        &["cp", "data:/in", out.to_str().unwrap(), "-o", "json"],
    ));
    // The digest covers paths, and the top name differs (tree vs in).
    assert_eq!(down["files"], up["files"]);
    assert_eq!(files_of(&out), files_of(&tree));
    assert!(staging(tmp.path()).is_empty() && staging(&vol).is_empty());

    // Refusals of cp, both ways.
    refused(
        &exo_fs(n, &["cp", tree.to_str().unwrap(), "data:/../x"]),
        &[".."],
    );
    std::os::unix::fs::symlink("/etc/passwd", tree.join("sub/link")).unwrap();
    refused(
        &exo_fs(n, &["cp", tree.to_str().unwrap(), "data:/in2"]),
        &["link", "symbolic"],
    );
    assert!(!vol.join("in2").exists());
    std::fs::remove_file(tree.join("sub/link")).unwrap();
    refused(
        &exo_fs(
            n,
            &[
                "cp",
                tree.to_str().unwrap(),
                "data:/in3",
                "--max-size",
                "1Ki",
            ],
        ),
        &["limit"],
    );
    assert!(!vol.join("in3").exists());
    // Out of the volume: a source path escaping it, and a copy over the limit.
    let out3 = tmp.path().join("out3");
    refused(
        &exo_fs(n, &["cp", "data:/in/../../etc", out3.to_str().unwrap()]),
        &[".."],
    );
    refused(
        &exo_fs(
            n,
            &[
                "cp",
                "data:/in",
                out3.to_str().unwrap(),
                "--max-size",
                "1Ki",
            ],
        ),
        &["limit"],
    );
    assert!(!out3.exists() && staging(tmp.path()).is_empty());
    // A symlink planted in the volume: not followed by ls, refused in the stream.
    std::os::unix::fs::symlink("/etc", vol.join("in/evil")).unwrap();
    refused(&exo_fs(n, &["ls", "data:/in/evil"]), &["symbolic link"]);
    let out2 = tmp.path().join("out2");
    refused(
        &exo_fs(n, &["cp", "data:/in", out2.to_str().unwrap()]),
        &["evil", "symbolic"],
    );
    assert!(!out2.exists(), "nothing under the final name");
    assert!(staging(tmp.path()).is_empty(), "no staging folder left");
    std::fs::remove_file(vol.join("in/evil")).unwrap();

    // resize: grow-only, capped, both sizes named
    refused(
        &exo_fs(n, &["resize", "data", "--size", "3Gi"]),
        &["3Gi", "2Gi"],
    );
    refused(
        &exo_fs(n, &["resize", "data", "--size", "500Mi"]),
        &["500Mi", "1Gi", "grow-only"],
    );
    let grown = json(&exo_fs(
        n,
        &["resize", "data", "--size", "2Gi", "-o", "json"],
    ));
    assert_eq!(grown["size"], "2Gi");

    // The helper goes once idle (3 s here).
    let pods = ns.api::<Pod>();
    eventually(
        "the idle helper pod to be deleted",
        Duration::from_secs(60),
        || async {
            let l = pods
                .list(&ListParams::default().labels("autonomic.sh/fs-helper"))
                .await
                .ok()?;
            l.items.is_empty().then_some(())
        },
    )
    .await;

    // Mounted by an agent: ls runs in the agent's pod; delete is refused
    // naming the agent; detached, it goes.
    active_agent_mounting(&ns, "worker", "data").await;
    wait_for(&ns.api::<AgentFS>(), "data", "mountedBy worker", |f| {
        f.status
            .as_ref()
            .is_some_and(|s| s.mounted_by == ["worker"])
    })
    .await;
    let ls = eventually(
        "ls through the agent's pod",
        Duration::from_secs(30),
        || async {
            let o = exo_fs(n, &["ls", "data:/in", "-o", "json"]);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
            v["pod"]
                .as_str()
                .is_some_and(|p| p.starts_with("agent-worker"))
                .then_some(v)
        },
    )
    .await;
    assert_eq!(ls["entries"].as_array().unwrap().len(), 2, "{ls}");
    refused(&exo_fs(n, &["delete", "data"]), &["worker", "detach"]);
    ns.api::<Agent>()
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"filesystems": []}})),
        )
        .await
        .unwrap();
    wait_for(&ns.api::<AgentFS>(), "data", "mountedBy empty", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.is_empty())
    })
    .await;
    ok(&exo_fs(n, &["delete", "data"]));
    refused(&exo_fs(n, &["ls", "data:/"]), &["not found"]);

    // retain: the volume outlives its AgentFS and the list shows it as
    // reclaimable, with its PVC and its data.
    ok(&exo_fs(
        n,
        &[
            "create",
            "keep",
            "--size",
            "1Gi",
            "--max-size",
            "1Gi",
            "--retain",
        ],
    ));
    let kept = bound(&ns, "keep").await;
    ok(&exo_fs(n, &["touch", "keep:/precious"]));
    let deleted = json(&exo_fs(n, &["delete", "keep", "-o", "json"]));
    assert_eq!(deleted["retain"], true, "{deleted}");
    let retained = eventually(
        "the retained volume in the list",
        Duration::from_secs(30),
        || async {
            let list = json(&exo_fs(n, &["list", "-o", "json"]));
            list["items"]
                .as_array()?
                .iter()
                .find(|i| i["name"] == "keep" && i["phase"] == "Retained")
                .cloned()
        },
    )
    .await;
    assert_eq!(retained["pvc"], "agentfs-keep", "{retained}");
    assert!(ok(&exo_fs(n, &["list"])).contains("Retained"));
    assert!(kept.join("precious").is_file(), "the data is still there");
}
