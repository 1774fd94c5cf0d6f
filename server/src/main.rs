//! `baton-server`: parse flags, set up logging, refuse unsafe listens, run.

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
    // A panic's message can quote what it was working on (a slice of a stored record):
    // logged by where it happened only, never by its text.
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        tracing::error!(at, "a task panicked (its message is not logged: it may quote stored text)");
    }));

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
