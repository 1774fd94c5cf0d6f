//! `baton sessions` and `baton session ID`.

use std::path::Path;

use baton_proto::v1::{GetSessionRequest, ListSessionsRequest};

use crate::hub::remote::{self, Timeouts};
use crate::usecase::sessions::{parse_agent, parse_status, resolve};
use crate::{ctx::Ctx, project, view};

pub struct Filters {
    pub status: Vec<String>,
    pub agent: Option<String>,
    pub host: Option<String>,
    pub user: Option<String>,
    pub branch: Option<String>,
    pub limit: u32,
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
        user: f.user.unwrap_or_default(),
        branch: f.branch.unwrap_or_default(),
        ..Default::default()
    };
    let (sessions, as_of_revision) =
        crate::hub::pages::sessions(&mut hub, request, usize::try_from(f.limit).unwrap_or(usize::MAX))
            .await?;
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
            crate::text::clip(&s.goal, 50),
        ]);
    }
    println!(
        "{}",
        crate::safe::text(&format!(
            "{}  ({}, revision {})\n{}",
            project.key,
            crate::text::count(sessions.len(), "session", "sessions"),
            as_of_revision,
            view::rows_or(&t, "none")
        ))
    );
    Ok(())
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
