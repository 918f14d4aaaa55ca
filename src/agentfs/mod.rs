//! AgentFS from the outside: what `exo fs` and the control plane's tunnelled
//! commands do with a volume (list, create, browse, copy in and out,
//! resize, delete). One code path serves both routes: the CLI calls it
//! directly with its kubeconfig, and the operator calls it for commands
//! that arrive on the upstream connection.
//!
//! - `path`: `<fs>:<path>` arguments and normalised volume paths (pure);
//! - `script`: the `sh` scripts run in the pod and their output parsers
//!   (pure);
//! - `exec`: running a script in a pod (I/O);
//! - `helper`: which pod to run in: an agent's that mounts the volume, or
//!   a short-lived restricted helper pod (choice and pod are pure);
//! - `ops`: list, create, ls, mkdir, touch, resize, delete;
//! - `apps`: the Apps' volumes: list them (with those retained after their
//!   App is gone) and grow them;
//! - `tarstream`: the one tar walker every transfer passes through (pure):
//!   refuses links, special files, escaping names and over-limit sizes, and
//!   hashes every file it sees;
//! - `local`: the laptop's side of a copy: pack a file or folder, unpack
//!   into a staging folder that becomes the final name only once verified;
//! - `transfer`: the volume's side of a copy, streamed through the walker,
//!   staged, checked by sha256 and only then moved to its final name.

pub mod apps;
pub mod exec;
pub mod helper;
pub mod local;
pub mod ops;
pub mod path;
pub mod script;
pub mod tarstream;
pub mod transfer;

/// A namespaced kind's API in `namespace`, or in every namespace when
/// `None` (what `exo fs list` and `list --apps` read).
fn api_in<K>(client: &kube::Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Path(#[from] path::PathError),
    #[error("AgentFS {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("App {namespace}/{name} not found")]
    AppNotFound { namespace: String, name: String },
    #[error("{what}: {message}")]
    Kube { what: String, message: String },
    #[error("in pod {pod}: {message}")]
    InPod { pod: String, message: String },
    #[error("{0}")]
    NoPod(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Stream(String),
    #[error(
        "sha256 mismatch: {what} (sent {sent}, landed {landed}); nothing was written under the final name"
    )]
    Mismatch {
        what: String,
        sent: String,
        landed: String,
    },
}

impl FsError {
    /// An apiserver error, keeping its message (an admission policy's
    /// refusal names the agents) and dropping the rest of the response.
    pub fn kube(what: impl Into<String>, e: kube::Error) -> Self {
        let message = match &e {
            kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
            other => other.to_string(),
        };
        FsError::Kube {
            what: what.into(),
            message,
        }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        FsError::Io {
            what: what.into(),
            source,
        }
    }
}
