//! etcd as a real peer: one durable etcd node (Debian's `etcd-server`, 3.4) started on
//! loopback for the run, next to Baton's server, driven by the same client harness over
//! etcd's own gRPC API (the protos vendored in tests/proto/etcd/, compiled by build.rs).
//!
//! Rows: small writes at 1, 8 and 32 clients (a keyed note upsert in one project against a
//! 64-byte Put to a distinct key; one connection per client on both sides), watch latency
//! with one watcher at a write every 5 ms, and each server's CPU time per write.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use baton_proto::v1::event_service_client::EventServiceClient;
use baton_proto::v1::memory_service_client::MemoryServiceClient;
use baton_proto::v1::{WatchCursor, WatchRequest, event};
use baton_tests::{Backend, Server};
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

use crate::scenarios::note;
use crate::stats::{ROUNDS, Run, alternating_cpu, ms};
use crate::{Row, Sizes};

/// etcd's v3 API, generated from tests/proto/etcd/ (clients only).
#[allow(dead_code, clippy::all, clippy::pedantic)]
pub mod pb {
    pub mod authpb {
        include!(concat!(env!("OUT_DIR"), "/authpb.rs"));
    }
    pub mod mvccpb {
        include!(concat!(env!("OUT_DIR"), "/mvccpb.rs"));
    }
    pub mod etcdserverpb {
        include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
    }
}

use pb::etcdserverpb::kv_client::KvClient;
use pb::etcdserverpb::watch_client::WatchClient;
use pb::etcdserverpb::{PutRequest, RangeRequest, WatchCreateRequest, watch_request};

/// Concurrent clients of the small-write rows.
const CLIENTS: [usize; 3] = [1, 8, 32];

/// The watch rows' p99 target (docs/performance.md, What each row measures).
const WATCH_P99_TARGET: Duration = Duration::from_micros(3700);

/// One write every this long in the watch rows.
const WATCH_EVERY: Duration = Duration::from_millis(5);

/// The etcd rows, or a note saying why there are none.
pub async fn rows(
    backend: Backend,
    server: &Server,
    sizes: Sizes,
    table: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    if sizes.quick {
        let line = "etcd rows skipped in --quick; run without --quick";
        eprintln!("  {line}");
        notes.push(line.to_owned());
        return;
    }
    let Some(bin) = find_etcd() else {
        let line = "etcd rows skipped: etcd is not installed (no `etcd` in PATH or at /usr/bin/etcd); \
                    install it with `apt-get install etcd-server`";
        eprintln!("  {line}");
        notes.push(line.to_owned());
        return;
    };
    let etcd = match Etcd::start(&bin).await {
        Ok(etcd) => etcd,
        Err(e) => {
            let line = format!("etcd rows skipped: {} did not start: {e:#}", bin.display());
            eprintln!("  {line}");
            notes.push(line);
            return;
        }
    };
    eprintln!(
        "  {} ({}) at {}, data in {}",
        bin.display(),
        etcd.version,
        etcd.url,
        etcd.dir.path().display()
    );
    for (n, target) in CLIENTS.into_iter().zip(crate::targets::of(backend).etcd) {
        eprintln!("  small writes, {n} client(s)");
        table.push(small_writes(backend, server, &etcd, n, sizes.window, target).await);
    }
    eprintln!("  watch latency, one watcher");
    table.push(watch_latency(server, &etcd, sizes.window).await);
}

/// `etcd` in PATH, else /usr/bin/etcd.
fn find_etcd() -> Option<PathBuf> {
    let in_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("etcd"));
    in_path.chain([PathBuf::from("/usr/bin/etcd")]).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// One etcd node on loopback, in a temporary directory; killed on drop.
struct Etcd {
    child: Child,
    url: String,
    version: String,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts a single-member cluster with etcd's defaults (fsync on every commit) and waits
    /// until it answers a Range.
    async fn start(bin: &Path) -> Result<Etcd> {
        let version = Command::new(bin)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
            .unwrap_or_else(|| "version unknown".to_owned());
        let dir = tempfile::tempdir()?;
        // Both ports held at once, so that they differ.
        let (client, peer) =
            (std::net::TcpListener::bind("127.0.0.1:0")?, std::net::TcpListener::bind("127.0.0.1:0")?);
        let url = format!("http://{}", client.local_addr()?);
        let peer_url = format!("http://{}", peer.local_addr()?);
        drop((client, peer));
        let log = dir.path().join("etcd.log");
        let mut command = Command::new(bin);
        command
            .arg("--name=baton-bench")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=baton-bench={peer_url}"))
            .arg("--initial-cluster-state=new")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).map_or(Stdio::null(), Stdio::from));
        // etcd reads its flags from ETCD_* too: only ours count.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ETCD_") {
                command.env_remove(name);
            }
        }
        let child = command.spawn().with_context(|| format!("starting {}", bin.display()))?;
        let mut etcd = Etcd { child, url, version, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut kv) = etcd.channel().await.map(KvClient::new)
                && kv.range(RangeRequest { key: b"baton-bench".to_vec(), ..Default::default() }).await.is_ok()
            {
                return Ok(etcd);
            }
            if let Some(status) = etcd.child.try_wait()? {
                bail!("it exited ({status}); its log:\n{}", tail(&log));
            }
            if Instant::now() > deadline {
                bail!("it did not answer within 30 s; its log:\n{}", tail(&log));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A connection of its own (one HTTP/2 connection per Channel).
    async fn channel(&self) -> Result<Channel> {
        Ok(Channel::from_shared(self.url.clone())?.connect().await?)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn summary(run: &Run) -> String {
    format!(
        "p50 {} · p99 {} · {:.0}/s · {} server CPU/write",
        ms(run.p50()),
        ms(run.p99()),
        run.throughput(),
        run.cpu_per_op().map_or("?".to_owned(), |d| format!("{:.0} µs", d.as_secs_f64() * 1e6)),
    )
}

/// `n` clients, each on a connection of its own, writing back to back: Baton a keyed note
/// upsert in one project (a new key each write), etcd a 64-byte Put to a new key.
async fn small_writes(
    backend: Backend,
    server: &Server,
    etcd: &Etcd,
    n: usize,
    window: Duration,
    target: f64,
) -> Row {
    let mut baton = Vec::with_capacity(n);
    let mut kv = Vec::with_capacity(n);
    for _ in 0..n {
        baton.push(MemoryServiceClient::new(server.channel().await));
        kv.push(KvClient::new(etcd.channel().await.expect("connect to etcd")));
    }
    let run = uuid::Uuid::new_v4().simple().to_string();
    let project = format!("bench/etcd-{n}-{run}");
    let prefix = format!("bench/{n}-{run}/");
    let value = vec![b'x'; 64];
    // Not counted: each connection's first calls, on both sides.
    for client in 0..n {
        for i in 0..5 {
            baton[client]
                .put_memory(note(&project, format!("warm-c{client}-{i}"), "warm-up".into()))
                .await
                .unwrap();
            kv[client]
                .put(PutRequest {
                    key: format!("{prefix}warm-c{client}-{i}").into_bytes(),
                    value: value.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
    }
    let (baton, kv) = (Arc::new(baton), Arc::new(kv));
    let (b, e) = alternating_cpu(
        n,
        window,
        (
            move |client: usize, i: u64| {
                let mut memory = baton[client].clone();
                let request =
                    note(&project, format!("c{client}-{i}"), format!("small write {i} from client {client}"));
                async move {
                    memory.put_memory(request).await.unwrap();
                }
            },
            server.pid(),
        ),
        (
            move |client: usize, i: u64| {
                let mut kv = kv[client].clone();
                let request = PutRequest {
                    key: format!("{prefix}c{client}-{i}").into_bytes(),
                    value: value.clone(),
                    ..Default::default()
                };
                async move {
                    kv.put(request).await.unwrap();
                }
            },
            Some(etcd.pid()),
        ),
    )
    .await;
    let ratio = b.throughput() / e.throughput();
    Row {
        scenario: format!(
            "vs etcd: small writes (note upsert / 64 B Put, a new key each), {n} client{}, a connection each{}",
            if n == 1 { "" } else { "s" },
            // Postgres does its part of a write in processes of its own.
            if backend == Backend::Postgres { " (server CPU: Baton's process, not Postgres's)" } else { "" }
        ),
        baton: summary(&b),
        floor: format!("etcd {}", summary(&e)),
        ratio: format!("{:.0}% of etcd's throughput", ratio * 100.0),
        target: format!("≥ {:.0}% of etcd", target * 100.0),
        met: Some(ratio >= target),
    }
}

/// When each write was sent, by key, on the client's clock.
type Sent = Arc<Mutex<HashMap<String, Instant>>>;

/// One watcher, a write every 5 ms for `window` in all on each side, in alternating rounds:
/// the time from just before a write is sent to the watcher receiving its event.
async fn watch_latency(server: &Server, etcd: &Etcd, window: Duration) -> Row {
    let round = window / ROUNDS as u32;
    let writes = (round.as_secs_f64() / WATCH_EVERY.as_secs_f64()) as usize;
    let (mut b, mut e) = (Run::default(), Run::default());
    for _ in 0..ROUNDS {
        b.latencies.extend(baton_watch(server, writes).await);
        e.latencies.extend(etcd_watch(etcd, writes).await);
    }
    let ratio = b.p99().as_secs_f64() / e.p99().as_secs_f64();
    let cell = |run: &Run| format!("p50 {} · p99 {} ({} events)", ms(run.p50()), ms(run.p99()), run.ops());
    Row {
        scenario: format!(
            "vs etcd: watch latency, one watcher, a write every {} ms for {} s (write sent → event received)",
            WATCH_EVERY.as_millis(),
            window.as_secs()
        ),
        baton: cell(&b),
        floor: format!("etcd {}", cell(&e)),
        ratio: format!("{ratio:.1}× etcd's p99"),
        target: format!("Baton watch p99 ≤ {}", ms(WATCH_P99_TARGET)),
        met: Some(b.p99() <= WATCH_P99_TARGET),
    }
}

/// Writes `writes` notes to a fresh project, one every 5 ms, while one watcher (on a
/// connection of its own) streams the project.
async fn baton_watch(server: &Server, writes: usize) -> Vec<Duration> {
    let project = format!("bench/etcd-watch-{}", uuid::Uuid::new_v4().simple());
    let mut events = EventServiceClient::new(server.channel().await);
    let memory = MemoryServiceClient::new(server.channel().await);
    let mut stream = events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: project.clone(), after_revision: 0 }],
            kinds: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    let sent = Sent::default();
    let seen = sent.clone();
    let watcher = tokio::spawn(async move {
        let mut ages = Vec::with_capacity(writes);
        while ages.len() < writes {
            let e = match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                Ok(Some(Ok(e))) => e,
                other => {
                    panic!("the Baton watcher stopped after {} of {writes} events: {other:?}", ages.len())
                }
            };
            let received = Instant::now();
            if let Some(event::Value::Memory(m)) = &e.value
                && let Some(at) = seen.lock().unwrap().get(&m.key)
            {
                ages.push(received.duration_since(*at));
            }
        }
        ages
    });
    write_every(writes, |i| {
        let key = format!("k{i}");
        let request = note(&project, key.clone(), format!("update {i}"));
        sent.lock().unwrap().insert(key, Instant::now());
        let mut memory = memory.clone();
        async move {
            memory.put_memory(request).await.unwrap();
        }
    })
    .await;
    watcher.await.unwrap()
}

/// Puts `writes` keys under a fresh prefix, one every 5 ms, while one watcher (on a
/// connection of its own) watches the prefix.
async fn etcd_watch(etcd: &Etcd, writes: usize) -> Vec<Duration> {
    let prefix = format!("bench/watch-{}/", uuid::Uuid::new_v4().simple());
    let mut watch = WatchClient::new(etcd.channel().await.expect("connect to etcd"));
    let kv = KvClient::new(etcd.channel().await.expect("connect to etcd"));
    let mut range_end = prefix.clone().into_bytes();
    if let Some(last) = range_end.last_mut() {
        *last += 1;
    }
    let create = pb::etcdserverpb::WatchRequest {
        request_union: Some(watch_request::RequestUnion::CreateRequest(WatchCreateRequest {
            key: prefix.clone().into_bytes(),
            range_end,
            ..Default::default()
        })),
    };
    // The request side stays open for the watch's life.
    let requests = tokio_stream::once(create).chain(tokio_stream::pending());
    let mut stream = watch.watch(requests).await.unwrap().into_inner();
    // Events flow once etcd confirms the watch.
    loop {
        let r = stream.next().await.expect("etcd closed the watch").unwrap();
        assert!(!r.canceled, "etcd cancelled the watch: {}", r.cancel_reason);
        if r.created {
            break;
        }
    }
    let sent = Sent::default();
    let seen = sent.clone();
    let watcher = tokio::spawn(async move {
        let mut ages = Vec::with_capacity(writes);
        while ages.len() < writes {
            let r = match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                Ok(Some(Ok(r))) => r,
                other => {
                    panic!("the etcd watcher stopped after {} of {writes} events: {other:?}", ages.len())
                }
            };
            let received = Instant::now();
            for e in &r.events {
                let key = e.kv.as_ref().map(|kv| String::from_utf8_lossy(&kv.key).into_owned());
                if let Some(at) = key.and_then(|k| seen.lock().unwrap().get(&k).copied()) {
                    ages.push(received.duration_since(at));
                }
            }
        }
        ages
    });
    write_every(writes, |i| {
        let key = format!("{prefix}k{i}");
        let request =
            PutRequest { key: key.clone().into_bytes(), value: vec![b'x'; 64], ..Default::default() };
        sent.lock().unwrap().insert(key, Instant::now());
        let mut kv = kv.clone();
        async move {
            kv.put(request).await.unwrap();
        }
    })
    .await;
    watcher.await.unwrap()
}

/// `writes` calls of `write(i)`, one every 5 ms (each waited for; a late one delays the
/// next rather than bunching them up).
async fn write_every<F, Fut>(writes: usize, write: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in 0..writes {
        tick.tick().await;
        write(i).await;
    }
}
