//! `baton`: the client that people and agent hooks call.

use std::io::Read as _;
use std::path::PathBuf;

use baton::agents::Agent;
use baton::config::Settings;
use baton::{cmd, ctx::Ctx, hook};
use clap::{Parser, Subcommand};

/// Baton client: warm starts and saved sessions for AI coding agents, on any machine.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about, infer_subcommands = true)]
struct Cli {
    /// Hub URL, e.g. http://127.0.0.1:7437 or an address as baton-server prints it (overrides
    /// BATON_SERVER and the config file).
    #[arg(long, global = true, help_heading = "Global options")]
    server: Option<String>,

    /// Access token (overrides BATON_TOKEN and the config file).
    #[arg(long, global = true, help_heading = "Global options", hide_env_values = true)]
    token: Option<String>,

    /// CA certificate (PEM) to trust for an https:// hub (overrides BATON_CA_CERT and the
    /// config file's ca_cert).
    #[arg(long, global = true, help_heading = "Global options", value_name = "PEM")]
    ca_cert: Option<PathBuf>,

    /// Print JSON instead of text (read commands).
    #[arg(long, global = true, help_heading = "Global options")]
    json: bool,

    /// Work as if started in this directory.
    #[arg(short = 'C', long, global = true, help_heading = "Global options", value_name = "DIR")]
    dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What the agents' hooks call: reads the hook's JSON payload on stdin.
    Hook {
        /// The agent whose hook this is.
        agent: Agent,
        /// The agent's event name (SessionStart, PreToolUse, PostToolUse, PreCompact,
        /// PreCompress, Stop, AfterAgent, SessionEnd, or Cursor's camelCase names).
        event: String,
        /// Read the payload from this file instead of stdin (and delete it).
        #[arg(long, hide = true)]
        payload_file: Option<PathBuf>,
    },
    /// Install Baton's hooks into an agent's settings (merging; run again to update).
    /// Also registers `baton mcp` (the agent's memory tools) in the agent's MCP
    /// configuration, with the permission to call its tools without asking.
    Init {
        /// The agent to install the hooks into.
        agent: Agent,
        /// user: every project (~/.claude, ~/.codex, ~/.gemini, ~/.cursor); project: this one.
        #[arg(long, value_enum, default_value = "user")]
        scope: baton::agents::Scope,
        /// Remove exactly what Baton added (hooks, MCP server, permission rules).
        #[arg(long)]
        uninstall: bool,
        /// Install the hooks only, without the MCP server (and remove one `init` added).
        #[arg(long)]
        no_mcp: bool,
        /// Also upload the agent's conversation with checkpoints (Claude Code, Codex, Gemini), so that
        /// `baton resume --restore` can continue the conversation on another machine.
        #[arg(long)]
        sync_transcripts: bool,
        /// Codex: record trust for Baton's hooks in Codex's config.toml, as its /hooks does
        /// (Codex skips a hook it has not trusted, without a word).
        #[arg(long)]
        trust: bool,
        /// Also install a git pre-commit hook in this repository that refuses (or, with the
        /// warn setting, warns about) a commit touching files another session has reserved.
        #[arg(long)]
        pre_commit: bool,
        /// Also install a git post-commit hook in this repository that links every commit made
        /// here to the agent session that made it, or that was live while you made it (`baton
        /// why`). Without it, the agent's hooks still see the commits made while it runs.
        #[arg(long)]
        post_commit: bool,
    },
    /// What the git pre-commit hook runs (`baton init --pre-commit`): checks the staged files
    /// against other sessions' reservations.
    #[command(hide = true)]
    PreCommit,
    /// What the git post-commit hook runs (`baton init --post-commit`): links the commit to
    /// the session that made it.
    #[command(hide = true)]
    PostCommit,
    /// Serve the agent's memory tools over MCP on stdin/stdout (brief, remember, forget,
    /// recall, search, sessions, session, checkpoint, conflicts, reserve, release,
    /// reservations, why); `baton init` registers it with each agent. While it runs it renews
    /// its conversation's reservations.
    Mcp {
        /// The agent that starts it (its conversation's session and brief budget).
        #[arg(long, value_enum)]
        agent: Option<Agent>,
    },
    /// Print the warmup brief for the current project.
    Warmup {
        /// Budget in characters (500 to 50000; default: brief_budget in the config, 9000).
        #[arg(long, value_parser = clap::value_parser!(u32).range(500..=50_000))]
        budget: Option<u32>,
    },
    /// Show the hub, the project and the offline queue (with refused writes).
    Status,
    /// Check the hub, the installed hooks and whether they will run, the project, the queue.
    Doctor {
        /// Run this agent's SessionStart hook as the agent would (no session is started)
        /// and show what its model would receive.
        #[arg(long = "try", value_enum, value_name = "AGENT")]
        try_agent: Option<Agent>,
    },
    /// Resume the project's latest unfinished session (or a given one) on this machine.
    Resume {
        /// The session to resume: its full id or any unique part (as `baton sessions` shows).
        #[arg(long, conflicts_with = "checkpoint")]
        session: Option<String>,
        /// Resume from this checkpoint: its full id or any unique part (as `baton checkpoints`
        /// shows).
        #[arg(long)]
        checkpoint: Option<String>,
        /// The agent you will continue with.
        #[arg(long, value_enum, default_value = "claude")]
        agent: Agent,
        /// Write the session's uploaded transcript where the agent looks for it here (with
        /// this directory as its project path), so its own resume works on this machine.
        #[arg(long)]
        restore: bool,
    },
    /// List the project's sessions.
    Sessions {
        /// Only these statuses (active, idle, completed, crashed, resumed, initializing).
        #[arg(long, value_delimiter = ',')]
        status: Vec<String>,
        /// Only this agent (claude, codex, gemini, cursor, custom).
        #[arg(long)]
        agent: Option<String>,
        /// Only this host.
        #[arg(long)]
        host: Option<String>,
        /// Only this user's sessions (the name the hooks report).
        #[arg(long)]
        user: Option<String>,
        /// Only sessions on this git branch.
        #[arg(long)]
        branch: Option<String>,
        /// At most this many sessions, newest first.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// An orchestrator's threads in a project (LangGraph's, through baton-client's
    /// checkpointer): their checkpoints newest first; `baton threads delete T` removes threads.
    Threads {
        #[command(subcommand)]
        command: Option<ThreadsCommand>,
        /// The project (default: this directory's, as for every command).
        #[arg(long)]
        project: Option<String>,
        /// Only this thread.
        #[arg(long)]
        thread: Option<String>,
        /// Only this checkpoint namespace ("" = the root).
        #[arg(long)]
        namespace: Option<String>,
        /// Only checkpoints whose metadata has these values, a JSON object: '{"source": "loop"}'.
        #[arg(long)]
        filter: Option<String>,
        /// At most this many checkpoints, newest first.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Reserve paths (files or directories, relative to here) or tasks for your agent's
    /// session, so that other sessions leave them alone or wait: their pre-tool hooks warn or
    /// refuse edits of them. Held while the session's hooks (or `baton mcp`) renew it.
    Reserve {
        /// Files or directories inside the repository (a directory covers everything in it).
        paths: Vec<String>,
        /// A task to reserve: an issue id, a task title, a thread id (repeat for more).
        #[arg(long = "task", value_name = "KEY")]
        tasks: Vec<String>,
        /// Why: shown to whoever is blocked (secrets are redacted).
        #[arg(long)]
        reason: Option<String>,
        /// Only on this branch (default: the whole project, every branch and worktree).
        #[arg(long)]
        branch: Option<String>,
        /// When someone holds them, wait in line this long (e.g. 30s, 5m; at most 10m).
        #[arg(long, value_parser = humantime::parse_duration)]
        wait: Option<std::time::Duration>,
        /// Take them over from their holder: your own other session, or anyone's with an
        /// admin token. The holder's next hook tells its model.
        #[arg(long)]
        steal: bool,
        /// The session that holds them: its full id or a unique part (default: the agent
        /// conversation running this command).
        #[arg(long)]
        session: Option<String>,
    },
    /// Release reservations of your agent's session (paths relative to here, tasks, or all).
    Release {
        /// Files or directories to release.
        paths: Vec<String>,
        /// A task to release (repeat for more).
        #[arg(long = "task", value_name = "KEY")]
        tasks: Vec<String>,
        /// Every reservation and wait of the session.
        #[arg(long)]
        all: bool,
        /// The session: its full id or a unique part (default: the agent conversation running
        /// this command).
        #[arg(long)]
        session: Option<String>,
    },
    /// Who holds what in the project and who waits (or only what overlaps the paths given);
    /// `baton reservations settings` sets the time to live and what the hooks do.
    Reservations {
        #[command(subcommand)]
        command: Option<ReservationsCommand>,
        /// Only reservations overlapping these paths (relative to here).
        paths: Vec<String>,
        /// Only those of the agent conversation running this command.
        #[arg(long)]
        mine: bool,
    },
    /// Why lines of a file are there: the session that wrote them (agent, person, machine,
    /// when), the prompt, task and decisions behind each line's commit, and how it was found
    /// (the commit itself; after a rebase or cherry-pick, its patch id; after a squash merge
    /// with the branch gone, the lines' fingerprints). Lines no session wrote say so.
    Why {
        /// The file (relative to here), and optionally its lines: src/lib.rs, src/lib.rs:42,
        /// src/lib.rs:40-60.
        #[arg(value_name = "FILE[:LINE[-LINE]]")]
        spec: String,
    },
    /// The commits a session made, newest first (default: the newest active session here), or
    /// with --all the project's.
    Log {
        /// The session: its full id or any unique part (as `baton sessions` shows).
        #[arg(long)]
        session: Option<String>,
        /// Every session's commits in the project.
        #[arg(long, conflicts_with = "session")]
        all: bool,
        /// At most this many commits.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one session.
    Session {
        /// The session's full id or any unique part (as `baton sessions` shows).
        id: String,
    },
    /// List a session's checkpoints (default: the newest session here).
    Checkpoints {
        /// The session: its full id or any unique part (default: the newest session here).
        #[arg(long)]
        session: Option<String>,
        /// Show the tree of checkpoints (forks included).
        #[arg(long)]
        tree: bool,
    },
    /// Save a manual checkpoint of the active session here: of a live agent conversation
    /// here, with its tasks, files and last prompt. Queued when the hub is down.
    Checkpoint {
        /// Why you are saving now (secrets are redacted).
        #[arg(long, default_value = "manual checkpoint")]
        reason: String,
        /// The session: its full id or any unique part (default: the live conversation here,
        /// else the newest active session here). With the hub down, its full id.
        #[arg(long)]
        session: Option<String>,
    },
    /// Project memory: goal, constraints, open loops, recent changes, decisions, notes.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Search the project's memory, checkpoints and sessions. Words must all match;
    /// "quoted phrases" match side by side; -word excludes; a OR b matches either. Quote the
    /// whole query for the shell: baton search '"retry policy" -flaky'.
    Search {
        /// The words to find (see above).
        #[arg(required = true, value_name = "QUERY")]
        query: Vec<String>,
        /// Only these kinds: memory, checkpoint, session (repeat or separate by commas).
        #[arg(long = "kind", value_delimiter = ',')]
        kinds: Vec<String>,
        /// Only records of this session: its full id or any unique part.
        #[arg(long)]
        session: Option<String>,
        /// Only records on this branch.
        #[arg(long)]
        branch: Option<String>,
        /// Only records written by this user.
        #[arg(long)]
        author: Option<String>,
        /// Only records made since an age (2h, 3days) or a date (2026-11-20).
        #[arg(long)]
        since: Option<String>,
        /// Only records made before an age or a date.
        #[arg(long)]
        until: Option<String>,
        /// At most this many hits, best first.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// List the project's events (the change log).
    Events {
        /// Events after this revision.
        #[arg(long, default_value_t = 0)]
        after: i64,
        /// At most this many events.
        #[arg(long, default_value_t = 100)]
        limit: i32,
    },
    /// Follow the project's events live.
    Watch {
        /// Replay from this revision first (default: only new events).
        #[arg(long)]
        after: Option<i64>,
    },
    /// List conflicts: writes that overwrote newer values, and stale queued writes.
    Conflicts {
        /// Conflicts after this revision.
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
    /// Send the offline queue now, in order. Writes another baton process is sending at
    /// that moment are waited for (up to 40 s) and sent here if that process gave up.
    /// Temporary files that writes cut short (a kill, a power cut) left in Baton's folders
    /// are removed once an hour old.
    Sync,
}

#[derive(Debug, Subcommand)]
enum ThreadsCommand {
    /// Delete threads: every namespace, checkpoint and pending write of each.
    Delete {
        /// The threads' keys.
        #[arg(required = true)]
        threads: Vec<String>,
        /// The project (default: this directory's).
        #[arg(long)]
        project: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ReservationsCommand {
    /// Set the project's reservation settings (only those given change).
    Settings {
        /// How long a reservation lives without a renewal (e.g. 10m; 2s to 24h). The hooks
        /// renew at most every 10 s, and only while the agent calls tools: keep it well above
        /// the longest turn without a tool call, unless `baton mcp` is registered.
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<std::time::Duration>,
        /// What the pre-tool hooks do with an edit of a path another session holds: warn
        /// (the model is told, the edit goes ahead), deny (refused), off.
        #[arg(long, value_parser = ["warn", "deny", "off"])]
        enforce: Option<String>,
        /// Reserve the task an agent marks in progress and the file it starts editing.
        #[arg(long, value_parser = clap::builder::BoolishValueParser::new(), value_name = "on|off")]
        auto: Option<bool>,
    },
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Add an item: to a current-state set (goal, constraint, open_loop, recent_change) as
    /// it is when the write arrives, so concurrent adds are never lost and it works offline
    /// (queued); decision and session_summary are appended; notes need --key. A text is at
    /// most 16 KiB.
    Add {
        /// goal, constraint, open_loop, recent_change, decision, session_summary or note.
        category: String,
        /// The item (at most 16 KiB; secrets are redacted before it is sent).
        text: String,
        /// Why (for decisions).
        #[arg(long)]
        rationale: Option<String>,
        /// The note's key (category note).
        #[arg(long)]
        key: Option<String>,
        /// Scope to a branch.
        #[arg(long)]
        branch: Option<String>,
        /// Compare-and-set: fail unless the record is still at this revision.
        #[arg(long, value_name = "REVISION")]
        if_revision: Option<i64>,
    },
    /// Replace a current-state set (goal, constraint, open_loop, recent_change) with these
    /// items in one write, e.g. a new goal: baton memory set goal "ship v2" (works offline:
    /// queued).
    Set {
        /// goal, constraint, open_loop or recent_change.
        category: String,
        /// The items the set holds afterwards (each at most 16 KiB).
        #[arg(required = true)]
        items: Vec<String>,
        /// The set of this branch.
        #[arg(long)]
        branch: Option<String>,
    },
    /// List memory (evicted history too with --all).
    #[command(alias = "ls")]
    List {
        /// Only this category.
        category: Option<String>,
        /// Include entries evicted past their category's cap.
        #[arg(long)]
        all: bool,
        /// Show each entry whole (its rationale too), not clipped to the table's width.
        #[arg(long)]
        wide: bool,
    },
    /// Remove an item from a current-state set by its text (works offline: queued).
    Remove {
        /// goal, constraint, open_loop or recent_change.
        category: String,
        /// The item's text, as `baton memory list` shows it.
        text: String,
        /// The set of this branch.
        #[arg(long)]
        branch: Option<String>,
    },
    /// Remove an entry by id, or a whole set/note with --category (and --key).
    Rm {
        /// The entry's id: the full id or a unique part (as `baton memory list` shows it).
        id: Option<String>,
        /// Remove the whole set (or note) of this category instead.
        #[arg(long)]
        category: Option<String>,
        /// The note's key (with --category note).
        #[arg(long)]
        key: Option<String>,
    },
    /// Set how many items a category keeps (the oldest go to history past it), e.g.
    /// baton memory caps decision 20.
    Caps {
        /// The category.
        category: String,
        /// Items it keeps (1 to 1000).
        #[arg(value_parser = clap::value_parser!(i32).range(1..=1000))]
        cap: i32,
    },
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
    let ok = runtime.block_on(run(cli.command, cli.server, cli.token, cli.ca_cert, cli.json, cli.dir));
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
    ca_cert: Option<PathBuf>,
    json: bool,
    dir: Option<PathBuf>,
) -> bool {
    let is_hook = matches!(command, Command::Hook { .. });
    let settings = match Settings::load(server.as_deref(), token.as_deref(), ca_cert.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton: {e:#}");
            return is_hook;
        }
    };
    let ctx = Ctx::new(settings);
    if let Some(d) = dir.as_ref().filter(|d| !d.is_dir()) {
        eprintln!("baton: -C {}: no such directory", baton::safe::line(&d.display().to_string()));
        return is_hook;
    }
    let dir = dir.or_else(|| std::env::current_dir().ok()).unwrap_or_else(|| PathBuf::from("."));
    let result = match command {
        Command::Hook { agent, event, payload_file } => {
            let mut stdin = String::new();
            if payload_file.is_none() {
                let _ = std::io::stdin().take(16 * 1024 * 1024).read_to_string(&mut stdin);
            }
            let out = Box::pin(hook::run(&ctx, agent, &event, &stdin, payload_file.as_deref())).await;
            if !out.is_empty() {
                println!("{out}");
            }
            return true;
        }
        Command::Mcp { agent } => {
            // stdout is the protocol: nothing else may print there.
            return match baton::mcp::serve(ctx, agent).await {
                Ok(()) => true,
                Err(e) => {
                    eprintln!("baton mcp: {e:#}");
                    false
                }
            };
        }
        command => dispatch(&ctx, &dir, command, json).await,
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            eprintln!("baton: {}", baton::safe::text(&cmd::words::for_cli(&format!("{e:#}"))));
            false
        }
    }
}

/// Every command but `hook` and `mcp`, which print their own way.
async fn dispatch(ctx: &Ctx, dir: &std::path::Path, command: Command, json: bool) -> anyhow::Result<()> {
    match command {
        init @ Command::Init { .. } => init_command(ctx, dir, &init, json),
        Command::PreCommit => cmd::precommit::run(ctx, dir).await,
        Command::PostCommit => cmd::postcommit::run(ctx, dir).await,
        Command::Warmup { budget } => cmd::warmup::run(ctx, dir, budget, json).await,
        Command::Status => cmd::status::run(ctx, dir, json).await,
        Command::Sync => cmd::sync::run(ctx).await,
        Command::Doctor { try_agent: Some(agent) } => cmd::doctor::try_agent(ctx, dir, agent, json).await,
        Command::Doctor { try_agent: None } => cmd::doctor::run(ctx, dir, json).await,
        Command::Resume { session, checkpoint, agent, restore } => {
            cmd::resume::run(ctx, dir, agent, session, checkpoint, restore, json).await
        }
        Command::Sessions { status, agent, host, user, branch, limit } => {
            let filters = cmd::sessions::Filters { status, agent, host, user, branch, limit };
            cmd::sessions::list(ctx, dir, filters, json).await
        }
        Command::Session { id } => cmd::sessions::show(ctx, dir, &id, json).await,
        Command::Why { spec } => cmd::why::why(ctx, dir, &spec, json).await,
        Command::Log { session, all, limit } => {
            cmd::why::log(ctx, dir, cmd::why::LogAsk { session, all, limit }, json).await
        }
        Command::Reserve { paths, tasks, reason, branch, wait, steal, session } => {
            let ask = cmd::reservations::Ask { paths, tasks, reason, branch, wait, steal, session };
            cmd::reservations::reserve(ctx, dir, ask, json).await
        }
        Command::Release { paths, tasks, all, session } => {
            cmd::reservations::release(
                ctx,
                dir,
                cmd::reservations::Which { paths, tasks, all, session },
                json,
            )
            .await
        }
        Command::Reservations {
            command: Some(ReservationsCommand::Settings { ttl, enforce, auto }), ..
        } => cmd::reservations::settings(ctx, dir, ttl, enforce, auto, json).await,
        Command::Reservations { command: None, paths, mine } => {
            cmd::reservations::list(ctx, dir, &paths, mine, json).await
        }
        Command::Threads {
            command: Some(ThreadsCommand::Delete { threads, project: own }), project, ..
        } => cmd::threads::delete(ctx, dir, own.or(project), threads, json).await,
        Command::Threads { command: None, project, thread, namespace, filter, limit } => {
            let filters = cmd::threads::Filters { project, thread, namespace, filter, limit };
            cmd::threads::list(ctx, dir, filters, json).await
        }
        Command::Checkpoints { session, tree } => {
            cmd::checkpoints::list(ctx, dir, session.as_deref(), tree, json).await
        }
        Command::Checkpoint { reason, session } => {
            cmd::checkpoints::create(ctx, dir, session.as_deref(), &reason, json).await
        }
        Command::Memory { command } => memory(ctx, dir, command, json).await,
        Command::Search { query, kinds, session, branch, author, since, until, limit } => {
            let flags = cmd::search::Flags { query, kinds, session, branch, author, since, until, limit };
            cmd::search::run(ctx, dir, flags, json).await
        }
        Command::Events { after, limit } => cmd::events::list(ctx, dir, after, limit, json).await,
        Command::Watch { after } => cmd::events::watch(ctx, dir, after, json).await,
        Command::Conflicts { after } => cmd::events::conflicts(ctx, dir, after, json).await,
        // `run` answers these itself.
        Command::Hook { .. } | Command::Mcp { .. } => anyhow::bail!("not dispatched here"),
    }
}

fn init_command(ctx: &Ctx, dir: &std::path::Path, command: &Command, json: bool) -> anyhow::Result<()> {
    let &Command::Init { agent, scope, uninstall, no_mcp, sync_transcripts, trust, pre_commit, post_commit } =
        command
    else {
        anyhow::bail!("not an init command");
    };
    let options =
        cmd::init::Options { uninstall, mcp: !no_mcp, sync_transcripts, trust, pre_commit, post_commit };
    cmd::init::run(ctx, dir, agent, scope, options, json)
}

async fn memory(ctx: &Ctx, dir: &std::path::Path, command: MemoryCommand, json: bool) -> anyhow::Result<()> {
    match command {
        MemoryCommand::Add { category, text, rationale, key, branch, if_revision } => {
            cmd::memory::add(
                ctx,
                dir,
                baton::usecase::memory::Add { category, text, rationale, key, branch, if_revision },
                json,
            )
            .await
        }
        MemoryCommand::List { category, all, wide } => {
            cmd::memory::list(ctx, dir, category, (all, wide), json).await
        }
        MemoryCommand::Remove { category, text, branch } => {
            cmd::memory::remove(ctx, dir, category, text, branch, json).await
        }
        MemoryCommand::Rm { id, category, key } => cmd::memory::rm(ctx, dir, id, category, key, json).await,
        MemoryCommand::Set { category, items, branch } => {
            cmd::memory::set(ctx, dir, category, items, branch, json).await
        }
        MemoryCommand::Caps { category, cap } => cmd::memory::caps(ctx, dir, category, cap, json).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// Every argument and option of every command says what it is, and the global options
    /// are listed apart from a command's own.
    #[test]
    fn every_argument_has_a_description() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.get_help().is_none() && !matches!(id, "help" | "version") {
                    missing.push(format!("{path} {id}"));
                }
                if arg.is_global_set() && arg.get_help_heading() != Some("Global options") {
                    missing.push(format!("{path} {id}: not under Global options"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "baton", &mut missing);
        assert!(missing.is_empty(), "{missing:?}");
    }

    /// `baton --help` names every tool `baton mcp` serves.
    #[test]
    fn help_lists_the_mcp_tools() {
        let help = super::Cli::command().render_help().to_string();
        for tool in baton::mcp::TOOLS {
            assert!(help.contains(tool), "{tool} missing from: {help}");
        }
    }
}
