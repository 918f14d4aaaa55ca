//! The in-cluster operator: reconciles `Agent`, `Tool`, `AgentFS` and `App`
//! into pods, Services, Secrets and PVCs, and runs the leader's tasks (the
//! rollout engine, audits, monitors, the upstream connection).
//!
//! It sits on top: it uses the write path and builders of
//! [`crate::cluster`] and runs [`crate::rollout`], [`crate::audit`],
//! [`crate::agentfs`] and [`crate::upstream`]; none of those imports it.
//!
//! Layout (one module per concern):
//! - pure core: [`phase`] (pod state to phase), [`hooks`] (the push
//!   receiver's rules), `agent::plan` (validate and build an Agent),
//!   `app::plan` (an App's volumes, pod and status);
//! - thin I/O: the [`agent`], [`tool`], [`agentfs`] and [`app`] reconcilers, in the
//!   one shell of [`controller`];
//! - runtime: [`http`] (`/healthz`, `/readyz`, `/metrics`, the push
//!   receiver, the agent check-in of [`monitor`]), [`runtime`] and
//!   [`assemble`] (wire it all together), [`leader_tasks`];
//! - leader-only health monitors: [`monitor`], [`upstream_monitor`],
//!   [`fs_reaper`];
//! - leader-only notifications: [`notify`] (delivery with retries, the
//!   providers' and rules' status).
//!
//! Guarantees: every write uses the field manager [`crate::meta::FIELD_MANAGER`]; every
//! child carries [`crate::meta::LABEL_MANAGED_BY`] and an owner reference; only the
//! replica holding the Lease writes, except that any replica's push
//! receiver stamps a Fleet's sync-requested annotation (the leader's engine
//! acts on it) and any replica's check-in endpoint stamps an Agent's
//! last-checkin annotation (the leader's `silent` monitor reads it).

pub mod agent;
pub mod agentfs;
pub mod app;
pub mod assemble;
pub mod backups;
pub mod circuits;
pub mod controller;
pub mod dispatch;
pub mod fs_reaper;
pub mod hooks;
pub mod http;
pub mod leader_tasks;
pub mod monitor;
pub mod notify;
pub mod phase;
pub mod pod_roll;
pub mod runtime;
pub mod tool;
pub mod upstream_feed;
pub mod upstream_monitor;

pub use runtime::{OperatorConfig, run};
