//! The upstream wire protocol shared by the operator (client) and the
//! control plane (server). `docs/protocol.md` is the normative description;
//! this module is its Rust form.
//!
//! Guarantees: one frame is one WebSocket text message holding one JSON
//! object with a `type` field; unknown fields are ignored (forward
//! compatibility inside a protocol version), unknown `type`s are a protocol
//! violation. The protocol version is an integer carried in `hello`; a server
//! that does not speak it closes with [`close::UNSUPPORTED_VERSION`].

use serde::{Deserialize, Serialize};

mod alert;
pub mod close;
pub mod fleet;
pub mod fs;
pub mod incident;
mod parse;
mod registry;
mod resource;
pub mod token;
pub use alert::{Alert, AlertAck, AlertError, AlertState, Severity, limits as alert_limits};
pub use fs::{FsAbort, FsChunk, FsChunkAck};
pub use incident::{
    CAP_INCIDENT_UPDATES, IncidentAck, IncidentRecord, IncidentUpdate, IncidentUpdateAck, LaneState,
};
pub use parse::FrameError;
pub use registry::{
    RecordKind, RegisterAck, Registration, RegistrationError, SupportLane, TenantRegister,
    limits as registry_limits,
};
pub use resource::{Resource, ResourceKey, ResourceKind};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// The path of the WebSocket endpoint, relative to the control plane's base URL.
pub const CONNECT_PATH: &str = "/api/v1/connect";
/// Default maximum size of one frame (one WebSocket message), in bytes.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 1024 * 1024;

/// One wire frame. Serialized as `{"type": "<snake_case name>", ...fields}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    // ------------------------------------------------ client -> server
    Hello(Hello),
    Snapshot(SnapshotChunk),
    Delta(Delta),
    Heartbeat(Heartbeat),
    CommandAck(CommandAck),
    CommandResult(CommandResult),
    Audit(AuditRecord),
    Alert(Alert),
    Incident(IncidentRecord),
    IncidentUpdateAck(IncidentUpdateAck),
    TenantRegister(TenantRegister),
    SupportLane(SupportLane),
    // ------------------------------------------------ server -> client
    Welcome(Welcome),
    AlertAck(AlertAck),
    IncidentAck(IncidentAck),
    IncidentUpdate(IncidentUpdate),
    RegisterAck(RegisterAck),
    Command(CommandRequest),
    PodControl(PodControlRequest),
    AttachOpen(AttachOpen),
    AttachResize(AttachResize),
    // ------------------------------------------------ both directions
    AttachData(AttachData),
    AttachClose(AttachClose),
    FsChunk(FsChunk),
    FsChunkAck(FsChunkAck),
    FsAbort(FsAbort),
}

impl Frame {
    /// The frame's `type`, for logs and metrics (bounded set).
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "hello",
            Frame::Snapshot(_) => "snapshot",
            Frame::Delta(_) => "delta",
            Frame::Heartbeat(_) => "heartbeat",
            Frame::CommandAck(_) => "command_ack",
            Frame::CommandResult(_) => "command_result",
            Frame::Audit(_) => "audit",
            Frame::Alert(_) => "alert",
            Frame::Incident(_) => "incident",
            Frame::IncidentUpdateAck(_) => "incident_update_ack",
            Frame::TenantRegister(_) => "tenant_register",
            Frame::SupportLane(_) => "support_lane",
            Frame::Welcome(_) => "welcome",
            Frame::AlertAck(_) => "alert_ack",
            Frame::IncidentAck(_) => "incident_ack",
            Frame::IncidentUpdate(_) => "incident_update",
            Frame::RegisterAck(_) => "register_ack",
            Frame::Command(_) => "command",
            Frame::PodControl(_) => "pod_control",
            Frame::AttachOpen(_) => "attach_open",
            Frame::AttachResize(_) => "attach_resize",
            Frame::AttachData(_) => "attach_data",
            Frame::AttachClose(_) => "attach_close",
            Frame::FsChunk(_) => "fs_chunk",
            Frame::FsChunkAck(_) => "fs_chunk_ack",
            Frame::FsAbort(_) => "fs_abort",
        }
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// First frame of every connection, client -> server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The operator build, e.g. `0.1.0`.
    pub agent_version: String,
    /// Random id of this operator process; changes on every restart.
    pub boot_id: String,
    /// Random id of this dial; changes on every reconnect.
    pub connection_id: String,
    #[serde(default)]
    pub host: HostMeta,
    /// What this operator can do (e.g. `mount-filesystems`); the control
    /// plane sends a command only to an operator that advertises it.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostMeta {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub arch: String,
    /// The namespace the operator watches, empty for all namespaces.
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub kubernetes_version: String,
}

/// Server -> client answer to a valid `hello`: the connection is registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol: u32,
    /// The deployment the token belongs to (derived by the server).
    pub deployment: String,
    pub connection_id: String,
    /// Client heartbeats should be at least this frequent.
    pub heartbeat_interval_ms: u64,
    /// The server takes `alert` frames. A client sends none otherwise: an
    /// older server would close the connection on the unknown type.
    #[serde(default)]
    pub accepts_alerts: bool,
    /// The server takes resources of kind `Rollout`. A client sends none
    /// otherwise: an older server would close the connection on the kind.
    #[serde(default)]
    pub accepts_rollouts: bool,
    /// The server takes resources of kind `Tenant`; likewise, a client
    /// sends none otherwise.
    #[serde(default)]
    pub accepts_tenants: bool,
    /// The server takes `tenant_register` and `support_lane` frames and
    /// answers them with `register_ack`. A client sends none otherwise;
    /// its tenant sagas wait at the steps that need them.
    #[serde(default)]
    pub accepts_registrations: bool,
    /// The server takes `incident` frames and answers them with
    /// `incident_ack`. A client sends none otherwise; its incidents stay
    /// `Received` in the cluster until one that takes them connects.
    #[serde(default)]
    pub accepts_incidents: bool,
    /// The server takes resources of kind `App`; a client sends none
    /// otherwise (an older server would close the connection on the kind).
    #[serde(default)]
    pub accepts_apps: bool,
    /// The server takes resources of kind `AnalysisRun`; a client sends
    /// none otherwise, as for Apps.
    #[serde(default)]
    pub accepts_analysis_runs: bool,
}

/// One chunk of a snapshot. Chunks of one snapshot share `snapshot_id`, are
/// numbered from 0 and the last one has `last: true`; the receiver swaps its
/// state for the snapshot's content only then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotChunk {
    pub snapshot_id: String,
    pub chunk: u32,
    pub last: bool,
    pub resources: Vec<Resource>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaOp {
    Upsert,
    Remove,
}

/// One change. `resource` is the full object for `upsert`; for `remove` only
/// its key and last `resourceVersion` are meaningful.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Monotonic per connection, starting at 1.
    pub seq: u64,
    pub op: DeltaOp,
    pub resource: Resource,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Sender's wall clock, Unix milliseconds (informational only).
    pub sent_at_ms: u64,
    /// How many resources the sender holds.
    #[serde(default)]
    pub resources: u64,
}

/// A tunnelled command, server -> client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRequest {
    pub id: String,
    /// Unix milliseconds after which the result is no longer wanted.
    pub deadline_ms: u64,
    /// Who asked, for audit.
    #[serde(default)]
    pub actor: String,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Command {
    /// Create an AgentFS volume.
    AgentfsCreate {
        namespace: String,
        fs_name: String,
        size: String,
        max_size: String,
        #[serde(default)]
        retain: bool,
        /// `ReadWriteOnce` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        access_mode: Option<String>,
    },
    /// List AgentFS volumes (and retained volumes), in one namespace or all.
    AgentfsList {
        #[serde(default)]
        namespace: Option<String>,
    },
    /// List a folder of a volume, with the volume's real usage.
    AgentfsLs {
        namespace: String,
        fs_name: String,
        path: String,
    },
    /// Create a folder (and missing parents).
    AgentfsMkdir {
        namespace: String,
        fs_name: String,
        path: String,
    },
    /// Create an empty file (or update an existing file's time).
    AgentfsTouch {
        namespace: String,
        fs_name: String,
        path: String,
    },
    /// Grow a volume; refused when shrinking or above `maxSize`.
    AgentfsResize {
        namespace: String,
        fs_name: String,
        size: String,
    },
    /// Delete an AgentFS; refused while agents mount it.
    AgentfsDelete { namespace: String, fs_name: String },
    /// Copy into a volume: the tar stream follows as `fs_chunk` frames.
    AgentfsWrite {
        namespace: String,
        fs_name: String,
        /// Destination path in the volume (cp rules: into it when it is
        /// an existing folder).
        path: String,
        /// The one top name every entry of the stream lies under.
        top: String,
        /// Refuse more file bytes than this.
        max_bytes: u64,
    },
    /// Copy out of a volume: the operator sends `fs_chunk` frames.
    AgentfsRead {
        namespace: String,
        fs_name: String,
        path: String,
        max_bytes: u64,
    },
    /// List the Apps' volumes (and volumes retained from deleted Apps),
    /// in one namespace or all.
    AppVolumes {
        #[serde(default)]
        namespace: Option<String>,
    },
    /// Grow an App's workspace, database, or both; refused when shrinking
    /// or above `maxSize`.
    AppResize {
        namespace: String,
        app_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        database: Option<String>,
    },
}

impl Command {
    /// The capability an operator must advertise to be sent this command
    /// (an operator without it would close its connection on the unknown
    /// command name).
    pub fn capability(&self) -> &'static str {
        match self {
            Command::AppVolumes { .. } | Command::AppResize { .. } => fs::CAP_APP_STORAGE,
            _ => fs::CAP_MOUNT_FILESYSTEMS,
        }
    }

    /// Whether bytes follow the command as `fs_chunk` frames.
    pub fn streams(&self) -> bool {
        matches!(
            self,
            Command::AgentfsWrite { .. } | Command::AgentfsRead { .. }
        )
    }
}

/// Pod control, server -> client. Carried out through the Agent resource,
/// never by editing pods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodControlRequest {
    pub id: String,
    pub deadline_ms: u64,
    #[serde(default)]
    pub actor: String,
    pub action: PodAction,
    pub namespace: String,
    pub agent: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodAction {
    Restart,
    Pause,
    Resume,
}

impl PodAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PodAction::Restart => "restart",
            PodAction::Pause => "pause",
            PodAction::Resume => "resume",
        }
    }
}

/// Client -> server: the request `id` was received and will be carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandAck {
    pub id: String,
}

/// Client -> server: outcome of a command or pod-control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandResult {
    pub id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub result: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Client -> server: an audit record the control plane stores durably.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub at_ms: u64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

/// Server -> client: open an exec session (a shell by default) in an
/// agent's pod and stream its I/O as `attach_data` frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachOpen {
    /// Chosen by the server; names the session in every attach frame.
    pub session: String,
    pub namespace: String,
    pub agent: String,
    /// Container in the agent's pod; default: the one the pod's
    /// `kubectl.kubernetes.io/default-container` annotation names, else the
    /// pod's first (the operator picks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Command to run; default `["sh"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Allocate a terminal (PTY).
    #[serde(default)]
    pub tty: bool,
    #[serde(default)]
    pub cols: u16,
    #[serde(default)]
    pub rows: u16,
    #[serde(default)]
    pub actor: String,
}

/// Server -> client: the user's terminal changed size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachResize {
    pub session: String,
    pub cols: u16,
    pub rows: u16,
}

/// Bytes of an attach session, base64 (standard alphabet, padded): stdin
/// server -> client, stdout (and, without a TTY, stderr) client -> server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachData {
    pub session: String,
    pub data: String,
}

/// The `attach_close` reason of a command that exited 0; anything else
/// is a failure.
pub const ATTACH_EXITED_OK: &str = "exited: 0";

/// Either side ends an attach session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachClose {
    pub session: String,
    #[serde(default)]
    pub reason: String,
}

pub use crate::text::clip_to;

/// `s` whole when it has at most `max_bytes` bytes, else its longest
/// prefix that leaves room for [`close::ELLIPSIS`], cut on a char boundary
/// and marked with it: for naming a peer's value (a type, an id) in a
/// reason without letting it fill the reason.
pub fn clip_marked(s: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max_bytes {
        return s.into();
    }
    let keep = clip_to(s, max_bytes.saturating_sub(close::ELLIPSIS.len()));
    format!("{keep}{}", close::ELLIPSIS).into()
}

/// Wall clock in Unix milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A random id: 16 bytes from the OS as 32 hex characters.
pub fn random_id() -> String {
    let mut b = [0u8; 16];
    // getrandom only fails when the OS has no entropy source at all; fall
    // back to time and a counter so ids stay unique (they are not secrets).
    if getrandom::fill(&mut b).is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let t = now_ms().to_le_bytes();
        let n = N.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        b[..8].copy_from_slice(&t);
        b[8..].copy_from_slice(&n);
    }
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_tagged_snake_case_json() {
        let f = Frame::Heartbeat(Heartbeat {
            sent_at_ms: 5,
            resources: 2,
        });
        let v: serde_json::Value = serde_json::from_str(&f.to_json().unwrap()).unwrap();
        assert_eq!(v["type"], "heartbeat");
        assert_eq!(v["sent_at_ms"], 5);
    }

    #[test]
    fn an_older_welcome_takes_no_rollouts_or_tenants() {
        let old = r#"{"type":"welcome","protocol":1,"deployment":"d","connection_id":"c",
            "heartbeat_interval_ms":15000,"accepts_alerts":true,"accepts_rollouts":true}"#;
        let Frame::Welcome(w) = Frame::from_json(old).unwrap() else {
            panic!("not a welcome")
        };
        assert!(w.accepts_rollouts && !w.accepts_tenants, "{w:?}");
        let oldest = r#"{"type":"welcome","protocol":1,"deployment":"d","connection_id":"c",
            "heartbeat_interval_ms":15000}"#;
        let Frame::Welcome(w) = Frame::from_json(oldest).unwrap() else {
            panic!("not a welcome")
        };
        assert!(!w.accepts_alerts && !w.accepts_rollouts && !w.accepts_tenants);
        assert!(!w.accepts_apps && !w.accepts_analysis_runs);
    }

    #[test]
    fn resource_key_is_flattened_and_unknown_fields_ignored() {
        let text = r#"{"type":"delta","seq":1,"op":"remove","future":true,
            "resource":{"kind":"Agent","namespace":"a","name":"b","resourceVersion":"7"}}"#;
        let Frame::Delta(d) = Frame::from_json(text).unwrap() else {
            panic!("not a delta")
        };
        assert_eq!(d.op, DeltaOp::Remove);
        assert_eq!(d.resource.key.kind, ResourceKind::Agent);
        assert_eq!(d.resource.resource_version, "7");
    }

    #[test]
    fn clip_to_ends_on_a_char_boundary() {
        assert_eq!(clip_to("abc", 5), "abc");
        assert_eq!(clip_to("abc", 2), "ab");
        // 'é' is two bytes: a limit inside it keeps what is before it.
        assert_eq!(clip_to("aé", 2), "a");
        assert_eq!(clip_to("é", 0), "");
    }

    #[test]
    fn clip_marked_says_that_it_cut() {
        assert_eq!(clip_marked("abc", 3), "abc");
        assert_eq!(clip_marked("abcdefgh", 7), "abcd…");
        // The room for the text ends inside 'é': keep what is before it.
        assert_eq!(clip_marked("aaééé", 6), "aa…");
    }

    #[test]
    fn unknown_type_is_an_error() {
        assert!(Frame::from_json(r#"{"type":"nope"}"#).is_err());
    }

    #[test]
    fn attach_frames_round_trip_with_defaults() {
        let text = r#"{"type":"attach_open","session":"s","namespace":"n","agent":"a"}"#;
        let Frame::AttachOpen(o) = Frame::from_json(text).unwrap() else {
            panic!("not attach_open")
        };
        assert!(o.command.is_empty() && !o.tty && o.container.is_none());
        let d = Frame::AttachData(AttachData {
            session: "s".into(),
            data: "aGk=".into(),
        });
        assert_eq!(Frame::from_json(&d.to_json().unwrap()).unwrap(), d);
        assert_eq!(d.kind(), "attach_data");
    }

    #[test]
    fn commands_round_trip() {
        let c = Frame::Command(CommandRequest {
            id: "1".into(),
            deadline_ms: 9,
            actor: "me".into(),
            command: Command::AgentfsList { namespace: None },
        });
        let text = c.to_json().unwrap();
        assert!(text.contains(r#""name":"agentfs_list""#), "{text}");
        assert_eq!(Frame::from_json(&text).unwrap(), c);
    }
}
