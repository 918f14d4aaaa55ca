//! The one tracing set-up of the long-running verbs (`operator run`,
//! `operator connect`, `control-plane serve`): logs on stderr, filtered by
//! `RUST_LOG` (else `info` with kube's own chatter at `warn`), as text
//! (coloured on a terminal) or one JSON object per line for a log pipeline.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text", env = "EXO_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// Installs the subscriber (once; later calls do nothing).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
}
