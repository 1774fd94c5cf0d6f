//! `baton checkpoints` (a session's tree) and `baton checkpoint` (a manual one).

use std::path::Path;

use baton_proto::v1::{CheckpointKind, CreateCheckpointRequest, ListSessionsRequest, SessionStatus};

use crate::hub::remote::{self, Hub, Timeouts};
use crate::outbox::write::{self, Delivered, Write};
use crate::usecase::sessions::resolve;
use crate::{ctx::Ctx, project, project::git, view};

/// The session meant when none is named: the newest active one on this host, else the
/// project's newest.
pub(crate) async fn current_session(
    hub: &mut Hub,
    project: &str,
    active_only: bool,
) -> anyhow::Result<String> {
    let host = write::hostname();
    let list = |statuses: Vec<i32>, host: String| ListSessionsRequest {
        project: project.to_owned(),
        statuses,
        host,
        page_size: 1,
        ..Default::default()
    };
    let active = vec![SessionStatus::Active as i32, SessionStatus::Idle as i32];
    for request in [list(active.clone(), host), list(active, String::new()), list(vec![], String::new())] {
        if active_only && request.statuses.is_empty() {
            break;
        }
        let reply = hub.sessions.list_sessions(request).await.map_err(remote::fail)?.into_inner();
        if let Some(s) = reply.sessions.first() {
            return Ok(s.id.clone());
        }
    }
    anyhow::bail!(
        "no {}session in project {project}; pass --session ID",
        if active_only { "active " } else { "" }
    )
}

pub async fn list(
    ctx: &Ctx,
    dir: &Path,
    session: Option<&str>,
    tree: bool,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let id = match session {
        Some(s) => resolve(&mut hub, &project.key, s).await?,
        None => current_session(&mut hub, &project.key, false).await?,
    };
    let (checkpoints, head) = crate::hub::pages::checkpoints(&mut hub, &id, json).await?;
    if json {
        let cps: Vec<_> = checkpoints.iter().map(view::checkpoint_json).collect();
        println!("{}", serde_json::json!({"session_id": id, "head": head, "checkpoints": cps}));
        return Ok(());
    }
    if tree {
        println!("session {id}");
        for c in &checkpoints {
            let indent = "  ".repeat(usize::try_from(c.depth).unwrap_or(0) + 1);
            let head = if c.id == head { " ← head" } else { "" };
            let corrupt = if c.corrupt { " [CORRUPT]" } else { "" };
            println!(
                "{indent}{} {} {} {}{corrupt}{head}",
                view::short(&c.id),
                view::kind(c.kind),
                view::age(c.created_at.as_ref()),
                crate::safe::line(&c.reason)
            );
        }
        return Ok(());
    }
    let mut t = view::table(&["id", "kind", "created", "size", "parent", "reason"]);
    for c in &checkpoints {
        let mark = if c.id == head { "*" } else { "" };
        t.add_row(vec![
            format!("{}{mark}", view::short(&c.id)),
            view::kind(c.kind) + if c.corrupt { " (corrupt)" } else { "" },
            view::age(c.created_at.as_ref()),
            c.size_bytes.to_string(),
            view::short(&c.parent_id).to_owned(),
            crate::text::clip(&c.reason, 60),
        ]);
    }
    let table = view::rows_or(&t, "no checkpoints yet");
    println!("{}", crate::safe::text(&format!("session {id} (* = head)\n{table}")));
    Ok(())
}

/// `baton checkpoint`: a manual checkpoint of a session. Of a live conversation of this
/// project on this machine (the one whose agent runs this command, else the only one), it
/// holds that conversation's state (tasks, files, last prompt) and is the agent's; queued
/// like every write when the hub is down.
pub async fn create(
    ctx: &Ctx,
    dir: &Path,
    session: Option<&str>,
    reason: &str,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await;
    let conversation = crate::usecase::workspace::conversation(ctx, None, &project.key);
    let id = match (session, hub.as_mut()) {
        (Some(s), Ok(h)) => resolve(h, &project.key, s).await?,
        (Some(s), Err(down)) => offline_session(ctx, &project.key, s, down)?,
        // A conversation's record outlives a killed agent: the hub says whether its session
        // still takes checkpoints.
        (None, Ok(h)) => match &conversation {
            Some(c) if still_open(h, &c.record.baton_session_id).await => c.record.baton_session_id.clone(),
            _ => current_session(h, &project.key, true).await?,
        },
        (None, Err(_)) if let Some(c) = &conversation => c.record.baton_session_id.clone(),
        (None, Err(down)) => anyhow::bail!(
            "{down}; with the hub down, name the session to checkpoint: --session ID (its full id)"
        ),
    };
    let conversation = conversation.filter(|c| c.record.baton_session_id == id);
    let (state, agent) = match &conversation {
        Some(c) => {
            let cwd = crate::usecase::workspace::conversation_cwd(c, dir);
            (
                crate::usecase::checkpoint::conversation_state(ctx, &c.record, None, &cwd, &project.root),
                c.agent.kind(),
            )
        }
        None => (
            baton_proto::v1::CheckpointState {
                git_head: git::head(dir).unwrap_or_default(),
                ..Default::default()
            },
            baton_proto::v1::AgentKind::Custom,
        ),
    };
    let (reason, n) = baton_proto::redact::redact(reason);
    let request = CreateCheckpointRequest {
        session_id: id.clone(),
        checkpoint_id: uuid::Uuid::now_v7().to_string(),
        kind: CheckpointKind::Manual as i32,
        reason: reason.into_owned(),
        state: Some(state),
        write: write::options(agent as i32, &id),
        ..Default::default()
    };
    let cp_id = request.checkpoint_id.clone();
    let write = Write::CreateCheckpoint(Box::new(request), project.key);
    let delivered = write::submit(&ctx.queue, hub.as_mut().ok(), write, None).await?;
    let revision = match &delivered {
        Delivered::Sent(r) => Some(r.result.revision),
        Delivered::Queued => None,
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"checkpoint_id": cp_id, "session_id": id, "revision": revision.unwrap_or(0),
                "queued": revision.is_none(), "redacted": n})
        );
        return Ok(());
    }
    match revision {
        Some(r) => println!("checkpoint {cp_id} of session {id} at revision {r}"),
        None => println!(
            "checkpoint {cp_id} of session {id}: the hub is unreachable, queued (sent by the next call or `baton sync`)"
        ),
    }
    if n > 0 {
        println!("redacted {} from the reason", crate::text::count(n, "secret", "secrets"));
    }
    Ok(())
}

/// Whether the hub has session `id` and it is not over (completed, crashed or resumed).
async fn still_open(hub: &mut Hub, id: &str) -> bool {
    let request = baton_proto::v1::GetSessionRequest { session_id: id.to_owned() };
    let Ok(reply) = hub.sessions.get_session(request).await else { return false };
    let status = reply.into_inner().session.map_or(SessionStatus::Unspecified, |s| s.status());
    !matches!(
        status,
        SessionStatus::Completed
            | SessionStatus::Crashed
            | SessionStatus::Resumed
            | SessionStatus::Unspecified
    )
}

/// The session `given` names with the hub down: a full id as it is, or a part of the id of
/// one conversation this machine recorded in the project.
fn offline_session(
    ctx: &Ctx,
    project: &str,
    given: &str,
    down: &remote::ConnectError,
) -> anyhow::Result<String> {
    if let Ok(id) = uuid::Uuid::parse_str(given) {
        return Ok(id.hyphenated().to_string());
    }
    let mut known: Vec<String> = ctx
        .state
        .recent(None, usize::MAX)
        .into_iter()
        .map(|(_, _, r)| r)
        .filter(|r| {
            r.project == project && !r.baton_session_id.is_empty() && r.baton_session_id.contains(given)
        })
        .map(|r| r.baton_session_id)
        .collect();
    known.sort();
    known.dedup();
    match known.as_slice() {
        [one] => Ok(one.clone()),
        _ => anyhow::bail!(
            "{down}; {given:?} is not a full session id nor part of exactly one this machine knows: give the full id"
        ),
    }
}

/// The checkpoint a full id or a unique part of one (the 8 characters tables show) names:
/// among `session`'s checkpoints when one is given, else among the project's.
pub async fn resolve_checkpoint(
    hub: &mut Hub,
    project: &str,
    session: Option<&str>,
    given: &str,
) -> anyhow::Result<String> {
    if let Ok(id) = uuid::Uuid::parse_str(given) {
        return Ok(id.hyphenated().to_string());
    }
    let part = given.trim().to_ascii_lowercase();
    if part.len() < 4 || !part.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        anyhow::bail!(
            "{given:?} is not a checkpoint id: give the id `baton checkpoints` shows (at least 4 of its characters)"
        );
    }
    let sessions = if let Some(s) = session {
        vec![resolve(hub, project, s).await?]
    } else {
        let request = ListSessionsRequest { project: project.to_owned(), ..Default::default() };
        let (sessions, _) = crate::hub::pages::sessions(hub, request, usize::MAX).await?;
        sessions.into_iter().map(|s| s.id).collect()
    };
    let mut found = Vec::new();
    for id in sessions {
        let (checkpoints, _) = crate::hub::pages::checkpoints(hub, &id, false).await?;
        found.extend(checkpoints.into_iter().filter(|c| c.id.contains(part.as_str())).map(|c| c.id));
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!(
            "no checkpoint matching {given:?} in project {project} (`baton checkpoints` lists them)"
        ),
        many => anyhow::bail!(
            "{given:?} matches {} checkpoints ({}); give more of the id",
            many.len(),
            many.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        ),
    }
}
