//! `exo fs backups NAME`: the backups in NAME's repository, newest first
//! (`backup::select::list`): time, digest, files, bytes, tree hash, and
//! the result of the last restore drill for the backup it restored
//! (`status.backup.lastDrill`). Direct route only: it reads NAME's policy
//! and Secret with the kubeconfig's credentials. `exo fs backups app/NAME
//! --workspace|--database`: one volume of an App, from its repository
//! (`<repository>/workspace|database`).

use kube::Client;
use kube::api::Api;

use crate::agentfs::apps::APP_PREFIX;
use crate::agentfs::helper::get_fs;
use crate::backup::access::{self, app_volume_policy};
use crate::backup::select::{self, Listed};
use crate::cli::fs_show::human;
use crate::cli::table;
use crate::crd::{App, AppVolumeKind, DrillRecord};

/// What the listing says of a backup's drill (pure): `passed`,
/// `failed: …`, or `-` when the last drill restored another backup.
pub fn drill_cell(digest: &str, last: Option<&DrillRecord>) -> String {
    match last.filter(|d| d.digest == digest) {
        Some(d) if d.passed => "passed".into(),
        Some(d) => format!("failed: {}", d.message.as_deref().unwrap_or("no message")),
        None => "-".into(),
    }
}

/// Which volume's backups `exo fs backups` lists (pure): an AgentFS
/// takes neither flag; `app/NAME` takes exactly one of `--workspace`,
/// `--database`.
pub fn which(
    name: &str,
    workspace: bool,
    database: bool,
) -> Result<(String, Option<AppVolumeKind>), String> {
    match (name.strip_prefix(APP_PREFIX), workspace, database) {
        (Some(""), _, _) => Err("app/: name the App, e.g. app/shop".into()),
        (Some(app), true, false) => Ok((app.to_owned(), Some(AppVolumeKind::Workspace))),
        (Some(app), false, true) => Ok((app.to_owned(), Some(AppVolumeKind::Database))),
        (Some(_), _, _) => Err(format!(
            "{name}: an App has two volumes, each with its own backups: name one, --workspace or --database"
        )),
        (None, false, false) => Ok((name.to_owned(), None)),
        (None, _, _) => Err(format!(
            "--workspace and --database name an App's volume: name it app/{name}"
        )),
    }
}

/// The backups of AgentFS `name`, or of App `name`'s volume `volume`.
pub async fn list(
    client: &Client,
    namespace: &str,
    name: &str,
    volume: Option<AppVolumeKind>,
) -> Result<serde_json::Value, String> {
    let (policy, last, what) = match volume {
        None => {
            let fs = get_fs(client, namespace, name)
                .await
                .map_err(|e| e.to_string())?;
            let policy = fs.spec.backup.clone().ok_or_else(|| {
                format!("AgentFS {namespace}/{name} has no spec.backup: it has no backups")
            })?;
            let last = fs
                .status
                .as_ref()
                .and_then(|s| s.backup.as_ref())
                .and_then(|b| b.last_drill.clone());
            (
                policy,
                last,
                format!("the backups of AgentFS {namespace}/{name}"),
            )
        }
        Some(kind) => {
            let app = Api::<App>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| format!("get App {namespace}/{name}: {e}"))?
                .ok_or_else(|| format!("App {namespace}/{name} not found"))?;
            let policy = app.spec.backup.as_ref().ok_or_else(|| {
                format!("App {namespace}/{name} has no spec.backup: it has no backups")
            })?;
            if kind == AppVolumeKind::Database && app.spec.database.is_none() {
                return Err(format!("App {namespace}/{name} has no database volume"));
            }
            let last = app
                .status
                .as_ref()
                .and_then(|s| s.backup.as_ref())
                .and_then(|b| b.volume(kind))
                .and_then(|b| b.last_drill.clone());
            let what = format!("the backups of App {namespace}/{name}'s {kind} volume");
            (app_volume_policy(policy, kind), last, what)
        }
    };
    let repo = access::open(client, namespace, &policy)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    let listed = select::list(&repo)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    let rows: Vec<serde_json::Value> = listed
        .iter()
        .map(|l| {
            let mut v = serde_json::to_value(l).unwrap_or_default();
            v["drill"] = match last.as_ref().filter(|d| d.digest == l.digest) {
                Some(d) => serde_json::to_value(d).unwrap_or_default(),
                None => serde_json::Value::Null,
            };
            v["drillResult"] = drill_cell(&l.digest, last.as_ref()).into();
            v
        })
        .collect();
    let mut out = serde_json::json!({
        "namespace": namespace,
        "name": name,
        "repository": repo.name(),
        "backups": rows,
    });
    if let Some(kind) = volume {
        out["volume"] = kind.as_str().into();
    }
    Ok(out)
}

const HEAD: [&str; 7] = [
    "TIME",
    "DIGEST",
    "FILES",
    "BYTES",
    "TREE-HASH",
    "DRILL",
    "PROBLEM",
];

/// The table output.
pub fn show(v: &serde_json::Value) -> String {
    let Some(items) = v["backups"].as_array() else {
        return format!("{v}\n");
    };
    if items.is_empty() {
        return format!(
            "no backups in {}\n",
            v["repository"].as_str().unwrap_or_default()
        );
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .filter_map(|i| {
            let l: Listed = serde_json::from_value(i.clone()).ok()?;
            Some(vec![
                l.created,
                l.digest,
                l.files.to_string(),
                human(l.file_bytes),
                l.tree_hash,
                i["drillResult"].as_str().unwrap_or("-").to_owned(),
                l.problem.unwrap_or_default(),
            ])
        })
        .collect();
    table::render_trimmed(&HEAD, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drill(digest: &str, passed: bool) -> DrillRecord {
        DrillRecord {
            time: "t".into(),
            digest: digest.into(),
            passed,
            message: (!passed).then(|| "restored file \"vol/a\" differs".into()),
            last_passed: None,
        }
    }

    #[test]
    fn an_app_names_one_volume_an_agentfs_none() {
        assert_eq!(which("work", false, false), Ok(("work".into(), None)));
        assert_eq!(
            which("app/shop", false, true),
            Ok(("shop".into(), Some(AppVolumeKind::Database)))
        );
        assert_eq!(
            which("app/shop", true, false),
            Ok(("shop".into(), Some(AppVolumeKind::Workspace)))
        );
        for (name, ws, db, says) in [
            ("app/shop", false, false, "--workspace or --database"),
            ("app/shop", true, true, "--workspace or --database"),
            ("app/", true, false, "name the App"),
            ("work", true, false, "name it app/work"),
        ] {
            let e = which(name, ws, db).unwrap_err();
            assert!(e.contains(says), "{name} {ws} {db}: {e}");
        }
    }

    #[test]
    fn a_backup_shows_the_drill_that_restored_it() {
        assert_eq!(
            drill_cell("sha256:a", Some(&drill("sha256:a", true))),
            "passed"
        );
        assert_eq!(
            drill_cell("sha256:a", Some(&drill("sha256:a", false))),
            "failed: restored file \"vol/a\" differs"
        );
        assert_eq!(drill_cell("sha256:b", Some(&drill("sha256:a", true))), "-");
        assert_eq!(drill_cell("sha256:b", None), "-");
    }

    #[test]
    fn the_table_has_a_row_per_backup() {
        let v = serde_json::json!({"repository": "r/x", "backups": [
            {"tag": "2", "digest": "sha256:b", "created": "2026-05-01T12:00:01Z", "files": 2,
             "fileBytes": 2048, "streamBytes": 4096, "treeHash": "cd", "drillResult": "passed"},
            {"tag": "1", "digest": "sha256:a", "created": "2026-05-01T12:00:00Z", "files": 0,
             "fileBytes": 0, "streamBytes": 0, "treeHash": "", "drillResult": "-",
             "problem": "field artifactType: …"}]});
        let t = show(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("TIME") && lines[0].contains("DRILL"),
            "{t}"
        );
        assert!(
            lines[1].contains("sha256:b")
                && lines[1].contains("2.0 KiB")
                && lines[1].contains("passed"),
            "{t}"
        );
        assert!(lines[2].contains("field artifactType"), "{t}");
        assert_eq!(
            show(&serde_json::json!({"repository": "r/x", "backups": []})),
            "no backups in r/x\n"
        );
    }
}
