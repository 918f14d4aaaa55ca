//! The in-cluster operator: reconciles `Agent`, `Tool` and `AgentFS` into
//! pods, Services, Secrets and PVCs.
//!
//! Layout (one module per concern):
//! - pure core: [`build`] (desired children), [`phase`] (pod state to phase),
//!   [`fs`] (AgentFS rules, mount resolution), [`quantity`], [`conditions`];
//! - thin I/O: [`agent`], [`tool`], [`agentfs`] reconcilers, [`apply`]
//!   (server-side apply with one field manager), [`events`];
//! - runtime: [`leader`] (Lease election), [`http`] (`/healthz`, `/readyz`,
//!   `/metrics`, the push receiver whose pure core is [`hooks`], the
//!   agent check-in of [`monitor`]), [`metrics`], [`runtime`] (wires it
//!   all together);
//! - leader-only health monitors: [`monitor`].
//!
//! Guarantees: every write uses the field manager [`FIELD_MANAGER`]; every
//! child carries [`LABEL_MANAGED_BY`] and an owner reference; only the
//! replica holding the Lease writes, except that any replica's push
//! receiver stamps a Fleet's sync-requested annotation (the leader's engine
//! acts on it) and any replica's check-in endpoint stamps an Agent's
//! last-checkin annotation (the leader's `silent` monitor reads it).

pub mod agent;
pub mod agentfs;
pub mod apply;
pub mod build;
pub mod conditions;
pub mod error;
pub mod events;
pub mod feeds;
pub mod fs;
pub mod fs_reaper;
pub mod hooks;
pub mod http;
pub mod leader;
pub mod leader_tasks;
pub mod metrics;
pub mod monitor;
pub mod phase;
pub mod pods;
pub mod quantity;
pub mod relist;
pub mod runtime;
pub mod tool;
pub mod upstream_feed;
pub mod upstream_monitor;

pub use error::{Error, ErrorCategory};
pub use runtime::{OperatorConfig, run};

/// The one field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "exo-operator";
/// Name the operator reports Events under.
pub const CONTROLLER_NAME: &str = "exo-operator";

/// `app.kubernetes.io/managed-by: exo` marks everything the operator owns.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "exo";
/// `app.kubernetes.io/component`: `agent`, `tool` or `agentfs`.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// The Agent a child belongs to.
pub const LABEL_AGENT: &str = "autonomic.sh/agent";
/// The Tool a child belongs to.
pub const LABEL_TOOL: &str = "autonomic.sh/tool";
/// The AgentFS a PVC belongs to.
pub const LABEL_AGENTFS: &str = "autonomic.sh/agentfs";
/// Hash of the desired object; a child whose annotation matches is not
/// written again, a pod whose annotation differs is rolled.
pub const ANNOTATION_SPEC_HASH: &str = "autonomic.sh/spec-hash";
/// Set on an Agent (by `exo` pod control or by hand) to roll its pod: the
/// value is carried into the pod template, so each new value restarts it.
pub const ANNOTATION_RESTART_REQUESTED: &str = "autonomic.sh/restart-requested-at";
/// The container `kubectl exec` and `exo attach` use when none is named
/// (Kubernetes' own well-known annotation): an Agent pod's `runtime`, a
/// Tool pod's `tool`.
pub const ANNOTATION_DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// Set on a PVC that outlived its AgentFS because of `retain: true`.
pub const ANNOTATION_RETAINED: &str = "autonomic.sh/retained-from";
/// Capabilities the operator advertises (Lease annotation, `/healthz`).
pub const ANNOTATION_CAPABILITIES: &str = "autonomic.sh/capabilities";

/// What this operator can do, advertised to the control plane and on the
/// Lease. `mount-filesystems`: Agents may mount AgentFS volumes through
/// `spec.filesystems` with the omitted-preserves rule.
pub const CAPABILITIES: &[&str] = &[crate::wire::fs::CAP_MOUNT_FILESYSTEMS];

/// Finalizer on an Agent: the pod is gone before the Agent is, so the
/// Agent passes through `Terminating` and an AgentFS is only released once
/// no pod mounts it.
pub const FINALIZER_AGENT: &str = "autonomic.sh/agent-cleanup";
/// Finalizer on an AgentFS: holds deletion while Agents mount it, and
/// releases a retained PVC before the AgentFS goes.
pub const FINALIZER_AGENTFS: &str = "autonomic.sh/agentfs-protection";
