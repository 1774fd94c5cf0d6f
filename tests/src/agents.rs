//! The real agent CLIs for the agent test suite: installed from npm at their pinned versions
//! (`baton_proto::agent::COVERED`) into a cache outside the clone, kept between runs, and run
//! offline against the fake model on simulated machines (a HOME, a host name, a clone of
//! the repository at a path of its own).
//!
//! With `CI=true` every CLI is required: one that cannot be installed fails the run.
//! Elsewhere a missing CLI skips its tests, saying why.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use baton_proto::agent::{COVERED, Covered};

use crate::{Output, binary};

/// Where the CLIs are installed: `BATON_AGENTS_CACHE`, else `~/.cache/baton-test-agents`,
/// one folder per set of pinned versions.
fn cache_dir() -> PathBuf {
    let base = std::env::var_os("BATON_AGENTS_CACHE").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into()))
                .join(".cache/baton-test-agents")
        },
        PathBuf::from,
    );
    let pins: Vec<String> = COVERED.iter().map(|c| format!("{}@{}", c.package, c.version)).collect();
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(pins.join(" ").as_bytes()));
    base.join(&digest[..16])
}

/// Installs the pinned CLIs once per process (a lock file keeps two processes from
/// installing into the same folder at once). The folder with their commands, or why not.
fn install() -> &'static Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let dir = cache_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let lock = std::fs::File::create(dir.join(".lock")).map_err(|e| format!("lock: {e}"))?;
        lock.lock().map_err(|e| format!("lock: {e}"))?;
        let bin = dir.join("node_modules/.bin");
        let done = dir.join(".installed");
        if !done.exists() {
            let started = Instant::now();
            let out = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
                .arg(&dir)
                .args(COVERED.iter().map(|c| format!("{}@{}", c.package, c.version)))
                .output()
                .map_err(|e| format!("cannot run npm: {e}"))?;
            if !out.status.success() {
                return Err(format!("npm install failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
            std::fs::write(&done, b"").map_err(|e| format!("{e}"))?;
            eprintln!("agents: installed {} in {:.0?} into {}", pins(), started.elapsed(), dir.display());
        }
        Ok(bin)
    })
}

fn pins() -> String {
    COVERED.iter().map(|c| format!("{}@{}", c.package, c.version)).collect::<Vec<_>>().join(", ")
}

/// An installed agent CLI.
#[derive(Debug, Clone)]
pub struct Cli {
    pub covered: Covered,
    pub path: PathBuf,
}

/// The CLI of `agent`, installed; `None` (with the reason printed) when it cannot be had
/// outside CI. In CI a missing CLI panics: the suite must prove every agent.
pub fn cli(agent: &str) -> Option<Cli> {
    let required = std::env::var("CI").is_ok_and(|v| v == "true");
    let found = install().clone().and_then(|bin| {
        let covered =
            *COVERED.iter().find(|c| c.agent == agent).ok_or_else(|| format!("no pin for {agent}"))?;
        let path = bin.join(covered.command);
        let version = Command::new(&path)
            .arg("--version")
            .env("HOME", std::env::temp_dir())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
        let printed = String::from_utf8_lossy(&version.stdout);
        if !printed.contains(covered.version) {
            return Err(format!(
                "{} --version printed {printed:?}, not {}",
                covered.command, covered.version
            ));
        }
        Ok(Cli { covered, path })
    });
    match found {
        Ok(cli) => Some(cli),
        Err(why) if required => panic!("CI=true and {agent} is required: {why}"),
        Err(why) => {
            eprintln!("agents: skipping {agent}: {why}");
            None
        }
    }
}

/// A simulated machine: its own HOME, host name (as Baton records it) and a clone of the
/// project at a path of its own.
pub struct Machine {
    pub host: String,
    pub home: tempfile::TempDir,
    pub repo: PathBuf,
    pub server: String,
}

impl Machine {
    /// A machine with a git repository whose origin is `origin` (the project's identity),
    /// at `<tmp>/<host>/work/<name>` so every machine's clone has a different path.
    pub fn new(host: &str, server: &str, origin: &str) -> Self {
        let home = tempfile::tempdir().expect("temp home");
        let repo = home.path().join(format!("{host}-work")).join("project");
        std::fs::create_dir_all(&repo).expect("repo dir");
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("HOME", home.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["config", "user.email", "dev@example.com"]);
        git(&["config", "user.name", "Dev"]);
        git(&["remote", "add", "origin", origin]);
        std::fs::write(repo.join("README.md"), "# project\n").expect("write");
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "start"]);
        Self { host: host.to_owned(), home, repo, server: server.to_owned() }
    }

    pub fn baton_home(&self) -> PathBuf {
        self.home.path().join(".baton")
    }

    /// The environment every process of this machine gets (and the agents pass to hooks):
    /// the agent CLIs on its PATH, as on a user's machine.
    fn env(&self, command: &mut Command) {
        let mut path = std::env::var_os("PATH").unwrap_or_default();
        if let Ok(bin) = install() {
            let mut dirs = vec![bin.clone()];
            dirs.extend(std::env::split_paths(&path));
            path = std::env::join_paths(dirs).unwrap_or(path);
        }
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("USER", "dev")
            .env("TERM", "dumb")
            .env("BATON_HOME", self.baton_home())
            .env("BATON_SERVER", &self.server)
            .env("BATON_HOST", &self.host);
    }

    /// Runs `baton args…` in the repository.
    pub fn baton(&self, args: &[&str]) -> Output {
        let mut command = Command::new(binary("baton"));
        command.args(args).current_dir(&self.repo);
        self.env(&mut command);
        run(command, "")
    }

    /// Runs an agent CLI in the repository with `args`, pointed at the fake model.
    pub fn agent(&self, cli: &Cli, model_url: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        run(self.agent_command(cli, model_url, args, extra_env), "")
    }

    /// Runs an agent CLI in `dir` (a subdirectory of the repository, say).
    pub fn agent_in(
        &self,
        dir: &std::path::Path,
        cli: &Cli,
        model_url: &str,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> Output {
        let mut command = self.agent_command(cli, model_url, args, extra_env);
        command.current_dir(dir);
        run(command, "")
    }

    /// Starts an agent CLI and returns at once (to kill it mid-session).
    pub fn spawn_agent(&self, cli: &Cli, model_url: &str, args: &[&str]) -> std::process::Child {
        self.agent_command(cli, model_url, args, &[])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", cli.path.display()))
    }

    fn agent_command(
        &self,
        cli: &Cli,
        model_url: &str,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> Command {
        let mut command = Command::new(&cli.path);
        command.args(args).current_dir(&self.repo);
        self.env(&mut command);
        match cli.covered.agent {
            "claude" => {
                command
                    .env("ANTHROPIC_BASE_URL", model_url)
                    .env("ANTHROPIC_API_KEY", "sk-ant-fake")
                    // As root, --dangerously-skip-permissions needs it.
                    .env("IS_SANDBOX", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_ERROR_REPORTING", "1")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
            }
            "codex" => {
                command.env("FAKE_OPENAI_KEY", "fake");
            }
            "gemini" => {
                command.env("GOOGLE_GEMINI_BASE_URL", model_url).env("GEMINI_API_KEY", "fake");
            }
            _ => {}
        }
        command.envs(extra_env.iter().copied());
        command
    }
}

/// Runs a command to its end (at most two minutes, then it is killed), with `stdin`.
fn run(mut command: Command, stdin: &str) -> Output {
    use std::io::Write as _;
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let pid = child.id().to_string();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let out = if let Ok(out) = finished.recv_timeout(Duration::from_mins(2)) {
        out
    } else {
        let _ = Command::new("kill").args(["-9", &pid]).status();
        finished.recv().unwrap_or_else(|e| panic!("{command:?}: {e}"))
    }
    .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}
