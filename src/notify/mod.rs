//! Notifications: telling people and systems what the operator did, in the
//! manner of Flux's notification-controller. `NotificationProvider` says
//! where notices go (a signed webhook, a Slack-compatible webhook, commit
//! statuses on Gitea or GitHub) and `NotificationRule` which ones (by
//! kind, tenant, severity); both are `crate::crd` kinds.
//!
//! Layout (a pure core, two thin edges):
//! - [`event`]: what is notified, an [`Event`] or a [`CommitStatus`];
//! - [`sink`]: the [`Notifier`] every emitter holds (never blocks, never
//!   fails, bounded) and the [`Notices`] queue the delivery task drains;
//! - [`select`]: which notices a rule sends, to which tenants;
//! - [`check`]: is a provider or rule usable, and if so the [`Target`] it
//!   resolves to (with its secret, never printed);
//! - [`payload`]: the bodies (webhook JSON and its HMAC-SHA256 signature,
//!   Slack, commit status);
//! - [`retry`]: the backoff between attempts;
//! - [`waves`]: whether a wave pointer's move is a promotion or a rollback;
//! - [`send`]: the thin HTTP edge, one attempt (over `net`, and the
//!   forge's edge for commit statuses).
//!
//! The delivery task (leader only: routing, retries, Events, metrics and
//! the resources' status) is `crate::operator::notify`. `docs/notifications.md`
//! is the user's view.

pub mod check;
pub mod event;
pub mod payload;
pub mod retry;
pub mod select;
pub mod send;
pub mod sink;
pub mod waves;

pub use check::{Problem, Target};
pub use event::{CommitState, CommitStatus, Event, EventKind, Notice, Severity};
pub use retry::Backoff;
pub use send::SendError;
pub use sink::{Notices, Notifier};
