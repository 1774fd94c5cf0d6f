//! Sessions as people name them: a status or agent by its word, a session by its short id.

use baton_proto::v1::{AgentKind, ListSessionsRequest, SessionStatus};

use crate::hub::remote;

pub fn parse_status(s: &str) -> anyhow::Result<SessionStatus> {
    SessionStatus::from_str_name(&format!("SESSION_STATUS_{}", s.to_ascii_uppercase()))
        .filter(|s| *s != SessionStatus::Unspecified)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown status {s:?}: use initializing, active, idle, completed, crashed or resumed"
            )
        })
}

pub fn parse_agent(s: &str) -> anyhow::Result<AgentKind> {
    Ok(match s {
        "claude" | "claude-code" => AgentKind::ClaudeCode,
        "codex" => AgentKind::Codex,
        "gemini" => AgentKind::Gemini,
        "cursor" => AgentKind::Cursor,
        "custom" => AgentKind::Custom,
        other => anyhow::bail!("unknown agent {other:?}: use claude, codex, gemini, cursor or custom"),
    })
}

/// Finds a session by full id or by the short id shown in tables.
pub async fn resolve(hub: &mut remote::Hub, project: &str, id: &str) -> anyhow::Result<String> {
    if uuid::Uuid::parse_str(id).is_ok() {
        return Ok(id.to_owned());
    }
    let request = ListSessionsRequest { project: project.to_owned(), ..Default::default() };
    let (sessions, _) = crate::hub::pages::sessions(hub, request, usize::MAX).await?;
    let matches: Vec<_> = sessions.iter().filter(|s| s.id.ends_with(id) || s.id.starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => anyhow::bail!("no session matching {id:?} in project {project}"),
        _ => anyhow::bail!("{id:?} matches {} sessions; give more of the id", matches.len()),
    }
}
