//! Two Kubernetes clusters for one test binary (multi-cluster fleets): the
//! shared test environment's, and a second one of the binary's own
//! ([`PrivateEnv::cluster_only`]: its own etcd, apiserver, kwok and volume
//! provisioner) that shares the first one's registry, git and PostgreSQL.
//! Each cluster gets the CRDs and admission policies as the shared one
//! does, follows a [`Fixture`]'s fleet with a Fleet resource of its own,
//! and runs its own `exo operator run`.
//!
//! The second cluster's ports are fixed (the shared ones + 70), so a binary
//! has one at a time: [`Cluster::second`] waits for the one before it to
//! be dropped. Dropping it takes its environment down, also on a panic.

use std::path::PathBuf;

use exo::crd::{Fleet as FleetCr, Rollout, RolloutPhase};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};

use super::fleet::{Fixture, Operator};
use super::private_env::PrivateEnv;

/// The names [`two_clusters`] gives its clusters (the shared one first).
pub const NAMES: [&str; 2] = ["eu-west", "us-east"];

/// One second cluster per binary at a time: its ports are fixed.
static SECOND: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Cluster {
    /// The cluster's name in the fleet (`clusters/<name>.yaml`).
    pub name: String,
    pub kubeconfig: PathBuf,
    pub client: Client,
    /// The second cluster's environment (`None` for the shared one).
    /// Declared before `_turn`: it is taken down before the next test's
    /// second cluster may start.
    env: Option<PrivateEnv>,
    _turn: Option<tokio::sync::MutexGuard<'static, ()>>,
}

/// The shared cluster and a second one, named [`NAMES`], with the CRDs
/// installed on both.
pub async fn two_clusters() -> (Cluster, Cluster) {
    let first = Cluster::shared(NAMES[0]).await;
    let second = Cluster::second(NAMES[1]).await;
    (first, second)
}

impl Cluster {
    /// The shared test environment's cluster, with the CRDs installed.
    pub async fn shared(name: &str) -> Self {
        let kubeconfig = super::env().kubeconfig.clone();
        let client = super::client_for(&kubeconfig).await;
        super::install_crds(&client).await;
        Cluster {
            name: name.to_owned(),
            kubeconfig,
            client,
            env: None,
            _turn: None,
        }
    }

    /// A second cluster of this binary's own (`scripts/testenv` cluster-only
    /// mode), with the CRDs and admission policies installed as on the
    /// shared one.
    pub async fn second(name: &str) -> Self {
        let turn = SECOND.lock().await;
        let env = PrivateEnv::cluster_only(&format!("cluster-{name}"));
        let client = env.client().await;
        super::install_crds(&client).await;
        Cluster {
            name: name.to_owned(),
            kubeconfig: env.kubeconfig(),
            client,
            env: Some(env),
            _turn: Some(turn),
        }
    }

    /// The second cluster's environment (`scripts/testenv stop|start`, its
    /// logs); `None` for the shared cluster.
    pub fn env(&self) -> Option<&PrivateEnv> {
        self.env.as_ref()
    }

    pub fn api<K>(&self, ns: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Makes this cluster follow the fixture's fleet as the shared cluster
    /// does: the fixture's namespace, the key actuator Secret, and a Fleet
    /// with the shared one's spec (same repository, same settings). The
    /// fixture made these on the shared cluster already.
    pub async fn follow(&self, fx: &Fixture) {
        if self.env.is_none() {
            return;
        }
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": fx.ns.name, "labels": { "exo.test/owner": "cargo-test" } }
        }))
        .unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {} on {}: {e}", fx.ns.name, self.name));
        super::fleet::key_actuator_in(&self.client, &fx.ns.name, &[("type", "kubernetes")]).await;
        let shared = fx
            .ns
            .api::<FleetCr>()
            .get("fleet")
            .await
            .expect("the Fleet");
        let mut fleet = FleetCr::new("fleet", shared.spec);
        fleet.metadata.namespace = Some(fx.ns.name.clone());
        self.api::<FleetCr>(&fx.ns.name)
            .create(&PostParams::default(), &fleet)
            .await
            .unwrap_or_else(|e| panic!("create the Fleet on {}: {e}", self.name));
    }

    /// An `exo operator run` on this cluster for the fixture's Fleet (as
    /// [`Operator::start_with`]), its identity `<cluster>-<identity>`;
    /// `extra` are more arguments (e.g. `--cluster NAME`).
    pub fn operator(&self, fx: &Fixture, identity: &str, extra: &[&str]) -> Operator {
        Operator::start_with(
            &fx.ns.name,
            &self.kubeconfig,
            &format!("{}-{identity}", self.name),
            extra,
        )
    }

    /// [`Cluster::operator`] with more environment, e.g. `AUTONOMIC_*` for
    /// an operator connected to a control plane.
    pub fn operator_env(
        &self,
        fx: &Fixture,
        identity: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Operator {
        Operator::start_env(
            &fx.ns.name,
            &self.kubeconfig,
            &format!("{}-{identity}", self.name),
            extra,
            envs,
        )
    }

    /// `tenant`'s Rollout on this cluster.
    pub async fn rollout(&self, tenant: &str) -> Option<Rollout> {
        super::fleet::rollout_in(&self.client, tenant).await
    }

    /// [`Fixture::wait_phase`] on this cluster, which `op` serves.
    pub async fn wait_phase(
        &self,
        tenant: &str,
        release: &str,
        phase: RolloutPhase,
        op: &Operator,
    ) -> Rollout {
        super::fleet::wait_phase_in(&self.client, tenant, release, phase, op).await
    }

    /// Every tenant of the fixture Verified on `release` on this cluster.
    pub async fn wait_all(&self, fx: &Fixture, release: &str, op: &Operator) {
        for t in fx.tenants() {
            self.wait_phase(&t, release, RolloutPhase::Verified, op)
                .await;
        }
    }
}
