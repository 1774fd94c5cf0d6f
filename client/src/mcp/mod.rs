//! `baton mcp`: a Model Context Protocol server over stdio, so the agent itself can read
//! and write Baton's memory mid-session (a brief at SessionStart fades as a session goes on
//! and is compacted away). Built on the official Rust SDK (`rmcp`).

mod memory;
mod params;
mod reservations;
mod search;
mod sessions;
mod tools;
mod why;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::{NotificationContext, RoleServer};
use rmcp::{ErrorData, Peer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use tokio::sync::Mutex;

use self::tools::{Answer, Call, Failure};
use crate::agents::Agent;
use crate::ctx::Ctx;
use crate::usecase::workspace;

use crate::agents::mcp::NAME;

/// The tools `baton mcp` serves (`baton --help` names them; a test holds this list to the
/// server's).
pub const TOOLS: [&str; 13] = [
    "brief",
    "remember",
    "forget",
    "recall",
    "search",
    "sessions",
    "session",
    "checkpoint",
    "conflicts",
    "reserve",
    "release",
    "reservations",
    "why",
];

/// The tools as the server lists them to a client: name, schema and annotations.
pub fn tool_list() -> Vec<rmcp::model::Tool> {
    Server::tool_router().list_all()
}

#[derive(Clone)]
pub struct Server {
    ctx: Arc<Ctx>,
    agent: Option<Agent>,
    /// The workspace from the client's roots, asked once (and again when they change).
    dir: Arc<Mutex<Option<PathBuf>>>,
    #[allow(dead_code, reason = "read by the tool_handler macro")]
    tool_router: ToolRouter<Self>,
}

/// Serves MCP on stdin/stdout until the client closes it.
pub async fn serve(ctx: Ctx, agent: Option<Agent>) -> anyhow::Result<()> {
    if std::env::var_os(crate::agents::summary::RUNNING).is_some() {
        anyhow::bail!("not served to Baton's own summarizer run");
    }
    let server = Server {
        ctx: Arc::new(ctx),
        agent,
        dir: Arc::new(Mutex::new(None)),
        tool_router: Server::tool_router(),
    };
    // Renewals between hooks: reservations live as long as the agent (and this server, its
    // child) does.
    let dir = server.dir.clone();
    let renewing = tokio::spawn(reservations::keep_renewing(server.ctx.clone(), agent, move || {
        dir.try_lock().ok().and_then(|d| d.clone()).unwrap_or_else(workspace::fallback_dir)
    }));
    // Stopped however serving ends (a client gone before it initialized is an error).
    let _stop = AbortOnDrop(renewing.abort_handle());
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Server {
    /// The directory the agent works in: the client's first local root, else the agent's
    /// project-directory variable, else the working directory. Roots are deprecated by the
    /// 2026 specification (SEP-2577) but still what clients send to say where they work.
    #[allow(deprecated)]
    async fn dir(&self, peer: &Peer<RoleServer>) -> PathBuf {
        let mut cached = self.dir.lock().await;
        if let Some(dir) = cached.as_ref() {
            return dir.clone();
        }
        let offers_roots = peer.peer_info().is_some_and(|i| i.capabilities.roots.is_some());
        let from_roots = if offers_roots {
            match tokio::time::timeout(std::time::Duration::from_secs(2), peer.list_roots()).await {
                Ok(Ok(list)) => list.roots.iter().find_map(|r| workspace::root_dir(&r.uri)),
                _ => None,
            }
        } else {
            None
        };
        let dir = from_roots.unwrap_or_else(workspace::fallback_dir);
        *cached = Some(dir.clone());
        dir
    }

    async fn call<'a>(&'a self, peer: &Peer<RoleServer>) -> Call<'a> {
        let dir = self.dir(peer).await;
        let project = crate::project::identify(&dir);
        Call { ctx: &self.ctx, agent: self.agent, dir, project }
    }
}

/// A tool's answer. Bad arguments are tool errors the model reads, as the specification
/// asks of input validation (so the model can correct the call) and as `rmcp` answers
/// arguments that do not match the schema; an unknown tool is a protocol error.
fn answer(result: Answer) -> CallToolResult {
    let (text, ok) = match result {
        Ok(text) => (text, true),
        Err(Failure::Tool(text)) => (text, false),
        Err(Failure::Arguments(text)) => (format!("Invalid arguments: {text}"), false),
    };
    let content = vec![ContentBlock::text(crate::safe::text(&text))];
    if ok { CallToolResult::success(content) } else { CallToolResult::error(content) }
}

#[tool_router]
impl Server {
    #[tool(
        description = "The project's current brief from Baton: its goal, constraints, open loops, recent decisions, what other sessions are doing and where the last session stopped. Read it again after a compaction or when you lose track.",
        annotations(read_only_hint = true)
    )]
    async fn brief(
        &self,
        Parameters(p): Parameters<params::Brief>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(tools::brief(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Save something every later session of this project should know: a goal, a constraint, an open loop, a decision (give the rationale) or a note (give a key). Goals, constraints and open loops are shared lists; adding never removes what others added.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn remember(
        &self,
        Parameters(p): Parameters<params::Remember>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(memory::remember(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Remove a memory entry that is wrong or done, by the id recall shows.",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn forget(
        &self,
        Parameters(p): Parameters<params::Forget>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(memory::forget(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "The project's memory entries (all, or one category), with their ids, authors and revisions.",
        annotations(read_only_hint = true)
    )]
    async fn recall(
        &self,
        Parameters(p): Parameters<params::Recall>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(memory::recall(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Search everything the project remembers: memory entries (evicted ones too), checkpoints' state (tasks, decisions and why, open questions, blockers, errors, files, the last prompt and answer) and sessions' goals and summaries. Words must all match; \"quoted phrases\" side by side; -word excludes; a OR b for either. Use it to answer what was decided, which session touched a file, where an error came from.",
        annotations(read_only_hint = true)
    )]
    async fn search(
        &self,
        Parameters(p): Parameters<params::Search>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(search::search(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "The project's sessions, newest first: which agents work on it where, their status, goal and unfinished tasks.",
        annotations(read_only_hint = true)
    )]
    async fn sessions(
        &self,
        Parameters(p): Parameters<params::Sessions>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(sessions::sessions(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "One session in detail: where it ran, and its last checkpoint's tasks, decisions, open questions, files and errors.",
        annotations(read_only_hint = true)
    )]
    async fn session(
        &self,
        Parameters(p): Parameters<params::Session>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(sessions::session(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Save a checkpoint of this session now, with why, and your current tasks, decisions and open questions; the files changed and tool calls so far are added by Baton. Use it before risky steps and when a piece of work is done.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn checkpoint(
        &self,
        Parameters(p): Parameters<params::Checkpoint>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(tools::checkpoint(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Conflicts since this session started: writes to the same memory or session that overwrote another's, or were refused as stale. Check it when memory is not what you expect.",
        annotations(read_only_hint = true)
    )]
    async fn conflicts(
        &self,
        Parameters(p): Parameters<params::Conflicts>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(tools::conflicts(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Reserve files, directories or tasks for this session before working on them, so that other agents (on any machine) leave them alone: their hooks warn about or refuse edits of them, and they can wait in line. Refused, with the holder named, when another session holds one. Release them when done.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn reserve(
        &self,
        Parameters(p): Parameters<params::Reserve>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(reservations::reserve(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Release files, directories or tasks this session reserved (or all of them), so that others may work on them.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn release(
        &self,
        Parameters(p): Parameters<params::Release>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(reservations::release(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Who is working on what in this project: the files, directories and tasks other sessions (and this one) hold, who waits for them, since when and why. Check it before starting on shared code.",
        annotations(read_only_hint = true)
    )]
    async fn reservations(
        &self,
        Parameters(p): Parameters<params::Reservations>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(reservations::reservations(&self.call(&peer).await, p).await))
    }

    #[tool(
        description = "Why lines of a file are there, before you change them: the session that wrote them (agent, person, machine, when), the prompt and task it was working on and the decisions it recorded, found through rebases and squash merges. Lines no session wrote say so.",
        annotations(read_only_hint = true)
    )]
    async fn why(
        &self,
        Parameters(p): Parameters<params::Why>,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(why::why(&self.call(&peer).await, p).await))
    }
}

#[tool_handler]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Baton keeps this project's memory across sessions, machines and agents. Read `brief` when you start or lose track; `remember` decisions (with rationale), constraints, open loops and goals as they happen; `checkpoint` before risky steps.",
            )
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        *self.dir.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tool_list_is_the_servers() {
        let mut served: Vec<String> = super::tool_list().into_iter().map(|t| t.name.to_string()).collect();
        let mut listed: Vec<String> = super::TOOLS.iter().map(|t| (*t).to_owned()).collect();
        served.sort();
        listed.sort();
        assert_eq!(served, listed);
    }

    /// Each tool says whether it only reads or may destroy; numbers carry their bounds and
    /// fixed values their enums, as their descriptions state.
    #[test]
    fn tools_carry_hints_bounds_and_enums() {
        let tools = super::tool_list();
        for tool in &tools {
            let hints =
                tool.annotations.as_ref().unwrap_or_else(|| panic!("{} has no annotations", tool.name));
            let reads = hints.read_only_hint.unwrap_or_else(|| panic!("{}: no read-only hint", tool.name));
            assert!(reads || hints.destructive_hint.is_some(), "{}: no destructive hint", tool.name);
            assert_eq!(hints.destructive_hint == Some(true), tool.name == "forget", "{}", tool.name);
        }
        let schema = |name: &str| {
            let tool = tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name}"));
            serde_json::Value::Object((*tool.input_schema).clone())
        };
        let text = |v: &serde_json::Value| v.to_string();
        let brief = schema("brief");
        assert_eq!(
            (
                brief["properties"]["budget"]["minimum"].as_u64(),
                brief["properties"]["budget"]["maximum"].as_u64()
            ),
            (Some(500), Some(50_000)),
            "{brief}"
        );
        let sessions = schema("sessions");
        assert_eq!(sessions["properties"]["limit"]["maximum"].as_u64(), Some(50), "{sessions}");
        assert!(text(&sessions["properties"]["status"]["items"]).contains("\"crashed\""), "{sessions}");
        assert!(text(&schema("search")["properties"]["kinds"]["items"]).contains("\"checkpoint\""));
        assert!(text(&schema("recall")["properties"]["category"]).contains("\"open_loop\""));
        assert!(text(&schema("checkpoint")).contains("\"in_progress\""));
    }
}
