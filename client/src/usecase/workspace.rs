//! Where the agent works, and which of its conversations this server serves.
//!
//! An MCP server registered for the user starts wherever the agent chooses, so the project
//! comes from the MCP client's roots where it gives them, else the agent's project-directory
//! variable, else the working directory; a subdirectory is still the repository's project
//! (`project::identify`). The conversation is the one whose hooks ran under the same agent
//! process as this server (`host::pids`), so that a checkpoint lands on its own session.

use std::path::{Path, PathBuf};

use crate::agents::Agent;
use crate::ctx::Ctx;
use crate::local::state::AgentSession;

/// The agents' project-directory variables, in the order they are tried.
const PROJECT_VARS: [&str; 3] = ["CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CURSOR_PROJECT_DIR"];

/// A local directory from a `file://` root URI (percent-decoded); other schemes are not
/// directories here.
pub fn root_dir(uri: &str) -> Option<PathBuf> {
    let path = uri.strip_prefix("file://")?;
    // `file://localhost/…` and `file:///…` both name a local path.
    let path = path.strip_prefix("localhost").unwrap_or(path);
    let decoded = percent_encoding::percent_decode_str(path).decode_utf8().ok()?;
    let dir = PathBuf::from(decoded.as_ref());
    (dir.is_absolute() && dir.is_dir()).then_some(dir)
}

/// The directory to work in when the client gave no roots.
pub fn fallback_dir() -> PathBuf {
    PROJECT_VARS
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .find(|d| d.is_absolute() && d.is_dir())
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A conversation of this machine: its record, and which agent it is.
pub struct Conversation {
    pub agent: Agent,
    pub record: AgentSession,
}

/// How many of the newest conversation records are looked at.
const RECENT: usize = 200;

/// The conversation this server serves in `project`: the newest live one whose hooks ran
/// under this server's parent process (the agent), else its grandparent; else the only
/// live one of the project, when there is exactly one. `None` when it cannot be told.
pub fn conversation(ctx: &Ctx, agent: Option<Agent>, project: &str) -> Option<Conversation> {
    let live: Vec<(Agent, AgentSession)> = ctx
        .state
        .recent(agent.map(|a| a.name()), RECENT)
        .into_iter()
        .filter(|(_, _, r)| !r.ended && r.project == project && !r.baton_session_id.is_empty())
        .filter_map(|(name, _, r)| Some((Agent::from_name(&name)?, r)))
        .collect();
    let mine = crate::host::pids();
    for pid in mine.iter().take(2) {
        if let Some((agent, record)) = live.iter().find(|(_, r)| r.agent_pids.contains(pid)) {
            return Some(Conversation { agent: *agent, record: record.clone() });
        }
    }
    match live.as_slice() {
        [(agent, record)] => Some(Conversation { agent: *agent, record: record.clone() }),
        _ => None,
    }
}

/// The cwd a conversation's paths are relative to.
pub fn conversation_cwd(c: &Conversation, fallback: &Path) -> PathBuf {
    Some(PathBuf::from(&c.record.cwd)).filter(|p| p.is_dir()).unwrap_or_else(|| fallback.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_local_directories() {
        let dir = tempfile::tempdir().unwrap();
        let spaced = dir.path().join("my repo");
        std::fs::create_dir(&spaced).unwrap();
        let uri = format!("file://{}", spaced.display()).replace(' ', "%20");
        assert_eq!(root_dir(&uri), Some(spaced.clone()));
        assert_eq!(
            root_dir(&format!("file://localhost{}", spaced.display()).replace(' ', "%20")),
            Some(spaced)
        );
        assert_eq!(root_dir("https://example.com/x"), None);
        assert_eq!(root_dir("file://relative/path"), None);
        assert_eq!(root_dir(&format!("file://{}/missing", dir.path().display())), None);
    }
}
