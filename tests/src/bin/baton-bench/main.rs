//! baton-bench: Baton over gRPC next to the raw storage floor (the same database doing one
//! transaction per write with nothing of Baton around it), in one run, on SQLite and on
//! Postgres. Prints a table with p50/p99, throughput and the Baton/floor ratio against the
//! targets, then how latency and memory grow with sessions per project and watchers. The
//! `etcd` rows put a real etcd next to Baton instead of the floor (small writes at 1, 8 and
//! 32 clients, watch latency, server CPU per write), over etcd's own gRPC API.
//!
//!   cargo build --release --workspace && ./target/release/baton-bench
//!   ./target/release/baton-bench --quick              # a few seconds per scenario (CI)
//!   ./target/release/baton-bench --backend sqlite     # or postgres; default both
//!   ./target/release/baton-bench --scaling-only       # just the scaling tables
//!   ./target/release/baton-bench --only hot,resume    # some scenarios: rpc, hot, spread,
//!                                                     # checkpoints, resume, fanout, catchup,
//!                                                     # memory, scaling, etcd
//!   ./target/release/baton-bench --only etcd          # Baton next to one durable etcd node
//!   ./target/release/baton-bench --only web           # the web view's pages and streams
//!   ./target/release/baton-bench --only reservations  # a grant with 1,000 live reservations
//!   ./target/release/baton-bench --only why           # `baton why` next to `git blame`
//!
//! The etcd rows need etcd 3.4 (`apt-get install etcd-server`; the bench starts its own node
//! on loopback, in a temporary directory, with fsync, and stops it); without it they print
//! how to install it. `--quick` skips them.
//!
//! Postgres runs with its own durability settings (fsync, synchronous commit), as a team's
//! server does; `--postgres-no-fsync` uses the tests' fast settings instead.
//!
//! Nothing here asserts timings: the numbers are for people to read.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// a bench: fail loudly
// Figures: a percentile's index is a float rounded to a position in a sorted sample, and
// counts of rows and clients are small and known, so casts between them are plain.
#![allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_possible_wrap)]

mod etcd;
mod floor;
mod memory;
mod reservations;
mod scenarios;
mod search;
mod stats;
mod targets;
mod web;
mod why;

use std::time::Duration;

use baton_tests::Backend;
use clap::Parser;

/// Baton over gRPC next to the raw storage floor, on SQLite and Postgres.
#[derive(Parser)]
#[command(
    name = "baton-bench",
    about = "Baton over gRPC next to the raw storage floor (one transaction per write, on the same kind of database), on SQLite and Postgres: p50/p99, throughput and Baton/floor against the targets"
)]
struct Args {
    /// A few seconds per scenario (what CI runs).
    #[arg(long)]
    quick: bool,
    /// sqlite, postgres or both.
    #[arg(long, default_value = "both", value_parser = ["sqlite", "postgres", "both"])]
    backend: String,
    /// Some scenarios only, comma-separated: rpc, hot, spread, checkpoints, resume, fanout,
    /// catchup, search (100,000 indexed records next to a LIKE scan), memory (the server's peak RSS under planted data), web (the web view's pages,
    /// its live stream, writes while pages stream), reservations (a grant with 1,000 live),
    /// why (`baton why` next to `git blame` on a generated repository), scaling, etcd (Baton next
    /// to a real etcd node: `apt-get install etcd-server`; skipped with --quick).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(scenarios::NAMES))]
    only: Vec<String>,
    /// Just the scaling tables (`--only scaling`).
    #[arg(long)]
    scaling_only: bool,
    /// Run the throwaway Postgres cluster with fsync, synchronous commit and full page
    /// writes off, as the tests do (ignored with BATON_TEST_POSTGRES_URL).
    #[arg(long)]
    postgres_no_fsync: bool,
}

/// Run sizes: full by default, `--quick` for CI.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub quick: bool,
    pub window: Duration,
    pub clients: usize,
    pub resume_sessions: usize,
    pub watchers: usize,
    pub watch_rate: u32,
    pub catch_up_events: usize,
    pub scale_sessions: &'static [usize],
    pub scale_watchers: &'static [usize],
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                quick,
                window: Duration::from_secs(2),
                clients: clients(),
                resume_sessions: 100,
                watchers: 100,
                watch_rate: 100,
                catch_up_events: 10_000,
                scale_sessions: &[10, 100],
                scale_watchers: &[1, 10, 100],
            }
        } else {
            Self {
                quick,
                window: Duration::from_secs(10),
                clients: clients(),
                resume_sessions: 1000,
                watchers: 1000,
                watch_rate: 500,
                catch_up_events: 100_000,
                scale_sessions: &[10, 100, 1000, 10_000],
                scale_watchers: &[1, 10, 100, 1000],
            }
        }
    }
}

/// Concurrent clients of the throughput scenarios: 16, or `BATON_BENCH_CLIENTS` (to see
/// how a scenario behaves with fewer or more; the targets are stated for 16).
fn clients() -> usize {
    std::env::var("BATON_BENCH_CLIENTS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(16)
}

/// One line of the results table.
pub struct Row {
    pub scenario: String,
    pub baton: String,
    pub floor: String,
    pub ratio: String,
    pub target: String,
    pub met: Option<bool>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let quick = args.quick;
    let backends = match args.backend.as_str() {
        "sqlite" => vec![Backend::Sqlite],
        "postgres" => vec![Backend::Postgres],
        _ => vec![Backend::Sqlite, Backend::Postgres],
    };
    let sizes = Sizes::new(quick);
    let only = if args.scaling_only { vec!["scaling".to_owned()] } else { args.only };
    if !args.postgres_no_fsync {
        baton_tests::postgres::use_durable_clusters();
    }
    println!(
        "baton-bench{}: {} cores, {} MiB RAM, {} {}; Postgres {}",
        if quick { " --quick" } else { "" },
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        total_ram_mib(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        match std::env::var("BATON_TEST_POSTGRES_URL") {
            Ok(_) => "at BATON_TEST_POSTGRES_URL, as configured there",
            Err(_) if args.postgres_no_fsync => "with fsync, synchronous_commit, full_page_writes off",
            Err(_) => "with its durability defaults (fsync, synchronous_commit on)",
        },
    );
    for backend in backends {
        let rows = scenarios::run_all(backend, sizes, &only).await;
        println!();
        println!("### {backend:?}");
        println!();
        println!("| scenario | Baton | floor | Baton/floor | target | met |");
        println!("| --- | --- | --- | --- | --- | --- |");
        for r in &rows.table {
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            };
            println!("| {} | {} | {} | {} | {} | {met} |", r.scenario, r.baton, r.floor, r.ratio, r.target);
        }
        if !rows.notes.is_empty() {
            println!();
            for note in &rows.notes {
                println!("{note}");
            }
        }
        println!();
        println!("Scaling ({backend:?}):");
        println!();
        for line in &rows.scaling {
            println!("{line}");
        }
    }
    println!();
    println!("The hook process end to end (SessionStart, PostToolUse) is measured by `hook-bench`.");
}

fn total_ram_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("MemTotal:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        .map_or(0, |kb| kb / 1024)
}
