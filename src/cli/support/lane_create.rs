//! `exo support lane create LANE --deployment D --tenant T [--contact C]…`:
//! routes a tenant's incidents to a lane (its unrouted ones at once). Needs
//! a full admin token.

use clap::Args;
use hyper::Method;

use super::{SupportError, failed};
use crate::cli::exit;
use crate::cli::plane::{PlaneArgs, enc};

#[derive(Debug, Args)]
pub struct LaneCreateArgs {
    /// The lane's name (a DNS label).
    pub lane: String,
    /// The deployment (cluster) the tenant runs on.
    #[arg(long)]
    pub deployment: String,
    /// The tenant (its namespace).
    #[arg(long)]
    pub tenant: String,
    /// Who is on call for the lane (repeat for more).
    #[arg(long = "contact")]
    pub contacts: Vec<String>,
}

async fn create(plane: &PlaneArgs, a: &LaneCreateArgs) -> Result<u64, SupportError> {
    if !crate::names::is_dns1123_label(&a.lane) {
        return Err(SupportError::BadLane(a.lane.clone()));
    }
    let path = format!(
        "/api/v1/lanes/{}/tenants/{}/{}",
        enc(&a.lane),
        enc(&a.deployment),
        enc(&a.tenant)
    );
    let body = serde_json::json!({ "contacts": a.contacts });
    let v = plane.call(Method::PUT, &path, Some(&body)).await?;
    Ok(v.get("adopted").and_then(|n| n.as_u64()).unwrap_or(0))
}

pub async fn run(plane: &PlaneArgs, a: &LaneCreateArgs) -> u8 {
    match create(plane, a).await {
        Ok(adopted) => {
            println!(
                "tenant {}/{} routed to lane {} ({adopted} waiting incident(s) moved in)",
                a.deployment, a.tenant, a.lane
            );
            exit::OK
        }
        Err(e) => failed("lane create", &e),
    }
}
