//! `exo support …`: the support lanes on the control plane. Support reads
//! a lane's incidents with their technical detail, acknowledges and
//! resolves them (the tenant's view follows), and routes tenants to lanes.
//! One module per verb, [`view`] for what they print. Every verb talks to
//! the control plane's API with an admin token: a full one, or one limited
//! to a lane (`exo control-plane admin-token create --lane`).

use clap::{Args, Subcommand};

use crate::cli::exit;
use crate::cli::plane::{PlaneArgs, PlaneError, enc};
use crate::cli::release::common::Output;

pub mod ack;
pub mod lane_create;
pub mod lane_list;
pub mod list;
pub mod resolve;
pub mod show;
pub mod view;

#[derive(Debug, Args)]
pub struct SupportArgs {
    #[command(flatten)]
    pub plane: PlaneArgs,
    #[command(subcommand)]
    pub command: SupportCommand,
}

#[derive(Debug, Subcommand)]
pub enum SupportCommand {
    /// A lane's incidents, newest first: id, deployment, tenant, severity,
    /// state, age, summary.
    List(list::ListArgs),
    /// One incident with its technical detail (secrets masked).
    Show(show::ShowArgs),
    /// Acknowledge an incident: support has it. Its tenant is told.
    Ack(ack::AckArgs),
    /// Resolve an incident. Its tenant is told.
    Resolve(resolve::ResolveArgs),
    /// The lanes: list them, or route a tenant's incidents to one.
    #[command(subcommand)]
    Lane(LaneCommand),
}

#[derive(Debug, Subcommand)]
pub enum LaneCommand {
    /// Every lane this token may read: its tenants and its incidents by
    /// state.
    List(lane_list::LaneListArgs),
    /// Route a tenant's incidents to a lane (a lane the tenant's operator
    /// registered from the Tenant's spec.support is changed there).
    Create(lane_create::LaneCreateArgs),
}

/// Which incident: its id, and the lane and deployment when needed.
#[derive(Debug, Args)]
pub struct Which {
    /// The incident's id (`inc-` and 24 hex digits).
    pub id: String,
    /// The lane it is in; may be left out when the token reaches one lane.
    #[arg(long)]
    pub lane: Option<String>,
    /// The deployment, when two have an incident of this id in the lane.
    #[arg(long)]
    pub deployment: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

impl Which {
    /// The incident's API path below its lane, with `?deployment=`.
    fn path(&self, lane: &str, tail: &str) -> String {
        let mut p = format!(
            "/api/v1/lanes/{}/incidents/{}{tail}",
            enc(lane),
            enc(&self.id)
        );
        if let Some(d) = &self.deployment {
            p.push_str(&format!("?deployment={}", enc(d)));
        }
        p
    }
}

pub fn run(args: SupportArgs) -> u8 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo support: tokio runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    let plane = args.plane;
    rt.block_on(async move {
        match args.command {
            SupportCommand::List(a) => list::run(&plane, &a).await,
            SupportCommand::Show(a) => show::run(&plane, &a).await,
            SupportCommand::Ack(a) => ack::run(&plane, &a).await,
            SupportCommand::Resolve(a) => resolve::run(&plane, &a).await,
            SupportCommand::Lane(LaneCommand::List(a)) => lane_list::run(&plane, &a).await,
            SupportCommand::Lane(LaneCommand::Create(a)) => lane_create::run(&plane, &a).await,
        }
    })
}

/// Why a support verb could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    #[error(transparent)]
    Plane(#[from] PlaneError),
    #[error("the control plane's answer is not what this build reads: {0}")]
    Answer(#[from] serde_json::Error),
    #[error("--lane {0:?} is not a lane name (a DNS label)")]
    BadLane(String),
    #[error("{0:?} is not an incident id (inc- and 24 hex digits)")]
    BadId(String),
    #[error("this token reaches no lane yet; name one with --lane")]
    NoLane,
    #[error("this token reaches {0} lanes ({1}); name one with --lane")]
    ManyLanes(usize, String),
}

/// The lane to work in: `--lane`, or the only one the token reaches.
pub async fn lane_of(plane: &PlaneArgs, lane: Option<&str>) -> Result<String, SupportError> {
    if let Some(l) = lane {
        if !crate::names::is_dns1123_label(l) {
            return Err(SupportError::BadLane(l.to_owned()));
        }
        return Ok(l.to_owned());
    }
    let lanes = lane_list::fetch(plane).await?;
    match lanes.as_slice() {
        [] => Err(SupportError::NoLane),
        [one] => Ok(one.lane.clone()),
        many => Err(SupportError::ManyLanes(
            many.len(),
            many.iter()
                .map(|l| l.lane.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

/// Prints a verb's failure and returns its exit code.
pub fn failed(verb: &str, e: &SupportError) -> u8 {
    eprintln!("exo support {verb}: {e}");
    match e {
        SupportError::Plane(PlaneError::Refused { status: 409, .. }) => exit::FINDINGS,
        _ => exit::UNUSABLE,
    }
}

/// `ack` and `resolve`: posts the action and prints where the incident is.
async fn act(plane: &PlaneArgs, w: &Which, note: &str, verb: &str) -> u8 {
    let done = async {
        if !crate::wire::incident::valid_id(&w.id) {
            return Err(SupportError::BadId(w.id.clone()));
        }
        let lane = lane_of(plane, w.lane.as_deref()).await?;
        let body = serde_json::json!({ "note": note });
        let v = plane
            .call(
                hyper::Method::POST,
                &w.path(&lane, &format!("/{verb}")),
                Some(&body),
            )
            .await?;
        let moved = v.get("moved").and_then(|m| m.as_bool()).unwrap_or(false);
        let inc: view::LaneIncident =
            serde_json::from_value(v.get("incident").cloned().unwrap_or_default())?;
        Ok((moved, inc))
    };
    match done.await {
        Ok((moved, inc)) => crate::cli::release::common::emit(
            &inc,
            w.output,
            || {
                if moved {
                    format!(
                        "{} is {} now; its tenant is told\n",
                        inc.id,
                        inc.state.as_str()
                    )
                } else {
                    format!(
                        "{} was {} already; nothing changed\n",
                        inc.id,
                        inc.state.as_str()
                    )
                }
            },
            &format!("exo support {verb}"),
        ),
        Err(e) => failed(verb, &e),
    }
}
