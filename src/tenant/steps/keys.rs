//! Model and capability keys: minted for the tenant's scopes into its
//! access Secret, and revoked at the actuator that minted them.

use super::*;

pub(super) async fn actuator(cx: &StepCx<'_>) -> Result<Actuator, StepError> {
    let secret = cx
        .op
        .api::<Secret>(cx.operator_namespace)
        .get_opt(ACTUATOR_SECRET)
        .await
        .map_err(|e| {
            StepError::kube(
                format!("get Secret {}/{ACTUATOR_SECRET}", cx.operator_namespace),
                e,
            )
        })?;
    Ok(Actuator::from_secret(
        cx.operator_namespace,
        secret.as_ref().and_then(|s| s.data.as_ref()),
    )?)
}

pub(super) fn key_server(a: &Actuator) -> Result<Option<(KeyServer, Option<f64>)>, AccessError> {
    match a {
        Actuator::Kubernetes => Ok(None),
        Actuator::Http {
            url,
            token,
            max_budget,
        } => Ok(Some((KeyServer::new(url, token)?, *max_budget))),
    }
}

pub(super) async fn get_secret(cx: &StepCx<'_>, name: &str) -> Result<Option<Secret>, StepError> {
    cx.op
        .api::<Secret>(cx.name)
        .get_opt(name)
        .await
        .map_err(|e| StepError::kube(format!("get Secret {}/{name}", cx.name), e))
}

/// Model and capability access: the keys for the tenant's current scopes
/// in its access Secret, acknowledged by the actuator. Keys for other
/// scopes are moved to the retiring Secret first (revoked later, once the
/// pods using the new ones are verified).
pub(super) async fn mint_access(cx: &StepCx<'_>) -> StepResult {
    let scopes = Scopes::of(&cx.tenant.spec.settings);
    let live = get_secret(cx, ACCESS_SECRET).await?;
    let hash = scopes.hash();
    let for_scopes = live
        .as_ref()
        .is_some_and(|s| access::annotation(s, access::ANNOTATION_SCOPES) == Some(hash.as_str()));
    if let Some(old) = live.as_ref().filter(|_| !for_scopes) {
        let retiring = get_secret(cx, RETIRING_SECRET).await?;
        let r = access::retiring_secret(cx.name, old, retiring.as_ref());
        cx.op.apply(Writer::Tenant, &r).await?;
        if scopes.is_empty() {
            cx.op
                .delete::<Secret>(Writer::Tenant, cx.name, ACCESS_SECRET, None)
                .await?;
            return Ok(Outcome::Done);
        }
    }
    if scopes.is_empty() {
        return Ok(Outcome::Done);
    }
    let actuator = actuator(cx).await?;
    let live = match live.filter(|_| for_scopes) {
        Some(s) => s,
        None => {
            // Written before any server hears of the key: a crash from here
            // on finds it and finishes registering this one.
            // With no key server to tell, the Secret is the key store:
            // written minted at once.
            let keys = access::fresh_keys()?;
            let state = match actuator {
                Actuator::Kubernetes => STATE_MINTED,
                Actuator::Http { .. } => STATE_PENDING,
            };
            let secret = access::access_secret(cx.name, &keys, &scopes, actuator.name(), state);
            cx.op.apply(Writer::Tenant, &secret).await?
        }
    };
    let minted_by = access::annotation(&live, access::ANNOTATION_ACTUATOR).unwrap_or_default();
    if access::annotation(&live, access::ANNOTATION_STATE) != Some(STATE_MINTED) {
        if minted_by != actuator.name() {
            return Err(AccessError::OtherActuator {
                secret: format!("{}/{ACCESS_SECRET}", cx.name),
                minted_by: minted_by.to_owned(),
                configured: actuator.name().to_owned(),
            }
            .into());
        }
        if let Some((server, budget)) = key_server(&actuator)? {
            for key in access::model_keys(&live) {
                if !server.exists(&key).await? {
                    server.generate(cx.name, &key, &scopes, budget).await?;
                }
            }
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            access::ANNOTATION_STATE: STATE_MINTED}}});
        cx.op
            .patch_metadata::<Secret>(
                Writer::Tenant,
                cx.name,
                ACCESS_SECRET,
                live.metadata.resource_version.clone(),
                patch["metadata"].clone(),
            )
            .await?;
    }
    // Postcondition: read back, exactly this tenant's keys for its scopes.
    let Some(back) = get_secret(cx, ACCESS_SECRET).await? else {
        return Ok(Outcome::Pending(format!(
            "Secret {}/{ACCESS_SECRET} not readable yet",
            cx.name
        )));
    };
    Ok(match access::check_access(&back, &scopes) {
        Ok(()) => Outcome::Done,
        Err(why) => Outcome::Pending(why.to_string()),
    })
}

/// Revokes every key the Secrets `names` hold at the actuator that
/// minted them, then deletes the Secrets. Done once they are gone.
pub(super) async fn revoke(cx: &StepCx<'_>, names: &[&str]) -> StepResult {
    for name in names {
        let Some(s) = get_secret(cx, name).await? else {
            continue;
        };
        let minted_by = access::annotation(&s, access::ANNOTATION_ACTUATOR).unwrap_or("kubernetes");
        if minted_by == "http" {
            let actuator = actuator(cx).await?;
            let Some((server, _)) = key_server(&actuator)? else {
                return Err(AccessError::OtherActuator {
                    secret: format!("{}/{name}", cx.name),
                    minted_by: minted_by.to_owned(),
                    configured: actuator.name().to_owned(),
                }
                .into());
            };
            server.delete(&access::model_keys(&s)).await?;
        }
        cx.op
            .delete::<Secret>(Writer::Tenant, cx.name, name, s.metadata.uid.clone())
            .await?;
    }
    for name in names {
        if get_secret(cx, name).await?.is_some() {
            return Ok(Outcome::Pending(format!(
                "Secret {}/{name} is still there",
                cx.name
            )));
        }
    }
    Ok(Outcome::Done)
}
