//! What the `exo release` verbs that read the cluster share: a kube client
//! from the kubeconfig on a runtime of their own, the tenants' Rollouts, and
//! the sync request that makes the operator fetch at once.

use std::path::PathBuf;

use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::cli::exit;
use crate::cli::kube_args::KubeArgs;
use crate::crd::{AnalysisRun, Fleet as FleetCr, Rollout};
use crate::fleet::Fleet;
use crate::meta::ANNOTATION_SYNC_REQUESTED;
use crate::release::WaveName;

pub fn runtime(verb: &str) -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("{verb}: cannot start the async runtime: {e}");
            exit::UNUSABLE
        })
}

/// Runs `f` with a kube client (`--kubeconfig`, `--context`) on a fresh
/// runtime; an unusable runtime or cluster ends the verb with a message.
pub fn with_client<F, Fut>(kube: &KubeArgs, f: F) -> u8
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = u8>,
{
    with_client_for("exo release", kube, f)
}

/// [`with_client`] for another verb: messages start with `verb`.
pub fn with_client_for<F, Fut>(verb: &str, kube: &KubeArgs, f: F) -> u8
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = u8>,
{
    let rt = match runtime(verb) {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async {
        match kube.client().await {
            Ok(c) => f(c).await,
            Err(e) => {
                eprintln!("{verb}: cannot reach the cluster: {e}");
                exit::UNUSABLE
            }
        }
    })
}

/// Every Rollout in the cluster.
pub async fn rollouts(client: &kube::Client) -> Result<Vec<Rollout>, u8> {
    try_rollouts(client).await.map_err(|e| {
        eprintln!("exo release: cannot list Rollouts: {e}");
        exit::UNUSABLE
    })
}

/// Every Rollout in the cluster, or why not, for a caller that may try
/// again ([`transient`]).
pub async fn try_rollouts(client: &kube::Client) -> Result<Vec<Rollout>, kube::Error> {
    Api::<Rollout>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
}

/// Whether a failed request may succeed as it is if sent again: the
/// apiserver unreachable or cut off, or answering that it is busy or
/// failing (429, 5xx). A refusal (401, 403), a missing kind (404) or a bad
/// request is not: retrying changes nothing.
pub fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// The Rollouts of this fleet's tenants (a cluster may follow several fleets).
pub async fn fleet_rollouts(client: &kube::Client, fleet: &Fleet) -> Result<Vec<Rollout>, u8> {
    let mut all = rollouts(client).await?;
    of_fleet(&mut all, fleet);
    Ok(all)
}

/// Keeps the Rollouts of `fleet`'s tenants, each in its tenant's namespace.
pub fn of_fleet(all: &mut Vec<Rollout>, fleet: &Fleet) {
    all.retain(|r| {
        fleet.tenants.contains_key(&r.spec.tenant)
            && r.metadata.namespace.as_deref() == Some(r.spec.tenant.as_str())
    });
}

/// Every AnalysisRun in the cluster, or why not; none when the kind is not
/// installed (an operator older than analyses).
pub async fn try_analysis_runs(client: &kube::Client) -> Result<Vec<AnalysisRun>, kube::Error> {
    match Api::<AnalysisRun>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// [`try_analysis_runs`], a failure ending the verb.
pub async fn analysis_runs(client: &kube::Client) -> Result<Vec<AnalysisRun>, u8> {
    try_analysis_runs(client).await.map_err(|e| {
        eprintln!("exo release: cannot list AnalysisRuns: {e}");
        exit::UNUSABLE
    })
}

/// The newest run of `wave` on `release` that judged this fleet's tenants.
pub fn run_of<'a>(
    runs: &'a [AnalysisRun],
    fleet: &Fleet,
    wave: WaveName,
    release: &str,
) -> Option<&'a AnalysisRun> {
    runs.iter()
        .filter(|r| {
            r.spec.wave == wave.as_str()
                && r.spec.release == release
                && r.spec
                    .tenants
                    .iter()
                    .all(|t| fleet.tenants.contains_key(&t.name))
        })
        .max_by_key(|r| r.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Asks every Fleet to sync now (best effort: the interval catches up anyway).
pub async fn request_sync(client: &kube::Client) {
    let Ok(list) = Api::<FleetCr>::all(client.clone())
        .list(&ListParams::default())
        .await
    else {
        return;
    };
    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
    for f in list.items {
        let ns = f.metadata.namespace.clone().unwrap_or_default();
        let name = f.metadata.name.clone().unwrap_or_default();
        let patch =
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_SYNC_REQUESTED: stamp}}});
        let _ = Api::<FleetCr>::namespaced(client.clone(), &ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }
}

pub fn now_secs() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// The folder git commands run in: the fleet's root, or `.` when it is empty.
pub fn repo_root(fleet: &Fleet) -> PathBuf {
    if fleet.root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        fleet.root.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::transient;
    use kube::core::Status;

    #[test]
    fn only_an_error_that_may_pass_on_a_retry_is_transient() {
        let api = |code: u16| kube::Error::Api(Status::failure("x", "y").with_code(code).boxed());
        let cut = kube::Error::Service(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        let cases = [
            ("connection refused", cut, true),
            ("429 too many requests", api(429), true),
            ("500", api(500), true),
            ("503 etcd unavailable", api(503), true),
            ("504 timeout", api(504), true),
            ("401", api(401), false),
            ("403 forbidden", api(403), false),
            ("404 no such kind", api(404), false),
            ("409 conflict", api(409), false),
            ("422 invalid", api(422), false),
            ("TLS required", kube::Error::TlsRequired, false),
        ];
        for (what, e, want) in cases {
            assert_eq!(transient(&e), want, "{what}: {e}");
        }
    }
}
