//! Events, published in the background and only while the lease is current.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};
use tracing::{debug, warn};

use super::Ctx;
use crate::cluster::events::Reason;

impl Ctx {
    /// Publishes an Event in the background: a reconcile never waits for
    /// (or fails on) its Events.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: Reason,
        note: String,
    ) {
        self.event_on(obj.object_ref(&()), type_, reason, note)
            .await
    }

    /// [`Ctx::event`] about an object known only by reference (an audit
    /// finding's pod or Secret).
    pub async fn event_on(
        &self,
        reference: k8s_openapi::api::core::v1::ObjectReference,
        type_: EventType,
        reason: Reason,
        note: String,
    ) {
        self.publish(self.recorder.clone(), reference, type_, reason, note);
    }

    /// [`Ctx::event`], as an Event of its own: the shared recorder folds
    /// an Event with the reason of one it published about the same object
    /// in the last minutes into that one's series, which keeps the first
    /// note. For a note that names what differs (the commit a Fleet
    /// refused), the caller publishing only what is new.
    pub async fn event_distinct<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: Reason,
        note: String,
    ) {
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        self.publish(recorder, obj.object_ref(&()), type_, reason, note);
    }

    fn publish(
        &self,
        recorder: Recorder,
        reference: k8s_openapi::api::core::v1::ObjectReference,
        type_: EventType,
        reason: Reason,
        note: String,
    ) {
        if self.fenced().is_err() {
            debug!(
                reason = reason.as_str(),
                "Event not published: the lease is not current"
            );
            return;
        }
        let ev = Event {
            type_,
            reason: reason.as_str().to_owned(),
            note: Some(note),
            action: reason.action().to_owned(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&ev, &reference).await {
                warn!(reason = reason.as_str(), error = %e, "could not publish an Event");
            }
        });
    }
}
