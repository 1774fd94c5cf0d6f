//! Closed-loop load and its numbers.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measured run: per-operation latencies over a wall-clock window.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
    /// CPU time (user + system) the measured server process spent in the run's windows,
    /// when one was named (`alternating_cpu`).
    pub server_cpu: Option<Duration>,
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

    /// The server's CPU time per operation, when measured.
    pub fn cpu_per_op(&self) -> Option<Duration> {
        let ops = u32::try_from(self.ops()).ok().filter(|n| *n > 0)?;
        Some(self.server_cpu? / ops)
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
    alternating_cpu(clients, window, (baton, None), (floor, None)).await
}

/// `alternating`, with each side's server process (when given) read for its CPU time before
/// and after each of its rounds: `Run::server_cpu` holds the sum.
pub async fn alternating_cpu<A, AF, B, BF>(
    clients: usize,
    window: Duration,
    (baton, baton_pid): (A, Option<u32>),
    (floor, floor_pid): (B, Option<u32>),
) -> (Run, Run)
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
        let cpu = baton_pid.and_then(cpu_time);
        let run = closed_loop(clients, round, move |client, i| op(client, base + i)).await;
        a.add(run, cpu, baton_pid.and_then(cpu_time));
        let op = floor.clone();
        let cpu = floor_pid.and_then(cpu_time);
        let run = closed_loop(clients, round, move |client, i| op(client, base + i)).await;
        b.add(run, cpu, floor_pid.and_then(cpu_time));
    }
    (a, b)
}

impl Run {
    /// Merges a round into this run, with the server's CPU time before and after it.
    fn add(&mut self, run: Run, cpu_before: Option<Duration>, cpu_after: Option<Duration>) {
        self.latencies.extend(run.latencies);
        self.elapsed += run.elapsed;
        if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
            self.server_cpu = Some(self.server_cpu.unwrap_or_default() + after.saturating_sub(before));
        }
    }
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

/// CPU time (user + system) a process has used so far, from /proc/<pid>/stat (Linux):
/// utime and stime, fields 14 and 15, in clock ticks.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command, is in parentheses and may hold spaces: count from after it.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    // Field 3 is the first after the parenthesis: utime is the 12th from there.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) as f64 / clock_ticks_per_second()?))
}

#[allow(unsafe_code)]
fn clock_ticks_per_second() -> Option<f64> {
    // SAFETY: sysconf(3) only reads a configuration value; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some(ticks as f64)
}
