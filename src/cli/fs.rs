//! `exo fs`: AgentFS volumes from the command line. With `--deployment`
//! every verb goes through the control plane to that deployment's
//! operator; without it, straight to the cluster of the current
//! kubeconfig. Both routes run the same `agentfs` code.

use clap::{Args, Subcommand, ValueEnum};

use crate::agentfs::path::FsPath;
use crate::cli::exit;
use crate::cli::fs_route::{Route, RouteArgs};
use crate::wire::Command;

#[derive(Debug, Args)]
pub struct FsArgs {
    #[command(subcommand)]
    pub verb: FsVerb,
    /// Namespace of the AgentFS (`list` without it lists every namespace).
    #[arg(long, short = 'n', global = true)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    #[command(flatten)]
    pub route: RouteArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum FsVerb {
    /// File systems with status, requested and provisioned capacity, PVC,
    /// the agents that mount them, and retained volumes.
    List,
    /// Create a file system.
    Create {
        name: String,
        #[arg(long)]
        size: String,
        #[arg(long)]
        max_size: String,
        /// ReadWriteOnce (default), ReadWriteMany, ReadOnlyMany or
        /// ReadWriteOncePod.
        #[arg(long)]
        access_mode: Option<String>,
        /// Keep the volume and its data when the AgentFS is deleted.
        #[arg(long)]
        retain: bool,
    },
    /// List a folder (`<fs>:<path>`) with the volume's real usage.
    Ls { target: String },
    /// Create a folder (and missing parents).
    Mkdir { target: String },
    /// Create an empty file.
    Touch { target: String },
    /// Copy a file or folder into (`cp ./x fs:/dir`) or out of
    /// (`cp fs:/dir/x ./x`) a volume; folders copy recursively.
    Cp {
        source: String,
        destination: String,
        /// Refuse copies with more file bytes than this (e.g. 10Gi).
        #[arg(long, default_value = "10Gi")]
        max_size: String,
    },
    /// Grow a file system (grow-only, up to its maxSize).
    Resize {
        name: String,
        #[arg(long)]
        size: String,
    },
    /// Delete a file system; refused while agents mount it.
    Delete { name: String },
}

pub fn run(args: FsArgs) -> u8 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("exo fs: tokio runtime: {e}");
            return exit::UNUSABLE;
        }
    };
    match rt.block_on(verb(args)) {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("exo fs: {e}");
            exit::UNUSABLE
        }
    }
}

fn parse_target(raw: &str) -> Result<FsPath, String> {
    FsPath::parse(raw).map_err(|e| e.to_string())
}

async fn verb(args: FsArgs) -> Result<(), String> {
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let out = args.output;
    let route = Route::open(&args.route).await?;
    let show = |v: serde_json::Value, table: fn(&serde_json::Value) -> String| match out {
        Output::Json => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Output::Table => print!("{}", table(&v)),
    };
    match args.verb {
        FsVerb::List => {
            let v = route
                .call(Command::AgentfsList {
                    namespace: args.namespace.clone(),
                })
                .await?;
            show(v, super::fs_show::list);
        }
        FsVerb::Create {
            name,
            size,
            max_size,
            access_mode,
            retain,
        } => {
            let v = route
                .call(Command::AgentfsCreate {
                    namespace: ns,
                    fs_name: name,
                    size,
                    max_size,
                    retain,
                    access_mode,
                })
                .await?;
            show(v, super::fs_show::one);
        }
        FsVerb::Ls { target } => {
            let t = parse_target(&target)?;
            let v = route
                .call(Command::AgentfsLs {
                    namespace: ns,
                    fs_name: t.fs,
                    path: t.path.to_string(),
                })
                .await?;
            show(v, super::fs_show::listing);
        }
        FsVerb::Mkdir { target } => {
            let t = parse_target(&target)?;
            let v = route
                .call(Command::AgentfsMkdir {
                    namespace: ns,
                    fs_name: t.fs,
                    path: t.path.to_string(),
                })
                .await?;
            show(v, super::fs_show::done);
        }
        FsVerb::Touch { target } => {
            let t = parse_target(&target)?;
            let v = route
                .call(Command::AgentfsTouch {
                    namespace: ns,
                    fs_name: t.fs,
                    path: t.path.to_string(),
                })
                .await?;
            show(v, super::fs_show::done);
        }
        FsVerb::Cp {
            source,
            destination,
            max_size,
        } => {
            let max = crate::quantity::to_bytes(&max_size)
                .map_err(|e| format!("--max-size {max_size:?}: {e}"))?;
            let max = u64::try_from(max).unwrap_or(u64::MAX);
            let v = super::fs_cp::cp(&route, &ns, &source, &destination, max).await?;
            show(v, super::fs_show::copied);
        }
        FsVerb::Resize { name, size } => {
            let v = route
                .call(Command::AgentfsResize {
                    namespace: ns,
                    fs_name: name,
                    size,
                })
                .await?;
            show(v, super::fs_show::one);
        }
        FsVerb::Delete { name } => {
            let v = route
                .call(Command::AgentfsDelete {
                    namespace: ns,
                    fs_name: name,
                })
                .await?;
            show(v, super::fs_show::done);
        }
    }
    Ok(())
}
