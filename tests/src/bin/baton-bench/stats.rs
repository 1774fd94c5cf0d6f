//! Closed-loop load and its numbers.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measured run: per-operation latencies over a wall-clock window.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
}

impl Run {
    pub fn ops(&self) -> usize {
        self.latencies.len()
    }

    pub fn throughput(&self) -> f64 {
        self.ops() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i.min(sorted.len() - 1)]
    }

    pub fn p50(&self) -> Duration {
        self.percentile(0.5)
    }

    pub fn p99(&self) -> Duration {
        self.percentile(0.99)
    }
}

/// `clients` tasks, each calling `op(client, i)` back to back for `duration`.
pub async fn closed_loop<F, Fut>(clients: usize, duration: Duration, op: F) -> Run
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = 0;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    op(client, i).await;
                    latencies.push(t.elapsed());
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut run = Run::default();
    for t in tasks {
        run.latencies.extend(t.await.expect("a load task panicked"));
    }
    run.elapsed = started.elapsed();
    run
}

/// Rounds of each side of a ratio: see `alternating`.
pub const ROUNDS: u64 = 4;

/// Baton's and the floor's closed loops in alternating rounds, `window` in all for each
/// (B F B F …), merged per side. On a shared machine, load that comes and goes over tens
/// of seconds would otherwise land on one side of the ratio only. Each round's operations
/// are numbered after the previous round's (`i` never repeats).
pub async fn alternating<A, AF, B, BF>(clients: usize, window: Duration, baton: A, floor: B) -> (Run, Run)
where
    A: Fn(usize, u64) -> AF + Send + Sync + 'static,
    AF: Future<Output = ()> + Send + 'static,
    B: Fn(usize, u64) -> BF + Send + Sync + 'static,
    BF: Future<Output = ()> + Send + 'static,
{
    let (baton, floor) = (Arc::new(baton), Arc::new(floor));
    let round = window / ROUNDS as u32;
    let (mut a, mut b) = (Run::default(), Run::default());
    for r in 0..ROUNDS {
        let base = r * 1_000_000_000;
        let op = baton.clone();
        let run = closed_loop(clients, round, move |client, i| op(client, base + i)).await;
        a.latencies.extend(run.latencies);
        a.elapsed += run.elapsed;
        let op = floor.clone();
        let run = closed_loop(clients, round, move |client, i| op(client, base + i)).await;
        b.latencies.extend(run.latencies);
        b.elapsed += run.elapsed;
    }
    (a, b)
}

/// `n` calls one after another.
pub async fn sequential<F, Fut>(n: usize, op: F) -> Run
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let started = Instant::now();
    let mut run = Run::default();
    for i in 0..n {
        let t = Instant::now();
        op(i).await;
        run.latencies.push(t.elapsed());
    }
    run.elapsed = started.elapsed();
    run
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Resident memory of a process, from /proc (Linux), in MiB.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 =
        status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
