//! The `exo` command line: clap definitions and dispatch. Each verb lives in
//! its own module; this file only wires them together.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod attach;
pub mod audit;
pub mod completion;
pub mod config;
pub mod control_plane;
pub mod crd;
pub mod fs;
pub mod fs_backup;
pub mod fs_backups;
pub mod fs_cp;
pub mod fs_restore;
pub mod fs_route;
pub mod fs_show;
pub mod incident;
pub mod kube_args;
pub mod logging;
pub mod operator;
pub mod operator_connect;
pub mod plane;
pub mod release;
pub mod support;
pub mod table;
pub mod tenant;
pub mod terminal;

#[derive(Debug, Parser)]
#[command(
    name = "exo",
    version,
    about = "GitOps releases for fleets of AI agents on Kubernetes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Baseline ConfigMaps: build immutable, content-hashed versions.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Release manifests: lint, pin, diff and plan.
    #[command(subcommand)]
    Release(release::ReleaseCommand),
    /// Print the CustomResourceDefinitions generated from the Rust types.
    Crd(crd::CrdArgs),
    /// The reference control plane: serve, deployments and tokens.
    ControlPlane(control_plane::ControlPlaneArgs),
    /// A shell in an agent's pod, through the control plane.
    Attach(attach::AttachArgs),
    /// Agent file systems: list, create, browse, copy, resize, delete,
    /// back up and restore.
    Fs(fs::FsArgs),
    /// The in-cluster operator.
    #[command(subcommand)]
    Operator(operator::OperatorCommand),
    /// Tenants: list their lifecycle sagas, onboard and offboard them.
    #[command(subcommand)]
    Tenant(tenant::TenantCommand),
    /// Incidents agents reported: list them, show one with its detail.
    #[command(subcommand)]
    Incident(incident::IncidentCommand),
    /// Support lanes on the control plane: list, show, acknowledge and
    /// resolve incidents; route tenants to lanes.
    Support(support::SupportArgs),
    /// Audit tenant isolation: placement, network, credentials, mounts,
    /// immutability. Exit 0 clean, 1 on findings, 2 on error.
    Audit(audit::AuditArgs),
    /// Print a shell completion script: bash, zsh or fish.
    Completion(completion::CompletionArgs),
}

/// Exit codes shared by every verb.
pub mod exit {
    /// Success, nothing to report.
    pub const OK: u8 = 0;
    /// The command ran and found problems (lint findings, failed gates).
    pub const FINDINGS: u8 = 1;
    /// The input could not be used at all (unreadable, unparsable, refused).
    pub const UNUSABLE: u8 = 2;
}

pub fn run(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Config(cmd) => config::run(cmd),
        Command::Crd(args) => crd::run(args),
        Command::Release(cmd) => release::run(cmd),
        Command::Tenant(cmd) => tenant::run(cmd),
        Command::ControlPlane(args) => control_plane::run(args),
        Command::Operator(cmd) => operator::run(cmd),
        Command::Attach(args) => attach::run(args),
        Command::Fs(args) => fs::run(args),
        Command::Incident(cmd) => incident::run(cmd),
        Command::Support(args) => support::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Completion(args) => completion::run(args),
    };
    ExitCode::from(code)
}
