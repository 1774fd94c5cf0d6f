//! `baton sessions` and `baton session ID`.

use std::path::Path;

use baton_proto::v1::{AgentKind, GetSessionRequest, ListSessionsRequest, SessionStatus};

use crate::remote::{self, Timeouts};
use crate::{Ctx, project, view};

pub struct Filters {
    pub status: Vec<String>,
    pub agent: Option<String>,
    pub host: Option<String>,
    pub limit: u32,
}

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

pub async fn list(ctx: &Ctx, dir: &Path, f: Filters, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let statuses =
        f.status.iter().map(|s| parse_status(s).map(|s| s as i32)).collect::<anyhow::Result<Vec<_>>>()?;
    let agent = f.agent.as_deref().map(parse_agent).transpose()?.map_or(0, |a| a as i32);
    let request = ListSessionsRequest {
        project: project.key.clone(),
        statuses,
        agent,
        host: f.host.unwrap_or_default(),
        ..Default::default()
    };
    let (sessions, as_of_revision) =
        crate::pages::sessions(&mut hub, request, usize::try_from(f.limit).unwrap_or(usize::MAX)).await?;
    if json {
        let sessions: Vec<_> = sessions.iter().map(view::session_json).collect();
        println!(
            "{}",
            serde_json::json!({"project": project.key, "as_of_revision": as_of_revision, "sessions": sessions})
        );
        return Ok(());
    }
    let mut t = view::table(&["id", "status", "agent", "host", "branch", "last seen", "tools", "goal"]);
    for s in &sessions {
        t.add_row(vec![
            view::short(&s.id).to_owned(),
            view::status(s.status),
            view::agent(s.agent).to_owned(),
            s.host.clone(),
            s.branch.clone(),
            view::age(s.last_seen_at.as_ref()),
            s.tool_count.to_string(),
            crate::clip(&s.goal, 50),
        ]);
    }
    println!(
        "{}",
        crate::safe::text(&format!(
            "{}  ({}, revision {})\n{}",
            project.key,
            crate::count(sessions.len(), "session", "sessions"),
            as_of_revision,
            view::rows_or(&t, "none")
        ))
    );
    Ok(())
}

/// Finds a session by full id or by the short id shown in tables.
pub async fn resolve(hub: &mut remote::Hub, project: &str, id: &str) -> anyhow::Result<String> {
    if uuid::Uuid::parse_str(id).is_ok() {
        return Ok(id.to_owned());
    }
    let request = ListSessionsRequest { project: project.to_owned(), ..Default::default() };
    let (sessions, _) = crate::pages::sessions(hub, request, usize::MAX).await?;
    let matches: Vec<_> = sessions.iter().filter(|s| s.id.ends_with(id) || s.id.starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => anyhow::bail!("no session matching {id:?} in project {project}"),
        _ => anyhow::bail!("{id:?} matches {} sessions; give more of the id", matches.len()),
    }
}

pub async fn show(ctx: &Ctx, dir: &Path, id: &str, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let id = resolve(&mut hub, &project.key, id).await?;
    let reply = hub
        .sessions
        .get_session(GetSessionRequest { session_id: id })
        .await
        .map_err(remote::fail)?
        .into_inner();
    let s = reply.session.unwrap_or_default();
    if json {
        println!("{}", view::session_json(&s));
        return Ok(());
    }
    let joined = |parts: &[&str], sep: &str| {
        parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(sep)
    };
    let git = match (s.git_base.as_str(), s.git_head.as_str()) {
        ("", "") => String::new(),
        (base, head) if base == head || head.is_empty() => base.to_owned(),
        (base, head) => format!("{} → {head}", if base.is_empty() { "?" } else { base }),
    };
    let rows = [
        ("id", s.id.clone()),
        ("project", s.project.clone()),
        ("status", view::status(s.status)),
        ("agent", joined(&[view::agent(s.agent), &s.agent_session_id], " ")),
        ("where", joined(&[&joined(&[&s.user, &s.host], "@"), &s.cwd], " ")),
        ("branch", s.branch.clone()),
        ("goal", s.goal.clone()),
        ("summary", s.summary.clone()),
        ("last seen", view::age(s.last_seen_at.as_ref())),
        ("tools", s.tool_count.to_string()),
        ("git", git),
        ("head checkpoint", s.head_checkpoint_id.clone()),
        ("resumed from", s.resumed_from.clone()),
        ("resumed by", s.resumed_by.clone()),
        ("revision", s.revision.to_string()),
    ];
    // Empty fields say nothing: they are left out.
    for (k, v) in rows.into_iter().filter(|(_, v)| !v.trim().is_empty()) {
        println!("{k:>15}  {}", crate::safe::line(&v));
    }
    Ok(())
}
