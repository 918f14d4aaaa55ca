//! The flags every verb that talks to a cluster takes, as kubectl spells
//! them: `--kubeconfig` and `--context` (the namespace flag, `-n`, is each
//! verb's own, since its meaning differs: a filter, a scope, a target).

use std::path::PathBuf;

use clap::Args;
use hyper::header::{HeaderValue, USER_AGENT};
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// The kubeconfig file [default: $KUBECONFIG, then ~/.kube/config; in a
    /// Pod, its service account].
    #[arg(long, value_name = "PATH", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: its current context].
    #[arg(long, value_name = "NAME", global = true)]
    pub context: Option<String>,
}

/// Why no client could be built; each names the flag or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum KubeArgsError {
    #[error("user agent {0:?}: only visible ASCII can be sent")]
    UserAgent(String),
    #[error("--kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("--context {context}: {source}")]
    Context {
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no cluster configuration (set KUBECONFIG or --kubeconfig): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("kube client: {0}")]
    Client(#[source] kube::Error),
}

impl KubeArgs {
    /// A client for the chosen kubeconfig and context. Without either, the
    /// usual inference: `$KUBECONFIG` or `~/.kube/config`, else in-cluster.
    /// Errors name the flag or file at fault.
    pub async fn client(&self) -> Result<kube::Client, KubeArgsError> {
        self.client_as(&user_agent("exo", None)).await
    }

    /// [`KubeArgs::client`] whose every request carries `agent` as its
    /// User-Agent, which the apiserver's audit log records: who wrote what,
    /// down to the operator replica ([`user_agent`]).
    pub async fn client_as(&self, agent: &str) -> Result<kube::Client, KubeArgsError> {
        let agent =
            HeaderValue::from_str(agent).map_err(|_| KubeArgsError::UserAgent(agent.to_owned()))?;
        let opts = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let kubeconfig = |path: &PathBuf| {
            let path = path.clone();
            move |source| KubeArgsError::Kubeconfig { path, source }
        };
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kc = Kubeconfig::read_from(path).map_err(kubeconfig(path))?;
                kube::Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(kubeconfig(path))?
            }
            (None, Some(ctx)) => kube::Config::from_kubeconfig(&opts)
                .await
                .map_err(|source| KubeArgsError::Context {
                    context: ctx.clone(),
                    source,
                })?,
            (None, None) => kube::Config::infer().await.map_err(KubeArgsError::Infer)?,
        };
        let mut config = config;
        config.headers.push((USER_AGENT, agent));
        kube::Client::try_from(config).map_err(KubeArgsError::Client)
    }
}

/// `program/version`, then the replica in brackets when there is one:
/// `exo-operator/0.1.0 (exo-operator-7d9c-x2x4)`.
pub fn user_agent(program: &str, replica: Option<&str>) -> String {
    let base = format!("{program}/{}", env!("CARGO_PKG_VERSION"));
    match replica {
        Some(r) => format!("{base} ({r})"),
        None => base,
    }
}
