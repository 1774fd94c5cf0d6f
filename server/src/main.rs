//! `baton-server`: parse flags, set up logging, refuse unsafe listens, run.

#![deny(clippy::too_many_lines)]
#![warn(clippy::pedantic)]
// The pedantic lints that do not fit, each with its reason: names in prose are not always
// code; every error becomes a gRPC status in one place (`error.rs`), documented there; a
// value that must be used is marked where forgetting it is a bug, not on every getter;
// short names of one kind side by side (`a`, `b`) read best; the rules' maps use the
// default hasher only; metrics are floats by nature; `out_*` columns mirror a function's
// OUT parameters.
#![allow(
    clippy::doc_markdown,
    clippy::missing_errors_doc,
    clippy::must_use_candidate,
    clippy::similar_names,
    clippy::implicit_hasher,
    clippy::cast_precision_loss,
    clippy::struct_field_names
)]

use std::io::IsTerminal;

use anyhow::Context;
use baton_server::config::Config;
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    // Fault injection for the reliability tests (FAILPOINTS=...); absent from release builds.
    #[cfg(feature = "failpoints")]
    let _faults = fail::FailScenario::setup();
    let filter = EnvFilter::try_new(&config.log_level).with_context(|| {
        format!("--log-level {:?} is not a valid log filter (try info or debug)", config.log_level)
    })?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();

    match &config.command {
        Some(baton_server::config::ServerCommand::Healthcheck { url, ca_cert }) => {
            return baton_server::cli::healthcheck(config.listen, url.as_deref(), ca_cert.as_deref()).await;
        }
        Some(command) => return baton_server::cli::database_command(&config, command).await,
        None => {}
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    baton_server::run(config, listener, baton_server::shutdown_signal()).await
}
