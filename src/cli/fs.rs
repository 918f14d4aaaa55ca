//! `exo fs`: AgentFS volumes, and the Apps' volumes (`list --apps`,
//! `resize app/NAME`), from the command line. With `--deployment`
//! every verb goes through the control plane to that deployment's
//! operator; without it, straight to the cluster of the current
//! kubeconfig. Both routes run the same `agentfs` code. The backup verbs
//! (`backup`, `backups`, `restore`; one file each) take the direct route
//! only.

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
    List {
        /// List the Apps' volumes instead: a row per volume (workspace,
        /// and database when the app has one) with size, maxSize and
        /// phase, and the volumes kept after their App was deleted
        /// (`retain: true`) as `Retained`.
        #[arg(long)]
        apps: bool,
    },
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
    /// Grow a file system (grow-only, up to its maxSize): `resize NAME
    /// --size SIZE`, or an App's volumes: `resize app/NAME --workspace
    /// SIZE --database SIZE` (either or both).
    Resize {
        /// An AgentFS, or `app/NAME` for an App's volumes.
        name: String,
        /// The AgentFS's new size.
        #[arg(long)]
        size: Option<String>,
        /// `app/NAME`: the workspace volume's new size.
        #[arg(long)]
        workspace: Option<String>,
        /// `app/NAME`: the database volume's new size.
        #[arg(long)]
        database: Option<String>,
    },
    /// Delete a file system; refused while agents mount it.
    Delete { name: String },
    /// Take a backup now (the volume needs `spec.backup`) and wait for
    /// it; prints its digest. `app/NAME`: both volumes of an App. Direct
    /// route only.
    Backup {
        /// An AgentFS, or `app/NAME` for an App's volumes.
        name: String,
        /// How long to wait for the operator's answer (e.g. 30s, 10m).
        #[arg(long, default_value = "10m")]
        timeout: String,
    },
    /// List the backups in a volume's repository: time, digest, files,
    /// bytes, tree hash, and the last restore drill's result. Direct
    /// route only.
    Backups {
        /// An AgentFS, or `app/NAME` with `--workspace` or `--database`.
        name: String,
        /// `app/NAME`: the workspace volume's backups.
        #[arg(long)]
        workspace: bool,
        /// `app/NAME`: the database volume's backups.
        #[arg(long)]
        database: bool,
    },
    /// Restore a backup of NAME into a new AgentFS (`--to NEWNAME`, sized
    /// like NAME) or into NAME itself when it is empty and no pod mounts
    /// it. Every chunk, file and the tree hash are checked before it
    /// reports done. Direct route only.
    Restore {
        name: String,
        /// `latest`, a backup's `sha256:` digest, or an RFC 3339 time (the
        /// newest backup at or before it).
        #[arg(long)]
        from: String,
        /// Restore into this new AgentFS instead of NAME.
        #[arg(long)]
        to: Option<String>,
    },
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

/// `exo fs resize`'s arguments as a command: an AgentFS takes `--size`
/// only, an `app/NAME` takes `--workspace` and `--database` only.
fn resize_command(
    namespace: String,
    name: &str,
    size: Option<String>,
    workspace: Option<String>,
    database: Option<String>,
) -> Result<Command, String> {
    match name.strip_prefix(crate::agentfs::apps::APP_PREFIX) {
        Some(app) => {
            if size.is_some() {
                return Err(format!(
                    "{name}: an App has two volumes; grow them with --workspace SIZE and/or --database SIZE, not --size"
                ));
            }
            if app.is_empty() {
                return Err("app/: name the App, e.g. app/shop".into());
            }
            if workspace.is_none() && database.is_none() {
                return Err(format!(
                    "{name}: name the volume to grow: --workspace SIZE, --database SIZE, or both"
                ));
            }
            Ok(Command::AppResize {
                namespace,
                app_name: app.to_owned(),
                workspace,
                database,
            })
        }
        None => {
            if workspace.is_some() || database.is_some() {
                return Err(format!(
                    "--workspace and --database grow an App's volumes: name it app/{name}"
                ));
            }
            let size = size.ok_or_else(|| format!("{name}: --size SIZE is required"))?;
            Ok(Command::AgentfsResize {
                namespace,
                fs_name: name.to_owned(),
                size,
            })
        }
    }
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
        FsVerb::List { apps: false } => {
            let v = route
                .call(Command::AgentfsList {
                    namespace: args.namespace.clone(),
                })
                .await?;
            show(v, super::fs_show::list);
        }
        FsVerb::List { apps: true } => {
            let v = route
                .call(Command::AppVolumes {
                    namespace: args.namespace.clone(),
                })
                .await?;
            show(v, super::fs_show::app_volumes);
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
        FsVerb::Resize {
            name,
            size,
            workspace,
            database,
        } => {
            let cmd = resize_command(ns, &name, size, workspace, database)?;
            let app = matches!(cmd, Command::AppResize { .. });
            let v = route.call(cmd).await?;
            show(
                v,
                if app {
                    super::fs_show::app_volumes
                } else {
                    super::fs_show::one
                },
            );
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
        FsVerb::Backup { name, timeout } => {
            let (client, _) = route.direct("backup")?;
            let timeout = crate::duration::parse(&timeout)
                .map_err(|e| format!("--timeout {timeout:?}: {e}"))?;
            let v = super::fs_backup::backup(client, &ns, &name, timeout).await?;
            show(v, super::fs_backup::show);
        }
        FsVerb::Backups {
            name,
            workspace,
            database,
        } => {
            let (name, volume) = super::fs_backups::which(&name, workspace, database)?;
            let (client, _) = route.direct("backups")?;
            let v = super::fs_backups::list(client, &ns, &name, volume).await?;
            show(v, super::fs_backups::show);
        }
        FsVerb::Restore { name, from, to } => {
            let (client, helper) = route.direct("restore")?;
            let ask = super::fs_restore::Ask {
                namespace: ns,
                name,
                from,
                to,
            };
            let v = super::fs_restore::restore(client, helper, &ask).await?;
            show(v, super::fs_restore::show);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn resize_grammar() {
        let ok = |name, size, ws, db| resize_command("t".into(), name, size, ws, db);
        assert_eq!(
            ok("data", s("2Gi"), None, None),
            Ok(Command::AgentfsResize {
                namespace: "t".into(),
                fs_name: "data".into(),
                size: "2Gi".into()
            })
        );
        assert_eq!(
            ok("app/shop", None, s("2Gi"), s("3Gi")),
            Ok(Command::AppResize {
                namespace: "t".into(),
                app_name: "shop".into(),
                workspace: s("2Gi"),
                database: s("3Gi")
            })
        );
        // (name, --size, --workspace, --database, words in the refusal)
        type Case<'a> = (
            &'a str,
            Option<String>,
            Option<String>,
            Option<String>,
            &'a str,
        );
        let refused: &[Case] = &[
            ("app/shop", s("2Gi"), None, None, "not --size"),
            (
                "app/shop",
                None,
                None,
                None,
                "--workspace SIZE, --database SIZE",
            ),
            ("app/", None, s("1Gi"), None, "name the App"),
            ("data", None, s("2Gi"), None, "name it app/data"),
            ("data", None, None, None, "--size SIZE is required"),
        ];
        for (name, size, ws, db, words) in refused {
            let err = ok(name, size.clone(), ws.clone(), db.clone()).unwrap_err();
            assert!(err.contains(words), "{name}: {err:?} lacks {words:?}");
        }
    }
}
