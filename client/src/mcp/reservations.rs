//! The reservation tools: `reserve`, `release`, `reservations`, for the conversation's own
//! session; and the renewal `baton mcp` keeps up between hooks, so that a turn without tool
//! calls does not lose them while the agent lives.

use std::fmt::Write as _;
use std::time::Duration;

use baton_proto::v1::{ListReservationsRequest, ReleaseRequest, RenewReservationsRequest, ReserveRequest};

use super::params;
use super::tools::{Answer, Call, Failure, clip, status_words};
use crate::agents::Agent;
use crate::ctx::Ctx;
use crate::hub::remote::{self, Timeouts};
use crate::outbox::write;
use crate::usecase::reservations::{blocked_text, holder_line, repo_path, status, target};

/// The conversation's session, or why there is none.
fn own_session(call: &Call<'_>) -> Result<String, Failure> {
    call.conversation().map(|c| c.record.baton_session_id).ok_or_else(|| {
        Failure::Tool(
            "This conversation has no Baton session yet (its hooks have not run here): reservations are held by \
             sessions. Run `baton init` for this agent, or use `baton reserve --session ID` in the shell."
                .into(),
        )
    })
}

fn paths(call: &Call<'_>, given: &[String]) -> Result<Vec<String>, Failure> {
    given
        .iter()
        .map(|p| {
            repo_path(&call.project.root, &call.dir, p).map_err(|e| Failure::Arguments(format!("{e:#}")))
        })
        .collect()
}

pub async fn reserve(call: &Call<'_>, p: params::Reserve) -> Answer {
    let paths = paths(call, &p.paths)?;
    if paths.is_empty() && p.tasks.is_empty() {
        return Err(Failure::Arguments("name at least one path or task to reserve".into()));
    }
    let wait_seconds = p.wait_seconds.unwrap_or(0);
    if wait_seconds > 600 {
        return Err(Failure::Arguments(format!("wait_seconds must be 0 to 600, not {wait_seconds}")));
    }
    let session_id = own_session(call)?;
    let timeouts =
        Timeouts { request: Some(Duration::from_secs(u64::from(wait_seconds) + 15)), ..Timeouts::MCP };
    let Ok(mut hub) = remote::connect(&call.ctx.settings, timeouts).await else {
        return Err(Failure::Tool(
            "The Baton hub cannot be reached: nothing was reserved. Try again later.".into(),
        ));
    };
    let (reason, _) = baton_proto::redact::redact(p.reason.as_deref().unwrap_or_default());
    let request = ReserveRequest {
        project: call.project.key.clone(),
        session_id: session_id.clone(),
        paths,
        tasks: p.tasks,
        reason: reason.into_owned(),
        wait_seconds,
        write: write::options(0, &session_id),
        ..Default::default()
    };
    let reply =
        hub.reservations.reserve(request).await.map_err(|s| Failure::Tool(status_words(&s)))?.into_inner();
    if !reply.granted {
        return Err(Failure::Tool(format!(
            "Not reserved; nothing was taken:\n{}\nWait for it (call reserve again with wait_seconds), ask its holder, \
             or work on something else.",
            blocked_text(&reply.blockers)
        )));
    }
    let what: Vec<String> = reply.reservations.iter().map(target).collect();
    Ok(format!(
        "Reserved for this session: {}. Other sessions' hooks now warn about (or refuse) edits of them. They stay \
         yours while this agent runs; release them when you are done.",
        crate::text::series(&what, "and")
    ))
}

pub async fn release(call: &Call<'_>, p: params::Release) -> Answer {
    let paths = paths(call, &p.paths)?;
    if paths.is_empty() && p.tasks.is_empty() && !p.all {
        return Err(Failure::Arguments("name paths or tasks to release, or set all".into()));
    }
    let session_id = own_session(call)?;
    let Some(mut hub) = call.hub().await else {
        return Err(Failure::Tool(
            "The Baton hub cannot be reached: nothing was released. Try again later.".into(),
        ));
    };
    let request = ReleaseRequest {
        project: call.project.key.clone(),
        session_id: session_id.clone(),
        ids: Vec::new(),
        paths,
        tasks: p.tasks,
        write: write::options(0, &session_id),
    };
    let reply =
        hub.reservations.release(request).await.map_err(|s| Failure::Tool(status_words(&s)))?.into_inner();
    if reply.released.is_empty() {
        return Ok("This session held none of these: nothing to release.".into());
    }
    let what: Vec<String> = reply.released.iter().map(target).collect();
    Ok(format!("Released {}.", crate::text::series(&what, "and")))
}

pub async fn reservations(call: &Call<'_>, p: params::Reservations) -> Answer {
    let paths = paths(call, &p.paths)?;
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let request = ListReservationsRequest {
        project: call.project.key.clone(),
        paths,
        page_size: 200,
        ..Default::default()
    };
    let reply = hub
        .reservations
        .list_reservations(request)
        .await
        .map_err(|s| Failure::Tool(status_words(&s)))?
        .into_inner();
    if reply.reservations.is_empty() {
        return Ok(format!(
            "No reservations in project {}: nobody holds or waits for anything.",
            call.project.key
        ));
    }
    let own = call.conversation().map(|c| c.record.baton_session_id).unwrap_or_default();
    let mut out = format!("Reservations in project {} (held first, then the queue):\n", call.project.key);
    for r in &reply.reservations {
        let mine = if r.session_id == own { " (this session)" } else { "" };
        let _ = writeln!(out, "- {} {}{mine}: {}", target(r), status(r.status), holder_line(r));
    }
    if !reply.next_page_token.is_empty() {
        out.push_str("… more: ask for fewer with paths\n");
    }
    Ok(clip(&out))
}

/// Renews the conversation's reservations while `baton mcp` runs: every third of the
/// project's time to live (at most every 30 s), for the conversation found by this process's
/// parent (the agent), in the project of `dir`. Ends with the process.
pub async fn keep_renewing(
    ctx: std::sync::Arc<Ctx>,
    agent: Option<Agent>,
    dir: impl Fn() -> std::path::PathBuf + Send + 'static,
) {
    let mut every = Duration::from_secs(30);
    loop {
        // Every pass ends in the sleep: nothing to renew (no conversation yet, the hub down)
        // waits as long as a renewal does.
        let project = crate::project::identify(&dir());
        let conversation = crate::usecase::workspace::conversation(&ctx, agent, &project.key);
        let hub = match conversation {
            Some(_) => remote::connect(&ctx.settings, Timeouts::MCP).await.ok(),
            None => None,
        };
        let (Some(conversation), Some(mut hub)) = (conversation, hub) else {
            tokio::time::sleep(every).await;
            continue;
        };
        let request = RenewReservationsRequest {
            project: project.key.clone(),
            session_id: conversation.record.baton_session_id.clone(),
            known_ids: Vec::new(),
        };
        if let Ok(reply) = hub.reservations.renew_reservations(request).await
            && let Some(s) = reply.into_inner().settings
        {
            every = Duration::from_secs(u64::from(s.ttl_seconds / 3).clamp(1, 30));
        }
        tokio::time::sleep(every).await;
    }
}
