//! What everything that writes to the cluster shares: the one fenced write
//! path and the pure builders of the objects it writes.
//!
//! The reconcilers in [`crate::operator`], the rollout engine, the audit,
//! the AgentFS helper and the upstream watch all sit above this module and
//! use it; it imports none of them.
//!
//! - the write path: [`apply`] (server-side apply with the one field manager
//!   [`crate::meta::FIELD_MANAGER`], fenced by [`leader`]'s Lease), [`events`],
//!   [`metrics`], [`error`] (one enum with a bounded category), [`pods`]
//!   (the pods a controller expects), [`feeds`] and [`relist`] (the shared
//!   watches; [`slim`] drops from each cached object what no reader needs);
//! - pure builders and rules: [`build`] (desired children), [`fs`] (AgentFS
//!   rules, mount resolution), [`conditions`];
//! - [`identity`]: which cluster of a fleet this operator runs in.

pub mod apply;
pub mod build;
pub mod conditions;
pub mod error;
pub mod events;
pub mod feeds;
pub mod fs;
pub mod identity;
pub mod leader;
pub mod metrics;
pub mod pods;
pub mod relist;
pub mod slim;

pub use error::{Error, ErrorCategory};

/// What this operator can do, advertised to the control plane and on the
/// Lease. `mount-filesystems`: Agents may mount AgentFS volumes through
/// `spec.filesystems` with the omitted-preserves rule. `app-storage`: it
/// reconciles Apps (where their CRD is installed) and serves the App
/// volume commands.
pub const CAPABILITIES: &[&str] = &[
    crate::wire::fs::CAP_MOUNT_FILESYSTEMS,
    crate::wire::fs::CAP_APP_STORAGE,
];
