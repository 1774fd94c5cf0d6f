//! A throwaway Postgres cluster for the tests, started from the installed binaries.
//!
//! One cluster per test process, a fresh database per test. `BATON_TEST_POSTGRES_URL`
//! (an admin URL, e.g. `postgres://postgres@127.0.0.1:5432/postgres`) uses an existing
//! server instead. `initdb` refuses to run as root, so as root the cluster runs as the
//! `postgres` user. The postmaster gets a parent-death signal from a thread that lives as
//! long as the test process, so no cluster outlives its tests.

#![allow(unsafe_code)] // prctl(PR_SET_PDEATHSIG) in pre_exec: see `spawn_postmaster`.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sqlx::Connection;

/// The admin URL of the shared cluster, started on first use.
pub fn admin_url() -> Result<String> {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("BATON_TEST_POSTGRES_URL") {
            return Ok(url);
        }
        start_cluster().map_err(|e| format!("{e:#}"))
    })
    .clone()
    .map_err(|e| anyhow::anyhow!("cannot start a test Postgres: {e}"))
}

/// Creates a fresh database and returns its URL.
pub async fn fresh_database() -> Result<String> {
    create_database(&admin_url()?).await
}

/// Terminates the connections to `pool`'s database that wait in a transaction ("idle in
/// transaction"), as a restart or an idle timeout would; one `true` per connection ended.
pub async fn terminate_idle_in_transaction(pool: &sqlx::PgPool) -> Result<Vec<bool>> {
    Ok(sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND state = 'idle in transaction'",
    )
    .fetch_all(pool)
    .await?)
}

/// Terminates the idle connections to `pool`'s database whose last statement was `last`
/// (a connection kept between uses, as the writer keeps its own), as a restart would; one
/// `true` per connection ended.
pub async fn terminate_idle_after(pool: &sqlx::PgPool, last: &str) -> Result<Vec<bool>> {
    Ok(sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND state = 'idle' AND query = $1",
    )
    .bind(last)
    .fetch_all(pool)
    .await?)
}

async fn create_database(admin: &str) -> Result<String> {
    let admin = admin.to_owned();
    let name = format!("baton_test_{}", uuid::Uuid::new_v4().simple());
    // Accepting TCP is not yet accepting queries: retry while it finishes starting up.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut conn = loop {
        match sqlx::PgConnection::connect(&admin).await {
            Ok(conn) => break conn,
            Err(e) if Instant::now() > deadline => return Err(e).context("connecting to the test Postgres"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    Ok(format!("{base}/{name}"))
}

fn find_binary(name: &str) -> Result<PathBuf> {
    if let Ok(path) = which(name) {
        return Ok(path);
    }
    // Debian's postgresql packages keep their binaries off PATH.
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().with_context(|| {
        format!("{name} not found on PATH or in /usr/lib/postgresql/*/bin; install PostgreSQL")
    })
}

fn which(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} is not on PATH"))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// uid and gid of the `postgres` user.
fn postgres_user() -> Result<(u32, u32)> {
    let id = |flag: &str| -> Result<u32> {
        let out = Command::new("id").arg(flag).arg("postgres").output()?;
        if !out.status.success() {
            bail!("running as root needs a `postgres` user to run the test cluster (useradd postgres)");
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok((id("-u")?, id("-g")?))
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether clusters started from now on keep Postgres's own durability settings (fsync,
/// synchronous commit, full page writes) instead of the tests' fast ones: for benchmarks,
/// which measure what a team's server does. Call before the first cluster starts.
pub fn use_durable_clusters() {
    DURABLE.store(true, std::sync::atomic::Ordering::Relaxed);
}

static DURABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn start_cluster() -> Result<String> {
    let cluster = Cluster::create()?;
    let url = cluster.admin_url();
    // The shared cluster lives as long as the test process (its parent-death signal
    // stops it), so it is never dropped: a watcher removes its directory once the process
    // and the postmaster are gone, however the run ends (passed, failed, interrupted).
    remove_when_gone(std::process::id(), &cluster.dir)?;
    std::mem::forget(cluster);
    Ok(url)
}

/// Starts a watcher that outlives this process: once process `owner` has ended and the
/// postmaster of the cluster in `dir` has stopped (stopped by force after two minutes), it
/// deletes `dir`. It ignores the signals an interrupted run sends its process group
/// (Ctrl-C, a closed terminal).
pub fn remove_when_gone(owner: u32, dir: &std::path::Path) -> Result<()> {
    const WATCH: &str = r#"trap '' INT TERM HUP
while kill -0 "$1" 2>/dev/null; do sleep 1; done
pidfile="$2/data/postmaster.pid"; i=0
while [ -f "$pidfile" ] && kill -0 "$(head -n 1 "$pidfile")" 2>/dev/null && [ "$i" -lt 120 ]; do
  sleep 1; i=$((i + 1))
done
if [ "$i" -ge 120 ]; then kill -9 "$(head -n 1 "$pidfile")" 2>/dev/null; sleep 1; fi
rm -rf -- "$2""#;
    Command::new("sh")
        .args(["-c", WATCH, "baton-test-pg-watch", &owner.to_string()])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the watcher that removes the test cluster's directory")?;
    Ok(())
}

/// A Postgres cluster of its own, which a test may stop and start again (a database
/// restart under load). Stopped and deleted when dropped.
pub struct Cluster {
    postgres: PathBuf,
    data: PathBuf,
    dir: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    pid: Option<u32>,
    durable: bool,
    /// Where its Unix socket goes (none on a mount that cannot hold one: TCP only).
    sockets: Option<PathBuf>,
    /// Its log (off the mount for a cluster on one: it must survive the power cuts, and
    /// this process must hold no file there).
    log: PathBuf,
}

impl Cluster {
    /// initdb and start a new cluster on a free port.
    pub fn create() -> Result<Self> {
        sweep_stale_clusters();
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        let (sockets, log) = (Some(dir.clone()), dir.join("postgres.log"));
        Self::create_at(dir, DURABLE.load(std::sync::atomic::Ordering::Relaxed), sockets, log)
    }

    /// A cluster in `parent/pg` (a test file system's mount) with Postgres's own durability
    /// (fsync, synchronous commit, full-page writes): initdb syncs what it wrote, so the
    /// cluster survives a power cut from the start. TCP only: a FUSE mount holds no socket.
    /// It logs to `log`.
    pub fn create_durable_in(parent: &std::path::Path, log: &std::path::Path) -> Result<Self> {
        Self::create_at(parent.join("pg"), true, None, log.to_owned())
    }

    fn create_at(dir: PathBuf, durable: bool, sockets: Option<PathBuf>, log: PathBuf) -> Result<Self> {
        let initdb = find_binary("initdb")?;
        let postgres = find_binary("postgres")?;
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        // The new folders' names on disk (a cluster on a test file system survives power
        // cuts; initdb syncs what is inside its data directory).
        for made in [dir.parent(), Some(dir.as_path())].into_iter().flatten() {
            std::fs::File::open(made)?.sync_all()?;
        }
        std::fs::write(dir.join(OWNER), std::process::id().to_string())?;
        let user = if is_root() {
            let (uid, gid) = postgres_user()?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
            std::os::unix::fs::chown(&data, Some(uid), Some(gid))?;
            Some((uid, gid))
        } else {
            None
        };
        let mut cmd = Command::new(&initdb);
        cmd.args(["-D"]).arg(&data).args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"]);
        if !durable {
            cmd.arg("--no-sync");
        }
        if let Some((uid, gid)) = user {
            cmd.uid(uid).gid(gid);
        }
        let out = cmd.output().context("running initdb")?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let mut cluster =
            Self { postgres, data, dir, port: free_port()?, user, pid: None, durable, sockets, log };
        cluster.start()?;
        Ok(cluster)
    }

    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the postmaster (again) on the same port and data.
    pub fn start(&mut self) -> Result<()> {
        let pid = spawn_postmaster(
            self.postgres.clone(),
            self.data.clone(),
            self.port,
            self.user,
            self.durable,
            self.sockets.clone(),
            &self.log,
        )?;
        self.pid = Some(pid);
        wait_ready(self.port).with_context(|| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            format!("its log ends:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
        })
    }

    /// Stops the postmaster: `fast` (SIGINT: clients disconnected, clean shutdown) or a
    /// crash (SIGKILL of the postmaster; its backends follow). Waits until it is gone.
    pub fn stop(&mut self, fast: bool) {
        let Some(pid) = self.pid.take() else { return };
        let pid = libc::pid_t::try_from(pid).unwrap_or_default();
        // SAFETY: kill(2) on a child process id we started.
        unsafe {
            libc::kill(pid, if fast { libc::SIGINT } else { libc::SIGKILL });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        // The spawning thread reaps it; once reaped, kill(pid, 0) fails.
        while Instant::now() < deadline && unsafe { libc::kill(pid, 0) } == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        // After a SIGKILL the backends may linger for a moment holding the shared memory.
        let pidfile = self.data.join("postmaster.pid");
        while Instant::now() < deadline && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !fast {
            let _ = std::fs::remove_file(pidfile);
        }
    }

    /// Creates a fresh database in this cluster and returns its URL.
    pub async fn fresh_database(&self) -> Result<String> {
        create_database(&self.admin_url()).await
    }
}

/// The temp dir entries of clusters: `{DIR_PREFIX}{uuid}`, holding `OWNER`, the id of the
/// process that created it.
const DIR_PREFIX: &str = "baton-test-pg-";
const OWNER: &str = "owner";

/// Deletes the directories of clusters whose process is gone and whose postmaster has
/// stopped. The shared cluster is never dropped (it lives as long as its process), so
/// nothing else deletes its directory: each test or bench run would leave its databases
/// in the temp dir (a bench run's are over a gigabyte).
fn sweep_stale_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let dir = entry.path();
        let pid_in = |file: PathBuf| {
            let text = std::fs::read_to_string(file).ok()?;
            text.lines().next()?.trim().parse::<libc::pid_t>().ok().filter(|pid| *pid > 0)
        };
        let abandoned = match pid_in(dir.join(OWNER)) {
            Some(owner) => !alive(owner),
            // Being created right now, or left by a version that wrote no owner.
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age > Duration::from_hours(1)),
        };
        let running = pid_in(dir.join("data").join("postmaster.pid")).is_some_and(alive);
        if abandoned && !running {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Whether a process exists (it may belong to another user).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) } == 0;
    sent || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop(true);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the postmaster from a thread that lives as long as the process, with a
/// parent-death signal so it stops when the tests end (PR_SET_PDEATHSIG fires when the
/// spawning *thread* exits, hence the dedicated thread).
fn spawn_postmaster(
    postgres: PathBuf,
    data: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    durable: bool,
    sockets: Option<PathBuf>,
    log: &std::path::Path,
) -> Result<u32> {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(log).map_or(Stdio::null(), Stdio::from);
    let (tx, rx) = std::sync::mpsc::channel::<Result<u32>>();
    std::thread::spawn(move || {
        let mut cmd = Command::new(postgres);
        cmd.arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(sockets.unwrap_or_default())
            .args(["-c", "max_connections=500", "-c", "shared_buffers=64MB"])
            .stdout(Stdio::null())
            .stderr(log);
        if durable {
            // After a crash Postgres first syncs the whole data directory, in case the
            // machine kept what the crashed server wrote. A durable cluster restarts after a
            // crash only in the power cycles, after the cut: nothing is left to sync, and
            // file by file through FUSE that took most of a cycle (syncfs reaches no FUSE
            // server; Postgres 14 or later).
            cmd.args(["-c", "recovery_init_sync_method=syncfs"]);
        } else {
            // Tests need no durability from the database itself: nothing crashes the
            // machine, and the test that restarts Postgres under load stops it cleanly.
            cmd.args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]);
        }
        if let Some((uid, gid)) = user {
            cmd.uid(uid).gid(gid);
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        // The log's file is the child's now: this process keeps none open.
        drop(cmd);
        match spawned {
            Ok(mut child) => {
                let _ = tx.send(Ok(child.id()));
                let _ = child.wait();
            }
            Err(e) => {
                let _ = tx.send(Err(e.into()));
            }
        }
        // Keep the thread alive after the postmaster exits unexpectedly, too.
        loop {
            std::thread::park();
        }
    });
    rx.recv().context("postmaster thread")?
}

fn wait_ready(port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("the test Postgres did not start within 30 s")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster_dir(owner: Option<u32>) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        if let Some(owner) = owner {
            std::fs::write(dir.join(OWNER), owner.to_string()).unwrap();
        }
        dir
    }

    #[test]
    fn sweeping_deletes_only_clusters_whose_process_is_gone() {
        let mut child = Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let (dead, mine, unowned) =
            (cluster_dir(Some(gone)), cluster_dir(Some(std::process::id())), cluster_dir(None));
        // A live postmaster keeps its directory even when its owner is gone.
        let running = cluster_dir(Some(gone));
        std::fs::write(
            running.join("data").join("postmaster.pid"),
            format!("{}\n/data\n", std::process::id()),
        )
        .unwrap();
        sweep_stale_clusters();
        assert!(!dead.exists());
        assert!(mine.exists() && unowned.exists() && running.exists());
        for dir in [mine, unowned, running] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    /// The shared cluster's directory goes once its process has ended and its postmaster
    /// stopped, not only when a later run sweeps it.
    #[test]
    fn a_clusters_directory_goes_when_its_process_and_postmaster_end() {
        let mut owner = Command::new("sleep").arg("1").spawn().unwrap();
        let mut postmaster = Command::new("sleep").arg("3").spawn().unwrap();
        let dir = cluster_dir(Some(owner.id()));
        std::fs::write(dir.join("data").join("postmaster.pid"), format!("{}\n/data\n", postmaster.id()))
            .unwrap();
        remove_when_gone(owner.id(), &dir).unwrap();
        owner.wait().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert!(dir.exists(), "removed while its postmaster still ran");
        postmaster.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(!dir.exists(), "left behind once its process and postmaster ended");
    }
}
