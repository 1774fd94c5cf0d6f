//! `baton`: the client that people and agent hooks call.

use std::io::Read as _;
use std::path::PathBuf;

use baton::config::Settings;
use baton::hook::Agent;
use baton::{Ctx, cmd, hook};
use clap::{Parser, Subcommand};

/// Baton client: warm starts and saved sessions for AI coding agents, on any machine.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about, infer_subcommands = true)]
struct Cli {
    /// Hub URL (overrides BATON_SERVER and the config file).
    #[arg(long, global = true)]
    server: Option<String>,

    /// Access token (overrides BATON_TOKEN and the config file).
    #[arg(long, global = true, hide_env_values = true)]
    token: Option<String>,

    /// Print JSON instead of text (read commands).
    #[arg(long, global = true)]
    json: bool,

    /// Work as if started in this directory.
    #[arg(short = 'C', long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What the agents' hooks call: reads the hook's JSON payload on stdin.
    Hook {
        agent: Agent,
        /// The agent's event name (SessionStart, PreToolUse, PostToolUse, PreCompact,
        /// PreCompress, Stop, AfterAgent, SessionEnd, or Cursor's camelCase names).
        event: String,
        /// Read the payload from this file instead of stdin (and delete it).
        #[arg(long, hide = true)]
        payload_file: Option<PathBuf>,
    },
    /// Print the warmup brief for the current project.
    Warmup {
        /// Budget in characters.
        #[arg(long)]
        budget: Option<u32>,
    },
    /// Show the hub, the project and the offline queue (with refused writes).
    Status,
    /// Send the offline queue now.
    Sync,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("baton: cannot start: {e}");
            return exit_for(&cli.command, false);
        }
    };
    let ok = runtime.block_on(run(cli.command, cli.server, cli.token, cli.json, cli.dir));
    std::process::ExitCode::from(u8::from(!ok))
}

/// Hooks always exit 0: a failing hook must never break the agent.
fn exit_for(command: &Command, ok: bool) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::from(!ok && !matches!(command, Command::Hook { .. })))
}

async fn run(
    command: Command,
    server: Option<String>,
    token: Option<String>,
    json: bool,
    dir: Option<PathBuf>,
) -> bool {
    let is_hook = matches!(command, Command::Hook { .. });
    let settings = match Settings::load(server.as_deref(), token.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton: {e:#}");
            return is_hook;
        }
    };
    let ctx = Ctx::new(settings);
    let dir = dir.or_else(|| std::env::current_dir().ok()).unwrap_or_else(|| PathBuf::from("."));
    let result = match command {
        Command::Hook { agent, event, payload_file } => {
            let mut stdin = String::new();
            if payload_file.is_none() {
                let _ = std::io::stdin().take(16 * 1024 * 1024).read_to_string(&mut stdin);
            }
            let out = hook::run(&ctx, agent, &event, &stdin, payload_file.as_deref()).await;
            if !out.is_empty() {
                println!("{out}");
            }
            return true;
        }
        Command::Warmup { budget } => cmd::warmup::run(&ctx, &dir, budget, json).await,
        Command::Status => cmd::status::run(&ctx, &dir, json).await,
        Command::Sync => cmd::sync::run(&ctx).await,
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            eprintln!("baton: {e:#}");
            false
        }
    }
}
