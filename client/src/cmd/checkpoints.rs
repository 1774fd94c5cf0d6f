//! `baton checkpoints` (a session's tree) and `baton checkpoint` (a manual one).

use std::path::Path;

use baton_proto::v1::{CheckpointKind, CreateCheckpointRequest, ListSessionsRequest, SessionStatus};

use crate::cmd::sessions::resolve;
use crate::remote::{self, Hub, Timeouts};
use crate::write::{self, Delivered, Write};
use crate::{Ctx, git, project, view};

/// The session meant when none is named: the newest active one on this host, else the
/// project's newest.
async fn current_session(hub: &mut Hub, project: &str, active_only: bool) -> anyhow::Result<String> {
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
    let (checkpoints, head) = crate::pages::checkpoints(&mut hub, &id, json).await?;
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
            crate::clip(&c.reason, 60),
        ]);
    }
    println!("{}", crate::safe::text(&format!("session {id} (* = head)\n{t}")));
    Ok(())
}

pub async fn create(
    ctx: &Ctx,
    dir: &Path,
    session: Option<&str>,
    reason: &str,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let id = match session {
        Some(s) => resolve(&mut hub, &project.key, s).await?,
        None => current_session(&mut hub, &project.key, true).await?,
    };
    let state = baton_proto::v1::CheckpointState {
        git_head: git::head(dir).unwrap_or_default(),
        ..Default::default()
    };
    let (reason, n) = baton_proto::redact::redact(reason);
    let request = CreateCheckpointRequest {
        session_id: id.clone(),
        checkpoint_id: uuid::Uuid::now_v7().to_string(),
        kind: CheckpointKind::Manual as i32,
        reason: reason.into_owned(),
        state: Some(state),
        write: write::options(baton_proto::v1::AgentKind::Custom as i32, &id),
        ..Default::default()
    };
    let cp_id = request.checkpoint_id.clone();
    let delivered = write::submit(
        &ctx.queue,
        Some(&mut hub),
        Write::CreateCheckpoint(Box::new(request), project.key),
        None,
    )
    .await?;
    let revision = match &delivered {
        Delivered::Sent(r) => r.revision,
        Delivered::Queued => 0,
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"checkpoint_id": cp_id, "session_id": id, "revision": revision, "redacted": n})
        );
    } else {
        println!("checkpoint {cp_id} of session {id} at revision {revision}");
        if n > 0 {
            println!("redacted {n} secret(s) from the reason");
        }
    }
    Ok(())
}
