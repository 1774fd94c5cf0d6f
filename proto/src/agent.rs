//! What Baton knows about an agent's own conversation: which ids are safe to name a file or
//! go into a command, and the agent's command to continue a conversation. The server stores
//! only safe ids and the client uses none it has not checked, by this one rule.

use crate::v1::AgentKind;

/// An agent CLI the agent test suite runs (`tests/tests/agents`): its npm package and the
/// version it was last proven with. `baton doctor` warns about an installed version that is
/// not the one here.
#[derive(Debug, Clone, Copy)]
pub struct Covered {
    pub agent: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// The command the package installs.
    pub command: &'static str,
}

/// The pinned versions: one place for the test suite and `baton doctor`.
pub const COVERED: &[Covered] = &[
    Covered { agent: "claude", package: "@anthropic-ai/claude-code", version: "2.1.197", command: "claude" },
    Covered { agent: "codex", package: "@openai/codex", version: "0.169.0", command: "codex" },
    Covered { agent: "gemini", package: "@google/gemini-cli", version: "0.61.0", command: "gemini" },
];

/// What marks text a model wrote from a session's record (a session summary, its goal and
/// open loops, an extracted decision) wherever Baton shows it: a lead to check, not a fact
/// someone recorded, and written from a transcript anyone in the session could write into.
pub const MACHINE_WRITTEN: &str = "(machine-written) ";

/// The longest agent session id.
pub const MAX_SESSION_ID: usize = 128;

/// An agent's conversation id that is one plain name: up to `MAX_SESSION_ID` of
/// `A-Z a-z 0-9 . _ -`, starting with a letter or digit (so never empty, `.`, `..`, an
/// option, a path or a shell word that needs quoting).
pub fn is_safe_session_id(id: &str) -> bool {
    id.len() <= MAX_SESSION_ID
        && id.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The agent's own command to continue a conversation, as argv; `None` when the agent has
/// no known resume command or the id is not safe.
pub fn resume_argv(agent: i32, id: &str) -> Option<Vec<String>> {
    if !is_safe_session_id(id) {
        return None;
    }
    let program: &[&str] = match AgentKind::try_from(agent).unwrap_or_default() {
        AgentKind::ClaudeCode => &["claude", "--resume"],
        AgentKind::Codex => &["codex", "resume"],
        AgentKind::Gemini => &["gemini", "--resume"],
        // Cursor has no verified resume command (AGENT_HOOKS.md); custom agents have their own.
        AgentKind::Cursor | AgentKind::Custom | AgentKind::Unspecified => return None,
    };
    Some(program.iter().map(|s| (*s).to_owned()).chain([id.to_owned()]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ids_are_one_plain_name() {
        for good in ["0b1e2c3d-0000-7000-8000-000000000001", "agent-conv-1", "g_1.2"] {
            assert!(is_safe_session_id(good), "{good}");
        }
        let long = "a".repeat(MAX_SESSION_ID + 1);
        for bad in
            ["", "..", ".x", "-rf", "a/b", "a\\b", "a b", "é", "x; echo INJECTED-$(id -u) #", long.as_str()]
        {
            assert!(!is_safe_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn resume_commands_only_for_safe_ids() {
        let claude = AgentKind::ClaudeCode as i32;
        assert_eq!(
            resume_argv(claude, "abc-1"),
            Some(vec!["claude".into(), "--resume".into(), "abc-1".into()])
        );
        assert_eq!(
            resume_argv(AgentKind::Codex as i32, "x").map(|a| a.join(" ")),
            Some("codex resume x".into())
        );
        assert_eq!(resume_argv(claude, "x; rm -rf ~"), None);
        assert_eq!(resume_argv(AgentKind::Cursor as i32, "abc"), None);
    }
}
