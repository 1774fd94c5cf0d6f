//! `baton`: the client. For now it answers `baton status`: is the hub reachable and
//! serving? (Agent hooks, warmup and resume come with the client issue.)

use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Baton client: talks to a baton-server hub.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about)]
struct Cli {
    /// Hub URL.
    #[arg(long, global = true, env = "BATON_SERVER", default_value = "http://127.0.0.1:7437")]
    server: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check that the hub is reachable and serving.
    Status,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Status => status(&cli.server).await,
    }
}

async fn status(server: &str) -> anyhow::Result<()> {
    let endpoint = tonic::transport::Endpoint::from_shared(server.to_owned())
        .with_context(|| format!("{server:?} is not a valid server URL (e.g. http://127.0.0.1:7437)"))?
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.with_context(|| {
        format!(
            "cannot reach the Baton hub at {server}: is baton-server running? (set BATON_SERVER or --server)"
        )
    })?;
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest { service: "baton.v1.SessionService".into() })
        .await
        .with_context(|| format!("the hub at {server} did not answer its health check"))?
        .into_inner();
    let serving = reply.status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    println!("hub {server}: {}", if serving { "serving" } else { "not serving" });
    if !serving {
        anyhow::bail!("the hub at {server} is up but not serving");
    }
    Ok(())
}
