//! Pure AgentFS rules: which mounts an Agent has (omitted-preserves),
//! whether a requested size may be applied (grow-only, capped at
//! `maxSize`), which Agents mount a volume and which hold it while it is
//! being deleted (a volume being deleted gains no new users), and the
//! AgentFS phase.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::crd::{Agent, AgentFSPhase, AgentSpec, AgentStatus, FilesystemMount};
use crate::quantity::to_bytes;

/// The mounts an Agent should have, each with its mount path filled in.
///
/// The omitted-preserves rule: `Some(list)` replaces the mounts (an empty
/// list detaches every disk); `None` keeps the mounts last applied, which
/// live in `status.filesystems`.
pub fn effective_mounts(spec: &AgentSpec, status: Option<&AgentStatus>) -> Vec<FilesystemMount> {
    let source: &[FilesystemMount] = match &spec.filesystems {
        Some(list) => list,
        None => status.map(|s| s.filesystems.as_slice()).unwrap_or_default(),
    };
    source
        .iter()
        .map(|m| FilesystemMount {
            name: m.name.clone(),
            mount_path: Some(m.mount_path()),
            read_only: m.read_only,
        })
        .collect()
}

/// Problems with a set of resolved mounts, in plain words naming the field.
pub fn validate_mounts(mounts: &[FilesystemMount], baseline_path: Option<&str>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    let mut paths = BTreeSet::new();
    for m in mounts {
        let path = m.mount_path();
        if !names.insert(m.name.as_str()) {
            problems.push(format!("spec.filesystems: {:?} is listed twice", m.name));
        }
        if !path.starts_with('/') {
            problems.push(format!(
                "spec.filesystems[{}].mountPath: {path:?} must be an absolute path",
                m.name
            ));
        }
        if !paths.insert(path.clone()) {
            problems.push(format!(
                "spec.filesystems[{}].mountPath: {path:?} is used by another mount",
                m.name
            ));
        }
        for reserved in ["/tmp"].into_iter().chain(baseline_path) {
            if path == reserved || path.starts_with(&format!("{reserved}/")) {
                problems.push(format!(
                    "spec.filesystems[{}].mountPath: {path:?} overlaps {reserved}",
                    m.name
                ));
            }
        }
    }
    problems
}

/// Why a requested size was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeRefusal {
    Shrink { requested: String, current: String },
    AboveMax { requested: String, max: String },
    Unparsable(String),
}

impl SizeRefusal {
    /// Stable reason, used for the condition and the Event.
    pub fn reason(&self) -> &'static str {
        match self {
            SizeRefusal::Shrink { .. } => "ShrinkRefused",
            SizeRefusal::AboveMax { .. } => "AboveMaxSize",
            SizeRefusal::Unparsable(_) => "InvalidSize",
        }
    }

    pub fn message(&self) -> String {
        match self {
            SizeRefusal::Shrink { requested, current } => format!(
                "spec.size {requested} is smaller than the current {current}: resize is grow-only; the PVC keeps {current}"
            ),
            SizeRefusal::AboveMax { requested, max } => {
                format!(
                    "spec.size {requested} exceeds spec.maxSize {max}; the PVC is left as it is"
                )
            }
            SizeRefusal::Unparsable(q) => format!("{q:?} is not a valid quantity"),
        }
    }
}

/// What size the PVC gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizePlan {
    /// The request to write into the PVC.
    pub size: String,
    pub refusal: Option<SizeRefusal>,
}

/// Applies the grow-only and maxSize rules. `current` is the PVC's present
/// request (None when there is no PVC yet).
pub fn plan_size(requested: &str, max: &str, current: Option<&str>) -> SizePlan {
    let keep = |refusal| SizePlan {
        size: current.unwrap_or(requested).to_owned(),
        refusal: Some(refusal),
    };
    let (Ok(req), Ok(max_b)) = (to_bytes(requested), to_bytes(max)) else {
        let bad = if to_bytes(requested).is_err() {
            requested
        } else {
            max
        };
        return keep(SizeRefusal::Unparsable(bad.to_owned()));
    };
    if req > max_b {
        let refusal = SizeRefusal::AboveMax {
            requested: requested.to_owned(),
            max: max.to_owned(),
        };
        // With no PVC yet the caller creates nothing: a volume larger than
        // maxSize is never provisioned.
        return keep(refusal);
    }
    if let Some(cur) = current {
        match to_bytes(cur) {
            Ok(cur_b) if req < cur_b => {
                return keep(SizeRefusal::Shrink {
                    requested: requested.to_owned(),
                    current: cur.to_owned(),
                });
            }
            // Same size in other units: keep the PVC's spelling, no write.
            Ok(cur_b) if req == cur_b => {
                return SizePlan {
                    size: cur.to_owned(),
                    refusal: None,
                };
            }
            _ => {}
        }
    }
    SizePlan {
        size: requested.to_owned(),
        refusal: None,
    }
}

/// The PVC's requested and provisioned capacity.
pub fn capacities(pvc: &PersistentVolumeClaim) -> (Option<String>, Option<String>) {
    let requested = pvc
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone());
    let provisioned = pvc
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(|q| q.0.clone());
    (requested, provisioned)
}

/// The AgentFS phase from its PVC.
pub fn phase(pvc: Option<&PersistentVolumeClaim>, deleting: bool, failed: bool) -> AgentFSPhase {
    if deleting {
        return AgentFSPhase::Terminating;
    }
    if failed {
        return AgentFSPhase::Error;
    }
    let Some(pvc) = pvc else {
        return AgentFSPhase::Pending;
    };
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if !bound {
        return AgentFSPhase::Pending;
    }
    let (requested, provisioned) = capacities(pvc);
    match (
        requested.as_deref().map(to_bytes),
        provisioned.as_deref().map(to_bytes),
    ) {
        (Some(Ok(r)), Some(Ok(p))) if p < r => AgentFSPhase::Resizing,
        _ => AgentFSPhase::Bound,
    }
}

/// Names of the Agents (sorted) whose effective mounts include `fs`.
pub fn mounted_by<'a>(agents: impl IntoIterator<Item = &'a Agent>, fs: &str) -> Vec<String> {
    names_where(agents, |a| mounts(a, fs))
}

/// Names of the Agents (sorted) that hold `fs` while it is being deleted:
/// they mount it, and had mounted it already ([`mount_applied`]). An Agent
/// that only starts to mount a volume being deleted is refused the mount
/// (a volume being deleted gains no new users), so it holds nothing.
pub fn holders<'a>(agents: impl IntoIterator<Item = &'a Agent>, fs: &str) -> Vec<String> {
    names_where(agents, |a| {
        mounts(a, fs) && mount_applied(a.status.as_ref(), fs)
    })
}

/// Whether the operator has applied a mount of `fs` to this Agent:
/// `status.filesystems`, the mounts last applied, names it.
pub fn mount_applied(status: Option<&AgentStatus>, fs: &str) -> bool {
    status.is_some_and(|s| s.filesystems.iter().any(|m| m.name == fs))
}

/// The `FilesystemsReady=False` reason and message for mounts that cannot
/// be honoured: `missing` AgentFS do not exist, `closing` ones are being
/// deleted and refuse this Agent as a new user. Both are named.
pub fn unavailable_mounts(
    ns: &str,
    missing: &[String],
    closing: &[String],
) -> (&'static str, String) {
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!(
            "AgentFS not found in namespace {ns}: {}",
            missing.join(", ")
        ));
    }
    if !closing.is_empty() {
        parts.push(format!(
            "AgentFS being deleted in namespace {ns} takes no new mounts: {}",
            closing.join(", ")
        ));
    }
    let reason = if missing.is_empty() {
        "FilesystemTerminating"
    } else {
        "FilesystemNotFound"
    };
    (reason, parts.join("; "))
}

fn mounts(a: &Agent, fs: &str) -> bool {
    effective_mounts(&a.spec, a.status.as_ref())
        .iter()
        .any(|m| m.name == fs)
}

fn names_where<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    keep: impl Fn(&Agent) -> bool,
) -> Vec<String> {
    let mut names: Vec<String> = agents
        .into_iter()
        .filter(|a| keep(a))
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(name: &str, path: Option<&str>, ro: bool) -> FilesystemMount {
        FilesystemMount {
            name: name.into(),
            mount_path: path.map(Into::into),
            read_only: ro,
        }
    }

    #[test]
    fn omitted_preserves_empty_detaches_list_replaces() {
        let status = AgentStatus {
            filesystems: vec![mount("old", Some("/mnt/fs/old"), false)],
            ..AgentStatus::default()
        };
        let cases: Vec<(Option<Vec<FilesystemMount>>, Vec<&str>)> = vec![
            (None, vec!["old"]),
            (Some(vec![]), vec![]),
            (Some(vec![mount("new", None, true)]), vec!["new"]),
        ];
        for (spec_fs, want) in cases {
            let spec = AgentSpec {
                filesystems: spec_fs.clone(),
                ..AgentSpec::default()
            };
            let got: Vec<String> = effective_mounts(&spec, Some(&status))
                .into_iter()
                .map(|m| m.name)
                .collect();
            assert_eq!(got, want, "{spec_fs:?}");
        }
    }

    #[test]
    fn default_mount_path_and_read_only() {
        let spec = AgentSpec {
            filesystems: Some(vec![
                mount("shared-workspace", Some("/workspace/shared"), false),
                mount("reference-data", None, true),
            ]),
            ..AgentSpec::default()
        };
        let m = effective_mounts(&spec, None);
        assert_eq!(m[0].mount_path.as_deref(), Some("/workspace/shared"));
        assert_eq!(m[1].mount_path.as_deref(), Some("/mnt/fs/reference-data"));
        assert!(m[1].read_only && !m[0].read_only);
    }

    #[test]
    fn mount_validation() {
        let cases: Vec<(Vec<FilesystemMount>, usize)> = vec![
            (vec![mount("a", None, false), mount("b", None, false)], 0),
            (
                vec![mount("a", None, false), mount("a", Some("/x"), false)],
                1,
            ),
            (
                vec![mount("a", Some("/x"), false), mount("b", Some("/x"), false)],
                1,
            ),
            (vec![mount("a", Some("relative"), false)], 1),
            (vec![mount("a", Some("/etc/exo/baseline/x"), false)], 1),
            (vec![mount("a", Some("/tmp"), false)], 1),
        ];
        for (mounts, want) in cases {
            let got = validate_mounts(&mounts, Some("/etc/exo/baseline"));
            assert_eq!(got.len(), want, "{mounts:?}: {got:?}");
        }
    }

    #[test]
    fn size_rules() {
        // (requested, max, current PVC request, size applied, refusal reason)
        type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a str, Option<&'a str>);
        let cases: &[Case] = &[
            ("20Gi", "100Gi", None, "20Gi", None),
            ("50Gi", "100Gi", Some("20Gi"), "50Gi", None),
            ("10Gi", "100Gi", Some("20Gi"), "20Gi", Some("ShrinkRefused")),
            ("200Gi", "100Gi", Some("20Gi"), "20Gi", Some("AboveMaxSize")),
            ("20480Mi", "100Gi", Some("20Gi"), "20Gi", None),
            ("100Gi", "100Gi", Some("20Gi"), "100Gi", None),
            ("lots", "100Gi", Some("20Gi"), "20Gi", Some("InvalidSize")),
        ];
        for (req, max, cur, want_size, want_refusal) in cases {
            let plan = plan_size(req, max, *cur);
            assert_eq!(plan.size, *want_size, "{req} {max} {cur:?}");
            assert_eq!(
                plan.refusal.as_ref().map(SizeRefusal::reason),
                *want_refusal,
                "{req}"
            );
        }
    }

    #[test]
    fn mounted_by_uses_spec_then_status() {
        let mk =
            |name: &str, spec_fs: Option<Vec<FilesystemMount>>, status_fs: Vec<FilesystemMount>| {
                let mut a = Agent::new(
                    name,
                    AgentSpec {
                        filesystems: spec_fs,
                        ..AgentSpec::default()
                    },
                );
                a.status = Some(AgentStatus {
                    filesystems: status_fs,
                    ..AgentStatus::default()
                });
                a
            };
        let agents = [
            mk("b", Some(vec![mount("ws", None, false)]), vec![]),
            mk("a", None, vec![mount("ws", None, false)]),
            mk("c", Some(vec![]), vec![mount("ws", None, false)]),
            mk("d", Some(vec![mount("other", None, false)]), vec![]),
        ];
        assert_eq!(mounted_by(&agents, "ws"), vec!["a", "b"]);
        // "b" asks for ws but never had it applied: it does not hold it.
        assert_eq!(holders(&agents, "ws"), vec!["a"]);
    }

    #[test]
    fn unavailable_mounts_are_named_with_one_reason() {
        let s = |v: &[&str]| v.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let (reason, msg) = unavailable_mounts("ns", &s(&[]), &s(&["a", "b"]));
        assert_eq!(reason, "FilesystemTerminating");
        assert_eq!(
            msg,
            "AgentFS being deleted in namespace ns takes no new mounts: a, b"
        );
        let (reason, msg) = unavailable_mounts("ns", &s(&["gone"]), &s(&["a"]));
        assert_eq!(reason, "FilesystemNotFound");
        assert!(msg.contains("not found in namespace ns: gone") && msg.contains("mounts: a"));
    }

    #[test]
    fn only_applied_mounts_hold_a_volume_being_deleted() {
        let mk = |name: &str, spec_fs: Option<Vec<&str>>, applied: Vec<&str>| {
            let mut a = Agent::new(
                name,
                AgentSpec {
                    filesystems: spec_fs
                        .map(|l| l.into_iter().map(|n| mount(n, None, false)).collect()),
                    ..AgentSpec::default()
                },
            );
            a.status = Some(AgentStatus {
                filesystems: applied.into_iter().map(|n| mount(n, None, false)).collect(),
                ..AgentStatus::default()
            });
            a
        };
        // (agent, holds "ws")
        let cases = [
            (mk("kept", Some(vec!["ws"]), vec!["ws"]), true),
            (mk("omitted", None, vec!["ws", "other"]), true),
            (mk("newcomer", Some(vec!["ws"]), vec!["other"]), false),
            (mk("detached", Some(vec![]), vec!["ws"]), false),
            (mk("never", Some(vec!["other"]), vec!["other"]), false),
        ];
        for (agent, want) in &cases {
            let got = holders([agent], "ws");
            assert_eq!(!got.is_empty(), *want, "{:?}", agent.metadata.name);
        }
        assert!(mount_applied(cases[0].0.status.as_ref(), "ws"));
        assert!(!mount_applied(None, "ws"));
    }
}
