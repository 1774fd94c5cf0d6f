//! Test harness: the real `baton-server` binary on an ephemeral port, on SQLite in a temp
//! directory or on a fresh database in a throwaway Postgres, and typed gRPC clients.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// test code: a failure should panic loudly
// Helpers that fail panic, as the test must; the sizes they cast are small and known.
#![allow(clippy::missing_panics_doc, clippy::cast_possible_wrap)]

pub mod agents;
pub mod fake_model;
pub mod layout;
pub mod lazyfs;
pub mod postgres;
pub mod python;
pub mod tls;
pub mod web;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use baton_proto::v1::admin_service_client::AdminServiceClient;
use baton_proto::v1::brief_service_client::BriefServiceClient;
use baton_proto::v1::checkpoint_service_client::CheckpointServiceClient;
use baton_proto::v1::commit_service_client::CommitServiceClient;
use baton_proto::v1::event_service_client::EventServiceClient;
use baton_proto::v1::item_log_service_client::ItemLogServiceClient;
use baton_proto::v1::memory_service_client::MemoryServiceClient;
use baton_proto::v1::reservation_service_client::ReservationServiceClient;
use baton_proto::v1::search_service_client::SearchServiceClient;
use baton_proto::v1::session_service_client::SessionServiceClient;
use baton_proto::v1::thread_service_client::ThreadServiceClient;
use tonic::transport::Channel;

/// Which storage a test server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Path of a workspace binary, built next to the test executable.
pub fn binary(name: &str) -> PathBuf {
    if let Ok(path) = std::env::var(format!("BATON_TEST_{}_BIN", name.to_uppercase().replace('-', "_"))) {
        return PathBuf::from(path);
    }
    // Tests run from target/<profile>/deps/, bench binaries from target/<profile>/: the
    // workspace binaries are in target/<profile>/.
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.parent().map(PathBuf::from).unwrap_or_default().join(name)
    } else {
        dir.join(name)
    }
}

/// A running server process.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub database_url: String,
    pub backend: Backend,
    args: Vec<String>,
    /// Extra environment for the process (e.g. FAILPOINTS), kept across restarts.
    pub env: Vec<(String, String)>,
    log: Arc<Mutex<Vec<String>>>,
    /// The thread copying the process's stderr into `log`: done once it read the last line.
    reader: Option<std::thread::JoinHandle<()>>,
    dir: Arc<tempfile::TempDir>,
}

impl Server {
    /// Starts a server on a fresh database.
    pub async fn start(backend: Backend) -> Result<Self> {
        Self::start_with(backend, &[]).await
    }

    /// Starts a server on a fresh database with extra flags.
    pub async fn start_with(backend: Backend, args: &[&str]) -> Result<Self> {
        let dir = Arc::new(tempfile::tempdir()?);
        let database_url = match backend {
            Backend::Sqlite => format!("sqlite://{}", dir.path().join("baton.db").display()),
            Backend::Postgres => postgres::fresh_database().await?,
        };
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Self::spawn(backend, database_url, args, Vec::new(), dir)
    }

    /// Starts a server on an existing database: another instance sharing one Postgres, or
    /// a database in a cluster the test controls.
    pub fn start_on(backend: Backend, database_url: &str, args: &[&str]) -> Result<Self> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Self::spawn(backend, database_url.to_owned(), args, Vec::new(), Arc::new(tempfile::tempdir()?))
    }

    fn spawn(
        backend: Backend,
        database_url: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        dir: Arc<tempfile::TempDir>,
    ) -> Result<Self> {
        let bin = binary("baton-server");
        // A test may name its own address (to restart on the same port).
        let listen = if args.iter().any(|a| a == "--listen") { None } else { Some("--listen=127.0.0.1:0") };
        // Tests log Baton's debug lines (and spans) for their failure reports; a bench names
        // the level users run at.
        let log_level = if args.iter().any(|a| a == "--log-level") {
            None
        } else {
            Some("--log-level=info,baton_server=debug")
        };
        let mut child = Command::new(&bin)
            .args(listen)
            .args(log_level)
            .args(["--database-url", &database_url])
            .args(&args)
            .env("HOME", dir.path())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!("starting {} (build it with `cargo build --workspace`)", bin.display())
            })?;
        let stderr = child.stderr.take().context("no stderr")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let addr = line
                    .split("addr=")
                    .nth(1)
                    .filter(|_| line.contains("listening"))
                    .and_then(|a| a.trim().parse::<SocketAddr>().ok());
                // Logged before the address is handed over, so the test sees the line.
                if let Ok(mut log) = sink.lock() {
                    log.push(line);
                }
                if let Some(addr) = addr
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr);
                }
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_mins(1)) else {
            let _ = child.kill();
            let log = log.lock().map(|l| l.join("\n")).unwrap_or_default();
            bail!("baton-server did not report its address; its log:\n{log}");
        };
        let reader = Some(reader);
        Ok(Self { child: Some(child), addr, database_url, backend, args, env, log, reader, dir })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn channel(&self) -> Channel {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Channel::from_shared(self.url()).expect("valid url").connect().await {
                Ok(channel) => return channel,
                Err(e) if Instant::now() > deadline => panic!("cannot connect to {}: {e}", self.url()),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    pub async fn clients(&self) -> Clients {
        Clients::new(self.channel().await)
    }

    /// The server process id (None once it was killed).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal (e.g. "TERM", "INT") and waits for the process to exit.
    pub fn signal_and_wait(&mut self, signal: &str) -> Result<std::process::ExitStatus> {
        let mut child = self.child.take().context("server not running")?;
        Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait()? {
                // What it logged last (its shutdown) is read by the time this returns.
                while self.reader.as_ref().is_some_and(|r| !r.is_finished()) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("server did not exit within 20 s of SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the server again on the same database (a new port).
    pub fn restart(&mut self) -> Result<()> {
        self.kill9();
        let mut next = Self::spawn(
            self.backend,
            self.database_url.clone(),
            self.args.clone(),
            self.env.clone(),
            self.dir.clone(),
        )?;
        self.child = next.child.take();
        self.addr = next.addr;
        self.log = next.log.clone();
        self.reader = next.reader.take();
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- baton-server log ({:?}) ----\n{}", self.backend, self.log());
        }
        self.kill9();
    }
}

/// One typed client per service, on one channel.
#[derive(Clone)]
pub struct Clients {
    pub sessions: SessionServiceClient<Channel>,
    pub checkpoints: CheckpointServiceClient<Channel>,
    pub memory: MemoryServiceClient<Channel>,
    pub brief: BriefServiceClient<Channel>,
    pub events: EventServiceClient<Channel>,
    pub admin: AdminServiceClient<Channel>,
    pub search: SearchServiceClient<Channel>,
    pub threads: ThreadServiceClient<Channel>,
    pub items: ItemLogServiceClient<Channel>,
    pub reservations: ReservationServiceClient<Channel>,
    pub commits: CommitServiceClient<Channel>,
    pub channel: Channel,
}

impl Clients {
    pub fn new(channel: Channel) -> Self {
        Self {
            sessions: SessionServiceClient::new(channel.clone()),
            checkpoints: CheckpointServiceClient::new(channel.clone()),
            threads: ThreadServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20),
            items: ItemLogServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20),
            reservations: ReservationServiceClient::new(channel.clone()),
            commits: CommitServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20),
            memory: MemoryServiceClient::new(channel.clone()),
            brief: BriefServiceClient::new(channel.clone()),
            events: EventServiceClient::new(channel.clone()),
            admin: AdminServiceClient::new(channel.clone()),
            search: SearchServiceClient::new(channel.clone()),
            channel,
        }
    }
}

/// Runs a test body against each backend: `both!(name, body)` where `body` is an
/// `async fn(Backend)`.
#[macro_export]
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::Backend::Postgres).await;
            }
        }
    };
}

impl Server {
    /// Flips one byte of a stored checkpoint's state, behind the server's back.
    pub async fn corrupt_checkpoint(&self, id: &str) -> Result<()> {
        self.corrupt_checkpoint_column(id, "state").await
    }

    /// Flips one byte of a stored checkpoint's `state` or `payload`.
    pub async fn corrupt_checkpoint_column(&self, id: &str, column: &str) -> Result<()> {
        use sqlx::Connection;
        anyhow::ensure!(["state", "payload"].contains(&column), "not a checkpoint content column: {column}");
        let select = sqlx::AssertSqlSafe(format!("SELECT {column} FROM checkpoints WHERE id = $1"));
        let update = sqlx::AssertSqlSafe(format!("UPDATE checkpoints SET {column} = $2 WHERE id = $1"));
        macro_rules! flip {
            ($conn:expr) => {{
                let mut conn = $conn;
                let (mut bytes,): (Vec<u8>,) = sqlx::query_as(select).bind(id).fetch_one(&mut conn).await?;
                anyhow::ensure!(!bytes.is_empty(), "checkpoint {id} has no {column} bytes to flip");
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x5a;
                sqlx::query(update).bind(id).bind(bytes).execute(&mut conn).await?;
            }};
        }
        match self.backend {
            Backend::Sqlite => flip!(sqlx::SqliteConnection::connect(&self.database_url).await?),
            Backend::Postgres => flip!(sqlx::PgConnection::connect(&self.database_url).await?),
        }
        Ok(())
    }

    /// How a checkpoint is stored ("none" or "zstd").
    pub async fn checkpoint_compression(&self, id: &str) -> Result<String> {
        use sqlx::Connection;
        let sql = "SELECT compression FROM checkpoints WHERE id = $1";
        let (c,): (String,) = match self.backend {
            Backend::Sqlite => {
                sqlx::query_as(sql)
                    .bind(id)
                    .fetch_one(&mut sqlx::SqliteConnection::connect(&self.database_url).await?)
                    .await?
            }
            Backend::Postgres => {
                sqlx::query_as(sql)
                    .bind(id)
                    .fetch_one(&mut sqlx::PgConnection::connect(&self.database_url).await?)
                    .await?
            }
        };
        Ok(c)
    }
}

/// The `baton` client run as a user would: its own HOME, its own Baton directory, in a
/// given working directory.
pub struct ClientEnv {
    pub home: tempfile::TempDir,
    pub server: String,
}

/// What a `baton` run printed.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl ClientEnv {
    pub fn new(server: &str) -> Self {
        Self { home: tempfile::tempdir().expect("temp home"), server: server.to_owned() }
    }

    pub fn baton_home(&self) -> PathBuf {
        self.home.path().join(".baton")
    }

    /// `baton args…` in `dir`, in this environment (and no other), not started yet.
    pub fn command(&self, dir: &std::path::Path, args: &[&str]) -> Command {
        Self::command_at(self.home.path(), &self.server, dir, args)
    }

    /// `baton args…` in `dir` with `home` as its home (Baton's under it), talking to
    /// `server`, and no other environment; not started yet.
    pub fn command_at(home: &std::path::Path, server: &str, dir: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary("baton"));
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("BATON_HOME", home.join(".baton"))
            .env("BATON_SERVER", server)
            .env("USER", "dev");
        cmd
    }

    /// Runs `baton args…` in `dir` with `stdin`.
    pub fn run(&self, dir: &std::path::Path, args: &[&str], stdin: &str) -> Output {
        self.run_with_env(dir, args, stdin, &[])
    }

    /// Like `run`, with extra environment variables.
    pub fn run_with_env(
        &self,
        dir: &std::path::Path,
        args: &[&str],
        stdin: &str,
        env: &[(&str, &str)],
    ) -> Output {
        use std::io::Write as _;
        let started = Instant::now();
        let mut child = self
            .command(dir, args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run baton");
        if let Some(mut s) = child.stdin.take() {
            let _ = s.write_all(stdin.as_bytes());
        }
        let out = child.wait_with_output().expect("wait for baton");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: started.elapsed(),
        }
    }
}

/// A git repository in a temp dir with an `origin` remote and one commit.
pub fn git_repo(remote: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp repo");
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["remote", "add", "origin", remote]);
    std::fs::write(dir.path().join("README"), "hi").expect("write");
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    dir
}

/// Runs git in `dir` (commits as a fixed author).
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Server {
    /// Number of stored blob chunks (content-addressed, so shared ones count once).
    pub async fn count_chunks(&self) -> Result<i64> {
        use sqlx::Connection;
        let sql = "SELECT COUNT(*) FROM chunks";
        let (n,): (i64,) = match self.backend {
            Backend::Sqlite => {
                sqlx::query_as(sql)
                    .fetch_one(&mut sqlx::SqliteConnection::connect(&self.database_url).await?)
                    .await?
            }
            Backend::Postgres => {
                sqlx::query_as(sql)
                    .fetch_one(&mut sqlx::PgConnection::connect(&self.database_url).await?)
                    .await?
            }
        };
        Ok(n)
    }
}

impl Server {
    /// Runs one SQL statement against the server's database behind its back (to set up
    /// what a test cannot make through the API, e.g. checkpoints from months ago).
    pub async fn execute(&self, sql: &str) -> Result<u64> {
        use sqlx::Connection;
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        Ok(match self.backend {
            Backend::Sqlite => sqlx::query(sql)
                .execute(&mut sqlx::SqliteConnection::connect(&self.database_url).await?)
                .await?
                .rows_affected(),
            Backend::Postgres => sqlx::query(sql)
                .execute(&mut sqlx::PgConnection::connect(&self.database_url).await?)
                .await?
                .rows_affected(),
        })
    }

    /// Runs `baton-server ARGS…` against this server's database; (success, stdout, stderr).
    pub fn admin_command(&self, args: &[&str]) -> (bool, String, String) {
        self.admin_command_with_input(args, b"")
    }

    /// As `admin_command`, with `input` on its stdin.
    pub fn admin_command_with_input(&self, args: &[&str], input: &[u8]) -> (bool, String, String) {
        use std::io::Write as _;
        let mut child = Command::new(binary("baton-server"))
            .args(["--database-url", &self.database_url])
            .args(&self.args)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run baton-server");
        if let Some(mut stdin) = child.stdin.take() {
            // A command that does not read its stdin closes it early: not a failure.
            let _ = stdin.write_all(input);
        }
        let out = child.wait_with_output().expect("wait for baton-server");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Server {
    /// Writes `bodies` (encoded events, revisions 1..=n) straight into the database as a
    /// project's log, for benchmarks that need a long log fast.
    pub async fn seed_events(&self, project: &str, bodies: &[Vec<u8>]) -> Result<()> {
        use sqlx::Connection;
        let now = chrono_like_now_us();
        let head = i64::try_from(bodies.len())?;
        macro_rules! seed {
            ($db:ty, $conn:expr) => {{
                let mut conn = $conn;
                let mut tx = conn.begin().await?;
                sqlx::query("INSERT INTO projects (key, head_revision, last_write_us, created_us) VALUES ($1, $2, $3, $3)")
                    .bind(project)
                    .bind(head)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                for (start, chunk) in bodies.chunks(500).enumerate() {
                    let mut q = sqlx::QueryBuilder::<$db>::new("INSERT INTO events (project, revision, kind, body) ");
                    q.push_values(chunk.iter().enumerate(), |mut row, (i, body)| {
                        row.push_bind(project).push_bind((start * 500 + i + 1) as i64).push_bind(5_i32).push_bind(body.as_slice());
                    });
                    q.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }};
        }
        match self.backend {
            Backend::Sqlite => {
                seed!(sqlx::Sqlite, sqlx::SqliteConnection::connect(&self.database_url).await?);
            }
            Backend::Postgres => {
                seed!(sqlx::Postgres, sqlx::PgConnection::connect(&self.database_url).await?);
            }
        }
        Ok(())
    }
}

fn chrono_like_now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
