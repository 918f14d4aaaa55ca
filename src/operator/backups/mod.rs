//! Volume backups, run by the leader: each AgentFS with `spec.backup`, and
//! each App volume with the App's `spec.backup` ([`subject`]), is backed
//! up on its schedule or on request, its backups proven by restore drills,
//! and its staleness raised as alerts (docs/backups.md).

pub mod drill;
pub mod plan;
pub mod run;
pub mod subject;
pub mod task;
pub mod watch;
