//! AgentFS backups, run by the leader: each volume with `spec.backup` is
//! backed up on its schedule or on request, its backups proven by restore
//! drills, and its staleness raised as alerts (docs/backups.md).

pub mod drill;
pub mod plan;
pub mod run;
pub mod task;
pub mod watch;
