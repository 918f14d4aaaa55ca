//! Offboarding: the Rollout stopped, the data kept or deleted by the
//! tenant's retention policy, and the namespace removed last.

use super::*;

/// Stops the tenant's Rollout: deleted, so nothing re-applies the
/// tenant's workloads (the sync no longer has the tenant).
pub(super) async fn stop_rollout(cx: &StepCx<'_>) -> StepResult {
    cx.op
        .delete::<Rollout>(Writer::Tenant, cx.name, ROLLOUT_NAME, None)
        .await?;
    let left = cx
        .op
        .api::<Rollout>(cx.name)
        .get_opt(ROLLOUT_NAME)
        .await
        .map_err(|e| StepError::kube(format!("get Rollout {}", cx.name), e))?;
    Ok(match left {
        None => Outcome::Done,
        Some(_) => Outcome::Pending(format!("Rollout {}/{ROLLOUT_NAME} is going", cx.name)),
    })
}

/// `storage.retention`: `retain` keeps every bound volume past the
/// namespace (its PersistentVolume set to `Retain`, labelled with the
/// tenant and annotated with the AgentFS it held, so `exo fs list` shows
/// it Retained); `delete` deletes the claims.
pub(super) async fn data(cx: &StepCx<'_>, retention: Retention) -> StepResult {
    let claims = cx
        .op
        .api::<PersistentVolumeClaim>(cx.name)
        .list(&ListParams::default())
        .await
        .map_err(|e| StepError::kube(format!("list PersistentVolumeClaims in {}", cx.name), e))?;
    match retention {
        Retention::Delete => {
            for c in &claims.items {
                cx.op
                    .delete::<PersistentVolumeClaim>(Writer::Tenant, cx.name, &c.name_any(), None)
                    .await?;
            }
            Ok(Outcome::Done)
        }
        Retention::Retain => {
            for c in &claims.items {
                let Some(volume) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
                    continue;
                };
                let pv = PersistentVolume {
                    metadata: ObjectMeta {
                        name: Some(volume.clone()),
                        labels: Some(BTreeMap::from([(
                            LABEL_TENANT.to_owned(),
                            cx.name.to_owned(),
                        )])),
                        // The AgentFS it held (`exo fs list` shows it
                        // Retained under the tenant), or the claim.
                        annotations: Some(BTreeMap::from([(
                            ANNOTATION_RETAINED.to_owned(),
                            c.labels()
                                .get(crate::meta::LABEL_AGENTFS)
                                .cloned()
                                .unwrap_or_else(|| c.name_any()),
                        )])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(PersistentVolumeSpec {
                        persistent_volume_reclaim_policy: Some("Retain".to_owned()),
                        ..PersistentVolumeSpec::default()
                    }),
                    ..PersistentVolume::default()
                };
                let back = cx.op.apply_cluster(Writer::Tenant, &pv).await?;
                let policy = back
                    .spec
                    .and_then(|s| s.persistent_volume_reclaim_policy)
                    .unwrap_or_default();
                if policy != "Retain" {
                    return Ok(Outcome::Failed(format!(
                        "PersistentVolume {volume}: reclaim policy is {policy}, not Retain"
                    )));
                }
            }
            Ok(Outcome::Done)
        }
    }
}

/// The namespace goes last, once the grace period is over or the
/// offboarding is confirmed; Done once it is gone.
pub(super) async fn delete_namespace(cx: &StepCx<'_>) -> StepResult {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let started = cx
        .status
        .offboard_started_at
        .clone()
        .unwrap_or_else(|| now.clone());
    if let Err(left) = namespace_may_go(&settings(cx.tenant), &started, &now, confirmed(cx.tenant))
    {
        return Ok(Outcome::Pending(format!(
            "namespace {} is deleted in {} (offboardGracePeriod), or at once with `exo tenant offboard {} --confirm`; until then, restoring the tenant's folder in git brings it back",
            cx.name,
            human(left),
            cx.name
        )));
    }
    cx.op
        .delete_cluster::<Namespace>(Writer::Tenant, cx.name)
        .await?;
    let left = Api::<Namespace>::all(cx.op.client.clone())
        .get_opt(cx.name)
        .await
        .map_err(|e| StepError::kube(format!("get namespace {}", cx.name), e))?;
    Ok(match left {
        None => Outcome::Done,
        Some(_) => Outcome::Pending(format!("namespace {} is terminating", cx.name)),
    })
}

/// `1h2m`, `5m`, `40s`.
pub(super) fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}
