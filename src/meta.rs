//! Every label, annotation, finalizer and field-manager name that Exo writes
//! onto Kubernetes objects, in one place. Any module may import this one;
//! it imports nothing, so a shared name never makes two modules depend on
//! each other.

// ---------------------------------------------------------------- field managers

/// The one field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "exo-operator";
/// Field manager of every write the upstream connection makes (pod control
/// asked for by the control plane), kept apart so a restart request never
/// takes over the operator's fields.
pub const FIELD_MANAGER_UPSTREAM: &str = "exo-upstream";
/// Name the operator reports Events under.
pub const CONTROLLER_NAME: &str = "exo-operator";

// ---------------------------------------------------------------- labels

/// `app.kubernetes.io/managed-by: exo` marks everything Exo owns.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "exo";
/// `app.kubernetes.io/component`: `agent`, `tool`, `agentfs` or `app`.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// The Agent a child belongs to.
pub const LABEL_AGENT: &str = "autonomic.sh/agent";
/// The Tool a child belongs to.
pub const LABEL_TOOL: &str = "autonomic.sh/tool";
/// The AgentFS a PVC belongs to.
pub const LABEL_AGENTFS: &str = "autonomic.sh/agentfs";
/// The App a pod or PVC belongs to.
pub const LABEL_APP: &str = "autonomic.sh/app";
/// On an App's PVC: which of its volumes it is, `workspace` or `database`.
pub const LABEL_APP_VOLUME: &str = "autonomic.sh/app-volume";
/// The tenant a workload or policy belongs to.
pub const LABEL_TENANT: &str = "autonomic.sh/tenant";
/// On a tenant's Rollout: the Fleet (by name) whose repository it follows.
pub const LABEL_FLEET: &str = "autonomic.sh/fleet";
/// On a tenant's Rollout: that Fleet's namespace (two namespaces may each
/// hold a Fleet of the same name).
pub const LABEL_FLEET_NAMESPACE: &str = "autonomic.sh/fleet-namespace";
/// Label carrying the source folder's name on every built baseline ConfigMap.
pub const LABEL_BASELINE: &str = "autonomic.sh/baseline";
/// A label on a Secret that holds a tenant's own credential (a virtual
/// key, a broker token): another tenant holding its value is a finding.
pub const LABEL_CREDENTIAL: &str = "autonomic.sh/credential";
/// Label naming the AgentFS a helper pod serves.
pub const LABEL_FS_HELPER: &str = "autonomic.sh/fs-helper";
/// On a restore drill's scratch AgentFS: the AgentFS whose backup it
/// proves (it is owned by that volume too).
pub const LABEL_BACKUP_DRILL: &str = "autonomic.sh/backup-drill";
/// The node label (and taint key) that names a node's tier.
pub const LABEL_NODE_TIER: &str = "autonomic.sh/node-tier";
/// Nodes with this label run the cluster's control plane: no tenant pod
/// (Kubernetes' own well-known label).
pub const LABEL_CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

// ---------------------------------------------------------------- annotations

/// On a tenant Namespace: the uids its pods run as, `<first>-<last>`.
pub const ANNOTATION_UID_RANGE: &str = "autonomic.sh/uid-range";
/// Hash of the desired object; a child whose annotation matches is not
/// written again, a pod whose annotation differs is rolled.
pub const ANNOTATION_SPEC_HASH: &str = "autonomic.sh/spec-hash";
/// On an object the fleet sync applies whole (an AgentFS): the hash of the
/// body it applied, so a restarted operator sees in its cache that the
/// object is as git has it and does not apply it again.
pub const ANNOTATION_APPLIED_HASH: &str = "autonomic.sh/applied-hash";
/// Set on an Agent (by `exo` pod control or by hand) to roll its pod: the
/// value is carried into the pod template, so each new value restarts it.
pub const ANNOTATION_RESTART_REQUESTED: &str = "autonomic.sh/restart-requested-at";
/// The container `kubectl exec` and `exo attach` use when none is named
/// (Kubernetes' own well-known annotation): an Agent pod's `runtime`, a
/// Tool pod's `tool`.
pub const ANNOTATION_DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// What a client-side `kubectl apply` leaves on an object (Kubernetes' own
/// well-known annotation): a copy of the whole applied object, which no
/// reader of the operator's caches needs (`cluster::slim` drops it).
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Set on a PVC that outlives its AgentFS or App because of `retain: true`:
/// the name of the AgentFS or App it came from. An App's retained PVCs
/// carry it from the start (they have no owner to lose); they are listed
/// `Retained` once no App of that name is left.
pub const ANNOTATION_RETAINED: &str = "autonomic.sh/retained-from";
/// Capabilities the operator advertises (Lease annotation, `/healthz`).
pub const ANNOTATION_CAPABILITIES: &str = "autonomic.sh/capabilities";
/// Annotation on an Agent: the time of its last check-in (RFC 3339),
/// written by the replica that took it (at most once per write interval).
pub const ANNOTATION_LAST_CHECKIN: &str = "autonomic.sh/last-checkin";
/// On an Agent and its pod: the hash of the tenant's access scopes (models
/// and capabilities). The pod takes the tenant's keys from
/// [`TENANT_ACCESS_SECRET`] as env, and a new hash rolls it onto new keys.
pub const ANNOTATION_ACCESS_SCOPES: &str = "autonomic.sh/access-scopes";
/// The tenant's access Secret (its virtual key, broker token and tracing
/// keys), in its namespace.
pub const TENANT_ACCESS_SECRET: &str = "exo-tenant-access";
/// On a `Tenant`: `true` lets an offboarded tenant's namespace go before
/// its grace period (`offboardGracePeriod`) is over.
pub const ANNOTATION_OFFBOARD_CONFIRM: &str = "autonomic.sh/offboard-confirm";
/// Set on a Fleet to ask for a sync now (push receiver, `exo`).
pub const ANNOTATION_SYNC_REQUESTED: &str = "autonomic.sh/sync-requested-at";
/// Set on a Fleet by the tenant engine when a tenant's rollout gate opens:
/// the sync applies the commit it has again (the Rollout it held back),
/// without fetching a newer one before its interval or a sync request.
pub const ANNOTATION_TENANT_GATE_OPENED: &str = "autonomic.sh/tenant-gate-opened-at";
/// The full content hash of a baseline ConfigMap.
pub const ANNOTATION_CONTENT_SHA256: &str = "autonomic.sh/content-sha256";
/// Unix seconds of an fs helper pod's last use; every use moves it forward,
/// and the operator deletes the helper once its idle time has passed
/// since then (the operator's setting decides, whichever route used it).
pub const ANNOTATION_FS_HELPER_LAST_USED: &str = "autonomic.sh/fs-helper-last-used";
/// On an AgentFS: a backup is asked for now (`exo fs backup`); the value
/// is the request, which `status.backup.answeredRequest` echoes once done.
pub const ANNOTATION_BACKUP_REQUESTED: &str = "autonomic.sh/backup-requested-at";
/// On a Service: its metrics are circuit telemetry to scrape (the model
/// gateway's, the broker's). The label puts the Service in the operator's
/// one label-selected watch (the apiserver selects by labels only); any
/// value will do. docs/circuits.md.
pub const LABEL_METRICS: &str = "autonomic.sh/metrics";
/// On a Service labelled [`LABEL_METRICS`]: where its metrics are,
/// `<port>/<path>` (a port number or name; the path `/metrics` by default).
pub const ANNOTATION_METRICS: &str = "autonomic.sh/metrics";

// ---------------------------------------------------------------- finalizers

/// Finalizer on an Agent: the pod is gone before the Agent is, so the
/// Agent passes through `Terminating` and an AgentFS is only released once
/// no pod mounts it.
pub const FINALIZER_AGENT: &str = "autonomic.sh/agent-cleanup";
/// Finalizer on an AgentFS: holds deletion while Agents mount it, and
/// releases a retained PVC before the AgentFS goes.
pub const FINALIZER_AGENTFS: &str = "autonomic.sh/agentfs-protection";

// ---------------------------------------------------------------- object and container names

/// Name of the Rollout object in each tenant namespace.
pub const ROLLOUT_NAME: &str = "release";
/// Key of the generated token in the per-agent Secret.
pub const TOKEN_KEY: &str = "token";
/// The agent pod's workload container: where a shell or a check of the
/// mounted baseline belongs, and the pod's default container.
pub const AGENT_RUNTIME_CONTAINER: &str = "runtime";
/// The agent pod's sidecar (token, agentlet port).
pub const AGENT_AGENTLET_CONTAINER: &str = "agentlet";
/// A Tool pod's one container, also its default container.
pub const TOOL_CONTAINER: &str = "tool";
/// An App pod's app container, also its default container.
pub const APP_CONTAINER: &str = "app";
/// An App pod's Postgres sidecar.
pub const APP_POSTGRES_CONTAINER: &str = "postgres";
/// The fs helper pod's container.
pub const HELPER_CONTAINER: &str = "fs";
