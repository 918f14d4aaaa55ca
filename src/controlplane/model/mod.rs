//! The control plane's data: the rows the store reads and writes and the
//! views the API shows, as plain types. Pure: it names nothing else of the
//! control plane, so every layer above (store, domain, HTTP) can share it.

mod alerts;
mod audit;
mod deployment;
mod fleet;
mod health;
mod incidents;
mod tenants;
mod tokens;

pub use alerts::{
    ActiveAlert, ActiveChange, AlertRow, AlertSummary, MAX_ALERTS_PER_DEPLOYMENT, Origin,
    PLANE_PREFIX, Source, change_for,
};
pub use audit::{AuditRow, NewAudit};
pub use deployment::DeploymentView;
pub use fleet::{ROLLOUT_COLUMNS, RolloutRow, StoredRollout};
pub use health::{Health, Thresholds};
pub use incidents::{
    INCIDENT_COLUMNS, IncidentProgress, IncidentRow, IncidentText, LaneAction, LaneRow,
    MAX_LIMIT as MAX_INCIDENTS_LIMIT, MAX_LISTED as MAX_INCIDENTS_LISTED, MAX_NOTE, MAX_PENDING,
    Outcome, PendingUpdate, decide, incident_row,
};
pub use tenants::{SupportRecord, TENANT_COLUMNS, TenantRecord, tenant_record};
pub use tokens::{
    ADMIN_TOKEN_PREFIX, AdminTokenInfo, Authenticated, DeploymentRow, Scope, TokenInfo,
};
