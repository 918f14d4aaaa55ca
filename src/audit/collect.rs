//! The audit's I/O edge: one paged LIST per kind, cluster-wide; nothing
//! read object by object. Rollouts come first: they say which namespaces
//! are tenants', and each page of the namespaced kinds is narrowed to
//! those ([`Scope`]) before the next is read, so what is held is what the
//! rules read, whatever else the cluster has.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::{Scope, Snapshot};

/// Objects per page.
const PAGE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(
        "list {kind}: forbidden; the audit needs `list` on {kind} cluster-wide (deploy/rbac-audit.yaml)"
    )]
    Forbidden { kind: String },
    #[error("list {kind}: {source}")]
    List {
        kind: String,
        #[source]
        source: kube::Error,
    },
}

/// What one collection cost.
#[derive(Debug, Default, Clone, Copy)]
pub struct Requests {
    pub lists: u32,
}

/// Every object of `api` that `keep` keeps.
async fn list_all<K>(
    api: Api<K>,
    requests: &mut Requests,
    keep: impl Fn(&K) -> bool,
) -> Result<Vec<K>, AuditError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        requests.lists += 1;
        let page = api.list(&params).await.map_err(|e| {
            let kind = K::plural(&()).into_owned();
            match &e {
                kube::Error::Api(s) if s.code == 403 => AuditError::Forbidden { kind },
                _ => AuditError::List { kind, source: e },
            }
        })?;
        out.extend(page.items.into_iter().filter(|o| keep(o)));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = params.continue_token(&c),
            _ => break,
        }
    }
    Ok(out)
}

fn all<K>(client: &Client) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    Api::all(client.clone())
}

fn every<K>(_: &K) -> bool {
    true
}

/// Reads everything the rules look at.
pub async fn collect(client: &Client) -> Result<(Snapshot, Requests), AuditError> {
    let mut r = Requests::default();
    let rollouts = list_all(all(client), &mut r, every).await?;
    let scope = Scope::new(&rollouts);
    let snap = Snapshot {
        rollouts,
        fleets: list_all(all(client), &mut r, every).await?,
        pods: list_all(all(client), &mut r, |o| scope.keeps(o)).await?,
        nodes: list_all(Api::all(client.clone()), &mut r, every).await?,
        policies: list_all(all(client), &mut r, |o| scope.keeps(o)).await?,
        secrets: list_all(all(client), &mut r, |o| scope.keeps(o)).await?,
        configmaps: list_all(all(client), &mut r, |c| scope.keeps_configmap(c)).await?,
        claims: list_all(all(client), &mut r, |o| scope.keeps(o)).await?,
        tools: list_all(all(client), &mut r, |o| scope.keeps(o)).await?,
    };
    Ok((snap, r))
}
