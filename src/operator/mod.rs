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
//! Guarantees: every write uses the field manager [`crate::meta::FIELD_MANAGER`]; every
//! child carries [`LABEL_MANAGED_BY`] and an owner reference; only the
//! replica holding the Lease writes, except that any replica's push
//! receiver stamps a Fleet's sync-requested annotation (the leader's engine
//! acts on it) and any replica's check-in endpoint stamps an Agent's
//! last-checkin annotation (the leader's `silent` monitor reads it).

pub mod agent;
pub mod agentfs;
pub mod apply;
pub mod assemble;
pub mod build;
pub mod conditions;
pub mod controller;
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

/// What this operator can do, advertised to the control plane and on the
/// Lease. `mount-filesystems`: Agents may mount AgentFS volumes through
/// `spec.filesystems` with the omitted-preserves rule.
pub const CAPABILITIES: &[&str] = &[crate::wire::fs::CAP_MOUNT_FILESYSTEMS];
