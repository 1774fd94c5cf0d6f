//! Start-up configuration: flags, each with a `BATON_…` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// The default listen address: loopback, so a laptop's hub is not reachable from the
/// network until told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7437";

/// Baton's session hub: sessions, checkpoints and project memory for AI coding agents,
/// over gRPC, on SQLite (default) or Postgres. --database-url and --log-level work with
/// every subcommand; the other options are the server's.
#[derive(Debug, Clone, Parser)]
#[command(name = "baton-server", version, about, long_about = None)]
pub struct Config {
    /// Address to listen on (gRPC over HTTP/2).
    #[arg(long, env = "BATON_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// Database URL: `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`. Default: an SQLite
    /// file `baton.db` in the platform data directory (e.g. ~/.local/share/baton).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "BATON_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    /// Log filter: error, warn, info, debug, trace, or a tracing directive list.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "BATON_LOG_LEVEL",
        default_value = "info"
    )]
    pub log_level: String,

    /// Allow listening on a non-loopback address while the server has no access tokens
    /// (anyone who can reach it can then read and write everything).
    #[arg(long, env = "BATON_ALLOW_OPEN_NETWORK")]
    pub allow_open_network: bool,

    /// Sessions without a lease go idle after this long without activity.
    #[arg(long, env = "BATON_IDLE_AFTER", default_value = "30m", value_parser = humantime::parse_duration)]
    pub idle_after: Duration,

    /// How often leases and inactivity are checked.
    #[arg(long, env = "BATON_REAPER_INTERVAL", default_value = "5s", value_parser = humantime::parse_duration)]
    pub reaper_interval: Duration,

    /// How often watch readers poll the event table when nothing woke them.
    #[arg(long, env = "BATON_WATCH_POLL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub watch_poll: Duration,

    /// Largest checkpoint accepted (state plus payload, uncompressed), in bytes.
    #[arg(long, env = "BATON_MAX_CHECKPOINT_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_checkpoint_bytes: usize,

    /// Live reservations (held and waiting) one project may have.
    #[arg(long, env = "BATON_MAX_RESERVATIONS", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_reservations: u32,

    /// Largest PutMemory request, in bytes.
    #[arg(long, env = "BATON_MAX_MEMORY_REQUEST_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_memory_request_bytes: usize,

    /// Largest request of any other kind (sessions, reads, watch), in bytes.
    #[arg(long, env = "BATON_MAX_REQUEST_BYTES", default_value_t = 1024 * 1024)]
    pub max_request_bytes: usize,

    /// Requests per second each access token may send, sustained (0 = no limit). Requests
    /// without a token (an open hub) are not rate-limited.
    #[arg(long, env = "BATON_RATE_LIMIT", default_value_t = 100)]
    pub rate_limit: u32,

    /// Requests a token may send in a burst above --rate-limit.
    #[arg(long, env = "BATON_RATE_BURST", default_value_t = 200)]
    pub rate_burst: u32,

    /// Authentication attempts per second per client address that fail or need a lookup (a
    /// missing, unknown or revoked token, or one not used in the last 2 s); 0 = off.
    #[arg(long, env = "BATON_AUTH_FAILURE_RATE", default_value_t = 5)]
    pub auth_failure_rate: u32,

    /// Such attempts a client address may make in a burst above --auth-failure-rate.
    #[arg(long, env = "BATON_AUTH_FAILURE_BURST", default_value_t = 50)]
    pub auth_failure_burst: u32,

    /// Open TCP connections in all; more are closed as they are accepted.
    #[arg(long, env = "BATON_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Open TCP connections per client address (an IPv6 /64 counts as one address).
    #[arg(long, env = "BATON_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 512)]
    pub max_connections_per_address: usize,

    /// A new connection must finish its TLS handshake and send its first request within
    /// this; 0s = no deadline.
    #[arg(long, env = "BATON_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub handshake_timeout: Duration,

    /// A connection without an open stream (a request or a Watch) for this long is closed;
    /// 0s = never.
    #[arg(long, env = "BATON_IDLE_TIMEOUT", default_value = "10m", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,

    /// HTTP/2 keepalive: ping a connection after this long without frames, and close it if
    /// the ping is not answered within the same time; 0s = off.
    #[arg(long, env = "BATON_HTTP2_KEEPALIVE", default_value = "60s", value_parser = humantime::parse_duration)]
    pub http2_keepalive: Duration,

    /// Projects one Watch may follow (named, or all a token may read).
    #[arg(long, env = "BATON_MAX_WATCH_PROJECTS", default_value_t = 100)]
    pub max_watch_projects: usize,

    /// Watch streams each token (or, on an open hub, each client address) may hold open.
    #[arg(long, env = "BATON_MAX_WATCHES_PER_TOKEN", default_value_t = 32)]
    pub max_watches_per_token: usize,

    /// Searches each token (or, on an open hub, each client address) may have running at
    /// once; more are refused until one answers.
    #[arg(long, env = "BATON_MAX_SEARCHES_PER_TOKEN", default_value_t = 4)]
    pub max_searches_per_token: usize,

    /// How long one search's statements may run before the database stops them (the search
    /// then answers RESOURCE_EXHAUSTED): a duration with its unit (ms, s).
    #[arg(long, env = "BATON_SEARCH_TIME_LIMIT", default_value = "2s", value_parser = humantime::parse_duration)]
    pub search_time_limit: Duration,

    /// Retention: keep every checkpoint younger than this many days.
    #[arg(long, env = "BATON_KEEP_DAYS", default_value_t = 90)]
    pub keep_days: u32,

    /// Retention: beyond --keep-days, keep each session's head and this many of its nearest
    /// valid ancestors.
    #[arg(long, env = "BATON_KEEP_ANCESTORS", default_value_t = 5)]
    pub keep_ancestors: usize,

    /// Retention: delete item logs (agent SDK sessions, ItemLogService) that have not changed
    /// for this many days; 0 keeps them.
    #[arg(long, env = "BATON_ITEM_LOG_DAYS", default_value_t = 0)]
    pub item_log_days: u32,

    /// Retention: delete commit links (`baton why`) recorded more than this many days ago;
    /// 0 keeps them (they outlive branches and pruned checkpoints; that is their point).
    #[arg(long, env = "BATON_COMMIT_LINK_DAYS", default_value_t = 0)]
    pub commit_link_days: u32,

    /// How often retention runs (0s = never; `baton-server prune` runs it by hand).
    #[arg(long, env = "BATON_RETENTION_INTERVAL", default_value = "1h", value_parser = humantime::parse_duration)]
    pub retention_interval: Duration,

    /// On a database with no token yet, create the first admin token with this secret
    /// (for containers; otherwise use `baton-server token create`).
    #[arg(long, env = "BATON_BOOTSTRAP_ADMIN_TOKEN", hide_env_values = true)]
    pub bootstrap_admin_token: Option<String>,

    /// Serve Prometheus metrics at http://ADDR/metrics (a separate port; off by default).
    #[arg(long, env = "BATON_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Serve TLS with this certificate chain (PEM; leaf first). Needs --tls-key.
    #[arg(long, env = "BATON_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "BATON_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Do not serve the web view (pages for people at http://LISTEN/, on the gRPC port).
    #[arg(long, env = "BATON_NO_WEB")]
    pub no_web: bool,

    /// Host names the web view answers to (comma-separated; a port after a name is ignored),
    /// besides localhost, the loopback addresses and the --listen address. A page asked for
    /// under any other name (a DNS-rebinding page) is refused; gRPC is not affected.
    #[arg(long, env = "BATON_WEB_HOSTS", value_delimiter = ',')]
    pub web_hosts: Vec<String>,

    /// How long a browser stays signed in to the web view.
    #[arg(long, env = "BATON_WEB_SESSION_TTL", default_value = "12h", value_parser = humantime::parse_duration)]
    pub web_session_ttl: Duration,

    #[command(subcommand)]
    pub command: Option<ServerCommand>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ServerCommand {
    /// Check that the server at --listen answers its health check (exit 0 when serving);
    /// for container health checks.
    Healthcheck {
        /// Check this URL instead of the server's --listen address (BATON_LISTEN), e.g.
        /// https://baton.example.com:7437 for a server with TLS.
        #[arg(long)]
        url: Option<String>,
        /// Trust this CA certificate (PEM) for an https URL, besides the system's roots.
        #[arg(long)]
        ca_cert: Option<PathBuf>,
    },
    /// Remove old checkpoints by the retention rules now (--keep-days, --keep-ancestors):
    /// runs against the database; the server may be running.
    Prune {
        /// Say what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only this project.
        #[arg(long)]
        project: Option<String>,
        /// Keep every checkpoint younger than this many days (default: the server's
        /// --keep-days, BATON_KEEP_DAYS, 90).
        #[arg(long)]
        keep_days: Option<u32>,
        /// Beyond that, keep each session's head and this many of its nearest valid
        /// ancestors (default: the server's --keep-ancestors, BATON_KEEP_ANCESTORS, 5).
        #[arg(long)]
        keep_ancestors: Option<usize>,
        /// Delete item logs not changed for this many days; 0 keeps them (default: the
        /// server's --item-log-days, BATON_ITEM_LOG_DAYS, 0).
        #[arg(long)]
        item_log_days: Option<u32>,
        /// Delete commit links recorded more than this many days ago; 0 keeps them
        /// (default: the server's --commit-link-days, BATON_COMMIT_LINK_DAYS, 0).
        #[arg(long)]
        commit_link_days: Option<u32>,
    },
    /// Delete a project's events below a revision; clients listing or watching from below
    /// it get OUT_OF_RANGE and re-read the state.
    Compact {
        /// The project.
        #[arg(long)]
        project: String,
        /// Events with a lower revision are deleted.
        #[arg(long)]
        below_revision: i64,
    },
    /// Overwrite a value (a leaked secret) everywhere a project stores it: records, events,
    /// conflicts, transcripts. Reads the value from stdin unless --value is given (which
    /// would leave it in your shell history).
    Purge {
        /// The project.
        #[arg(long)]
        project: String,
        /// The value to overwrite (default: read from stdin).
        #[arg(long, hide_env_values = true)]
        value: Option<String>,
        /// Count what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write this database's history (every project, or one) to an archive for `import`.
    Export {
        /// The archive to write ("-" = stdout).
        #[arg(long, short)]
        output: PathBuf,
        /// Only this project (default: every project).
        #[arg(long)]
        project: Option<String>,
    },
    /// Add an archive from `export` (e.g. a laptop's) to this database: ids kept, revisions
    /// renumbered into each project's log, records already present skipped.
    ///
    /// The whole archive is checked first, every record as the API checks a request and
    /// every id it points at resolved in its own project: a refused archive writes nothing.
    Import {
        /// The archive to read ("-" = stdin, copied to a temporary file to be read twice).
        #[arg(long, short)]
        input: PathBuf,
        /// Import only this project of the archive.
        #[arg(long)]
        project: Option<String>,
        /// Check the archive and say what would be imported; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Manage access tokens (runs against the database; the server may be running).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print its secret (shown once; only its hash is stored). The first
    /// token ends open access: from then on every request needs a token.
    Create {
        /// Who or what uses it, e.g. "alice" or "ci-orchestrator".
        #[arg(long)]
        name: String,
        /// admin (everything), writer (read and write), reader (read only).
        #[arg(long, value_parser = ["admin", "writer", "reader"])]
        role: String,
        /// Limit the token to one project key.
        #[arg(long)]
        project: Option<String>,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by name.
    Revoke { name: String },
}

impl Config {
    /// The database URL to use, making the default SQLite location if needed.
    pub fn resolved_database_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database_url {
            return Ok(url.clone());
        }
        let dirs = directories::ProjectDirs::from("", "", "baton").ok_or_else(|| {
            anyhow::anyhow!("no home directory to put the database in; pass --database-url")
        })?;
        let dir: PathBuf = dirs.data_dir().to_path_buf();
        // Private to this user (`store::sqlite::files` keeps the files so).
        crate::disk::create_dir_all(&dir, 0o700)
            .map_err(|e| anyhow::anyhow!("cannot create data directory {}: {e}", dir.display()))?;
        Ok(format!("sqlite://{}", dir.join("baton.db").display()))
    }
}

/// A database URL safe to log: the password hidden.
pub fn redacted_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let creds = &url[scheme_end + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:****{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subcommand's help lists what it uses: its own options and the two global ones, not
    /// the serving options.
    #[test]
    fn export_help_lists_only_what_export_uses() {
        use clap::CommandFactory as _;
        let mut command = Config::command();
        // Global options reach the subcommands when the command is built.
        command.build();
        let export = command.find_subcommand("export").expect("export");
        let mut ids: Vec<&str> = export.get_arguments().map(|a| a.get_id().as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["database_url", "help", "log_level", "output", "project"]);
        let prune = command.find_subcommand("prune").expect("prune");
        assert!(prune.get_arguments().any(|a| a.get_id() == "keep_days"), "prune takes its own --keep-days");
    }

    #[test]
    fn hides_passwords() {
        assert_eq!(
            redacted_url("postgres://baton:secret@db:5432/baton"),
            "postgres://baton:****@db:5432/baton"
        );
        assert_eq!(redacted_url("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[test]
    fn options_work_before_and_after_a_subcommand() {
        use clap::CommandFactory;
        Config::command().debug_assert();
        for args in [
            &["baton-server", "--database-url", "sqlite:///x.db", "token", "list"][..],
            &["baton-server", "token", "--database-url", "sqlite:///x.db", "list"],
            &["baton-server", "token", "list", "--database-url", "sqlite:///x.db"],
            &[
                "baton-server",
                "token",
                "create",
                "--name",
                "a",
                "--role",
                "admin",
                "--database-url",
                "sqlite:///x.db",
            ],
            &["baton-server", "prune", "--dry-run", "--keep-days", "3", "--database-url", "sqlite:///x.db"],
        ] {
            let config = Config::try_parse_from(args).map_err(|e| e.to_string());
            let url = config.as_ref().ok().and_then(|c| c.database_url.clone());
            assert_eq!(url.as_deref(), Some("sqlite:///x.db"), "{args:?}: {config:?}");
        }
    }
}
