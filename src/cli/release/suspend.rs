//! `exo release suspend|resume [--fleet NAME] [-n NAMESPACE]`: set a Fleet's
//! `spec.suspend` (a merge patch). While suspended the operator applies,
//! prunes and heals nothing; it still fetches and reports. Without
//! `--fleet`, the one Fleet there is; several (or none) is an error that
//! names them.

use clap::Args;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::cli::exit;
use crate::cli::release::cluster::with_client;
use crate::crd::Fleet;
use crate::meta::ANNOTATION_SYNC_REQUESTED;

#[derive(Debug, Args)]
pub struct SuspendArgs {
    #[command(flatten)]
    pub kube: crate::cli::kube_args::KubeArgs,
    /// The Fleet; default: the only one (in the namespace, if given).
    #[arg(long)]
    pub fleet: Option<String>,
    /// The Fleet's namespace; default: any.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

/// Why no single Fleet could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    #[error("no Fleet{} in {}", named(.name), scope(.namespace))]
    NotFound {
        name: Option<String>,
        namespace: Option<String>,
        /// The Fleets that are there (`namespace/name`).
        existing: Vec<String>,
    },
    #[error(
        "{} Fleets{} in {}: {}; say which with --fleet NAME -n NAMESPACE",
        .candidates.len(), named(.name), scope(.namespace), .candidates.join(", ")
    )]
    Several {
        name: Option<String>,
        namespace: Option<String>,
        candidates: Vec<String>,
    },
}

fn named(name: &Option<String>) -> String {
    name.as_ref()
        .map(|n| format!(" named {n:?}"))
        .unwrap_or_default()
}

fn scope(namespace: &Option<String>) -> String {
    namespace
        .as_ref()
        .map(|n| format!("namespace {n:?}"))
        .unwrap_or_else(|| "the cluster".into())
}

fn key(f: &Fleet) -> String {
    format!(
        "{}/{}",
        f.metadata.namespace.as_deref().unwrap_or_default(),
        f.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The one Fleet `name` and `namespace` designate among `fleets`.
pub fn pick<'a>(
    fleets: &'a [Fleet],
    name: Option<&str>,
    namespace: Option<&str>,
) -> Result<&'a Fleet, PickError> {
    let matching: Vec<&Fleet> = fleets
        .iter()
        .filter(|f| namespace.is_none_or(|ns| f.metadata.namespace.as_deref() == Some(ns)))
        .filter(|f| name.is_none_or(|n| f.metadata.name.as_deref() == Some(n)))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(PickError::NotFound {
            name: name.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            existing: fleets.iter().map(key).collect(),
        }),
        several => Err(PickError::Several {
            name: name.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            candidates: several.iter().map(|f| key(f)).collect(),
        }),
    }
}

/// The message a pick error ends the verb with, with the Fleets that exist
/// when none matched.
fn explain(e: &PickError) -> String {
    match e {
        PickError::NotFound { existing, .. } if !existing.is_empty() => {
            format!("{e} (Fleets: {})", existing.join(", "))
        }
        _ => e.to_string(),
    }
}

pub fn run_suspend(args: &SuspendArgs) -> u8 {
    set(args, true)
}

pub fn run_resume(args: &SuspendArgs) -> u8 {
    set(args, false)
}

fn set(args: &SuspendArgs, suspend: bool) -> u8 {
    let verb = if suspend { "suspend" } else { "resume" };
    with_client(&args.kube, |client| async move {
        let listed = match &args.namespace {
            Some(ns) => Api::<Fleet>::namespaced(client.clone(), ns),
            None => Api::<Fleet>::all(client.clone()),
        }
        .list(&ListParams::default())
        .await;
        let fleets = match listed {
            Ok(l) => l.items,
            Err(e) => {
                eprintln!("exo release {verb}: cannot list Fleets: {e}");
                return exit::UNUSABLE;
            }
        };
        let fleet = match pick(&fleets, args.fleet.as_deref(), args.namespace.as_deref()) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("exo release {verb}: {}", explain(&e));
                return exit::UNUSABLE;
            }
        };
        let id = key(fleet);
        if fleet.spec.suspend == suspend {
            println!(
                "Fleet {id} is already {}",
                if suspend { "suspended" } else { "running" }
            );
            return exit::OK;
        }
        // Resuming also asks for a sync at once, so what git says now is
        // applied without waiting for the interval.
        let patch = if suspend {
            serde_json::json!({"spec": {"suspend": true}})
        } else {
            let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
            serde_json::json!({
                "metadata": {"annotations": {ANNOTATION_SYNC_REQUESTED: stamp}},
                "spec": {"suspend": false},
            })
        };
        let ns = fleet.metadata.namespace.clone().unwrap_or_default();
        let name = fleet.metadata.name.clone().unwrap_or_default();
        match Api::<Fleet>::namespaced(client.clone(), &ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) if suspend => {
                println!(
                    "suspended Fleet {id}: nothing is applied, pruned or healed until `exo release resume`; fetching and status go on"
                );
                exit::OK
            }
            Ok(_) => {
                println!("resumed Fleet {id}: applying, pruning and healing again; sync requested");
                exit::OK
            }
            Err(e) => {
                eprintln!("exo release {verb}: cannot patch Fleet {id}: {e}");
                exit::UNUSABLE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::FleetSpec;

    fn fleet(ns: &str, name: &str) -> Fleet {
        let mut f = Fleet::new(name, FleetSpec::default());
        f.metadata.namespace = Some(ns.into());
        f
    }

    /// Name, the Fleets there, --fleet, -n, the Fleet picked or the error.
    type Case<'a> = (
        &'static str,
        &'a [Fleet],
        Option<&'static str>,
        Option<&'static str>,
        Result<&'static str, &'static str>,
    );

    #[test]
    fn picking_a_fleet() {
        let one = vec![fleet("exo-system", "example")];
        let two = vec![fleet("exo-system", "example"), fleet("team-b", "example")];
        let cases: Vec<Case<'_>> = vec![
            ("the only one", &one, None, None, Ok("exo-system/example")),
            (
                "by name",
                &one,
                Some("example"),
                None,
                Ok("exo-system/example"),
            ),
            (
                "by name and namespace",
                &two,
                Some("example"),
                Some("team-b"),
                Ok("team-b/example"),
            ),
            (
                "by namespace",
                &two,
                None,
                Some("team-b"),
                Ok("team-b/example"),
            ),
            (
                "none at all",
                &[],
                None,
                None,
                Err("no Fleet in the cluster"),
            ),
            (
                "an unknown name",
                &one,
                Some("prod"),
                None,
                Err("no Fleet named \"prod\" in the cluster (Fleets: exo-system/example)"),
            ),
            (
                "an unknown namespace",
                &one,
                Some("example"),
                Some("nope"),
                Err(
                    "no Fleet named \"example\" in namespace \"nope\" (Fleets: exo-system/example)",
                ),
            ),
            (
                "several",
                &two,
                None,
                None,
                Err(
                    "2 Fleets in the cluster: exo-system/example, team-b/example; say which with --fleet NAME -n NAMESPACE",
                ),
            ),
            (
                "one name in several namespaces",
                &two,
                Some("example"),
                None,
                Err(
                    "2 Fleets named \"example\" in the cluster: exo-system/example, team-b/example; say which with --fleet NAME -n NAMESPACE",
                ),
            ),
        ];
        for (what, fleets, name, ns, want) in cases {
            let got = pick(fleets, name, ns).map(key).map_err(|e| explain(&e));
            assert_eq!(
                got.as_ref().map(String::as_str).map_err(String::as_str),
                want,
                "{what}"
            );
        }
    }
}
