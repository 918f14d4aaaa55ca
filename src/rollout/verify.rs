//! Live-content verification: exec into an agent pod, list the `sha256sum`
//! of every file of its mounted baseline, and compare with what the release
//! pins. Used by the saga's `verified/<component>` step and by the periodic
//! re-check of verified tenants, so both check exactly the same thing.
//!
//! The aggregate is computed here from the listing (sha256 of the listing,
//! as the build does), so a mismatch can name the files that differ.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Client;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt;

use super::saga::{Outcome, Workload};
use super::workload::blocked;
use crate::cluster::apply::Ctx;
use crate::fleet::configmap::{self, file_hash, parse_listing};
use crate::release::Release;
use kube::runtime::reflector::ObjectRef;

/// Runs in a pod and prints the `sha256sum` listing of the mounted
/// baseline, files sorted by name (byte order). `EXO_POD_ROOT`, when the
/// exec environment sets it, prefixes the path: the kwok test
/// environment's exec runs on the host, where the volumes are written
/// under that root (see `tests/testenv/provisioner`).
const LISTING_SCRIPT: &str =
    r#"cd "${EXO_POD_ROOT:+$EXO_POD_ROOT/$1/$2}$3" && LC_ALL=C sha256sum -- *"#;

/// What one pod's live baseline turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// The listing hashes to the pinned sha256.
    Matches,
    /// It does not: the aggregate and the files that differ (added,
    /// changed or missing), when the expected files are known.
    Differs { live: String, files: Vec<String> },
    /// Nothing usable came back (no such directory yet, no output).
    Unreadable(String),
}

/// The file name -> sha256 a published baseline ConfigMap holds.
pub fn expected_files(cm: &ConfigMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in cm.data.iter().flatten() {
        out.insert(k.clone(), file_hash(v.as_bytes()));
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), file_hash(&v.0));
    }
    out
}

/// Compares a live listing with the pinned aggregate and, when known, the
/// expected files. Pure.
pub fn compare(stdout: &str, want: &str, expected: Option<&BTreeMap<String, String>>) -> Content {
    let Some(live_files) = parse_listing(stdout) else {
        return Content::Unreadable(
            stdout
                .lines()
                .next()
                .unwrap_or("no output")
                .chars()
                .take(200)
                .collect(),
        );
    };
    let live = configmap::content_hash(live_files.iter().map(|(n, h)| (n.as_str(), h.clone())));
    if live == want {
        return Content::Matches;
    }
    let files = match expected {
        None => Vec::new(),
        Some(exp) => {
            let mut names: Vec<String> = exp
                .iter()
                .filter(|(n, h)| live_files.get(*n) != Some(*h))
                .map(|(n, _)| n.clone())
                .collect();
            names.extend(live_files.keys().filter(|n| !exp.contains_key(*n)).cloned());
            names
        }
    };
    Content::Differs { live, files }
}

/// Execs the listing in `pod`'s `runtime` container and returns its
/// stdout and the first line of stderr.
pub async fn exec_listing(
    client: &Client,
    namespace: &str,
    pod: &str,
    mount_path: &str,
) -> Result<(String, String), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = AttachParams::default()
        .container(crate::meta::AGENT_RUNTIME_CONTAINER)
        .stdout(true)
        .stderr(true);
    let cmd = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        LISTING_SCRIPT.to_owned(),
        "sh".to_owned(),
        namespace.to_owned(),
        pod.to_owned(),
        mount_path.to_owned(),
    ];
    let mut attached = api.exec(pod, cmd, &params).await?;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = attached.stdout() {
        let _ = s.read_to_string(&mut out).await;
    }
    if let Some(mut s) = attached.stderr() {
        let _ = s.read_to_string(&mut err).await;
    }
    let _ = attached.join().await;
    Ok((out, err.lines().next().unwrap_or_default().to_owned()))
}

/// Why a pod's live content was not confirmed.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentError {
    /// Could not look (exec forbidden, not readable yet): the outcome.
    Blocked(Outcome),
    /// Looked, and it is not the release's. `files` names what differs.
    Mismatch {
        pod: String,
        files: Vec<String>,
        message: String,
    },
}

/// Execs into `pod` (of workload `w`) and checks its mounted baseline
/// against the release. A workload without a baseline passes.
pub async fn check_content(
    op: &Ctx,
    namespace: &str,
    release: &Release,
    baselines: &BTreeMap<String, Option<String>>,
    w: &Workload,
    pod: &Pod,
) -> Result<(), ContentError> {
    let Workload::Agent(a) = w else {
        return Ok(());
    };
    let Some(b) = &a.spec.baseline else {
        return Ok(());
    };
    let Some(Some(want)) = baselines.get(&b.config_map) else {
        return Err(ContentError::Blocked(Outcome::Failed(format!(
            "baseline {} is not in release {}",
            b.config_map, release.metadata.name
        ))));
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let expected = op
        .configmaps
        .get(&ObjectRef::new(&b.config_map).within(namespace))
        .map(|cm| expected_files(&cm));
    let (out, err) = match exec_listing(&op.client, namespace, &pod_name, b.mount_path()).await {
        Ok(r) => r,
        Err(e) => {
            return Err(ContentError::Blocked(blocked(
                &format!("exec into pod {pod_name}"),
                &e,
            )));
        }
    };
    match compare(&out, want, expected.as_ref()) {
        Content::Matches => Ok(()),
        Content::Differs { live, files } => {
            let which = if files.is_empty() {
                String::new()
            } else {
                format!(" (files differing: {})", files.join(", "))
            };
            Err(ContentError::Mismatch {
                message: format!(
                    "live content of pod {pod_name} at {} hashes to {live}; release {} pins {want}{which}",
                    b.mount_path(),
                    release.metadata.name
                ),
                pod: pod_name,
                files,
            })
        }
        Content::Unreadable(first) => {
            let why = if err.is_empty() { first } else { err };
            Err(ContentError::Blocked(Outcome::Pending(format!(
                "cannot hash {} in pod {pod_name} yet: {why}",
                b.mount_path()
            ))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_listings_and_names_the_files() {
        let a = file_hash(b"persona\n");
        let b = file_hash(b"rules\n");
        let listing = format!("{a}  a.md\n{b}  b.md\n");
        let want = configmap::content_hash([("a.md", a.clone()), ("b.md", b.clone())]);
        let expected = BTreeMap::from([("a.md".to_owned(), a.clone()), ("b.md".to_owned(), b)]);
        assert_eq!(compare(&listing, &want, Some(&expected)), Content::Matches);

        let tampered = format!("{a}  a.md\n{}  b.md\n", file_hash(b"rules\nX"));
        match compare(&tampered, &want, Some(&expected)) {
            Content::Differs { files, live } => {
                assert_eq!(files, ["b.md"]);
                assert_ne!(live, want);
            }
            other => panic!("{other:?}"),
        }
        let extra = format!("{listing}{}  c.md\n", file_hash(b"x"));
        assert!(matches!(
            compare(&extra, &want, Some(&expected)),
            Content::Differs { files, .. } if files == ["c.md"]
        ));
        let missing = format!("{a}  a.md\n");
        assert!(matches!(
            compare(&missing, &want, Some(&expected)),
            Content::Differs { files, .. } if files == ["b.md"]
        ));
        assert!(matches!(
            compare("sh: cd: can't cd", &want, None),
            Content::Unreadable(_)
        ));
        assert!(matches!(compare("", &want, None), Content::Unreadable(_)));
    }
}
