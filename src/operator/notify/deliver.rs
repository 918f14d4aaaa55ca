//! One provider's worker: its deliveries one at a time, each tried until it
//! is delivered, refused for good, or out of attempts ([`Backoff`]).
//!
//! A failed attempt is counted by reason; a delivery that fails for good
//! is counted as `failed`, logged, and a `NotificationFailed` Event on the
//! rule names the provider, the notice and the last error. Every message
//! passes through the target's scrub first, so no secret reaches a log or
//! an Event even when a receiver echoes one.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::Job;
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::notify::check::{SecretData, resolve};
use crate::notify::payload::render;
use crate::notify::send::attempt;
use crate::notify::{Backoff, Notice};

/// Delivers the jobs of one provider until its queue closes.
pub(super) async fn worker(
    ctx: Arc<Ctx>,
    client: crate::net::Client,
    backoff: Backoff,
    mut jobs: mpsc::Receiver<Job>,
) {
    while let Some(job) = jobs.recv().await {
        deliver(&ctx, &client, backoff, &job).await;
    }
}

/// The Secret `name` in `namespace`: its data, or `None` when it does not
/// exist.
pub(super) async fn read_secret(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
) -> Result<SecretData, kube::Error> {
    let secret = kube::Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(secret.map(|s| s.data.unwrap_or_default()))
}

/// What the notice is, for a message: its kind and tenants.
fn what(notice: &Notice, tenants: &[String]) -> String {
    let about = if tenants.is_empty() {
        String::new()
    } else {
        format!(" for {}", tenants.join(", "))
    };
    match notice {
        Notice::Event(e) => format!("event {}{about}", e.kind),
        Notice::Status(s) => format!(
            "commit status {} on {}{about}",
            s.state.as_str(),
            &s.commit[..s.commit.len().min(12)]
        ),
    }
}

async fn deliver(ctx: &Ctx, client: &crate::net::Client, backoff: Backoff, job: &Job) {
    let ns = job.provider.namespace().unwrap_or_default();
    let provider = job.provider.name_any();
    let rule = job.rule.name_any();
    let what = what(&job.notice, &job.tenants);
    let mut n = 0;
    let (ns, provider, rule, what) = (&ns, &provider, &rule, &what);
    let fail = |why: String| async move {
        ctx.metrics.notify.delivery(ns, provider, "failed");
        warn!(namespace = %ns, %provider, %rule, notice = %what, error = %why, "notification not delivered");
        let note =
            format!("{what} not delivered through NotificationProvider {ns}/{provider}: {why}");
        ctx.event(
            job.rule.as_ref(),
            EventType::Warning,
            Reason::NotificationFailed,
            crate::wire::clip_to(&note, 1024).to_owned(),
        )
        .await;
    };
    let target = loop {
        n += 1;
        let secret = match job.provider.spec.secret_ref.as_deref() {
            None => Ok(None),
            Some(name) => read_secret(ctx, ns, name).await,
        };
        match secret {
            Ok(data) => match resolve(ns, &job.provider.spec, &data) {
                Ok(t) => break t,
                Err(problem) => {
                    ctx.metrics.notify.attempt_failed(ns, provider, "invalid");
                    return fail(problem.to_string()).await;
                }
            },
            Err(e) => {
                // The apiserver's trouble, not the provider's: worth a retry.
                ctx.metrics
                    .notify
                    .attempt_failed(ns, provider, "unreachable");
                let why = format!("cannot read its Secret: {e}");
                match backoff.after(n) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return fail(why).await,
                }
            }
        }
    };
    let Some(out) = render(&target, &job.notice, &job.tenants) else {
        return;
    };
    loop {
        match attempt(client, &out).await {
            Ok(()) => {
                ctx.metrics.notify.delivery(ns, provider, "delivered");
                info!(namespace = %ns, %provider, %rule, notice = %what, attempts = n, "notification delivered");
                return;
            }
            Err(e) => {
                ctx.metrics
                    .notify
                    .attempt_failed(ns, provider, e.category());
                let why = target.scrub(&e.to_string());
                let wait = if e.retryable() {
                    backoff.after(n)
                } else {
                    None
                };
                let Some(wait) = wait else {
                    let why = format!("{n} attempt(s); the last: {why}");
                    return fail(why).await;
                };
                warn!(namespace = %ns, %provider, %rule, notice = %what, attempt = n, error = %why, retry_in = ?wait, "notification attempt failed");
                tokio::time::sleep(wait).await;
                n += 1;
            }
        }
    }
}
