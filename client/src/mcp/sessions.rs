//! The session tools: `sessions` (the project's, newest first) and `session` (one, with its
//! head checkpoint's state).

use std::fmt::Write as _;

use baton_proto::v1::{
    CheckpointState, GetCheckpointRequest, GetSessionRequest, ListSessionsRequest, Session as SessionMsg,
};

use super::params;
use super::tools::{Answer, Call, Failure, clip, status_words};
use crate::hub::remote::Hub;
use crate::view;

fn parse_status(s: &str) -> Result<i32, Failure> {
    crate::usecase::sessions::parse_status(s.trim())
        .map(|s| s as i32)
        .map_err(|e| Failure::Arguments(e.to_string()))
}

/// How many sessions' last tasks `sessions` reads (one request each).
const TASKS_OF: usize = 10;

pub async fn sessions(call: &Call<'_>, p: params::Sessions) -> Answer {
    let statuses = p.status.iter().map(|s| parse_status(s)).collect::<Result<Vec<_>, _>>()?;
    let limit = match p.limit {
        Some(l) if !(1..=50).contains(&l) => {
            return Err(Failure::Arguments(format!("limit must be 1 to 50, not {l}")));
        }
        Some(l) => l as usize,
        None => 10,
    };
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let request = ListSessionsRequest { project: call.project.key.clone(), statuses, ..Default::default() };
    let (list, _) = crate::hub::pages::sessions(&mut hub, request, limit).await?;
    if list.is_empty() {
        return Ok(format!("Project {} has no such sessions.", call.project.key));
    }
    let own = call.conversation().map(|c| c.record.baton_session_id);
    let mut out = format!("Sessions of project {}, newest first:\n", call.project.key);
    for (i, s) in list.iter().enumerate() {
        out.push_str(&session_line(s, own.as_deref() == Some(s.id.as_str())));
        if i < TASKS_OF
            && let Some(state) = head_state(&mut hub, s).await
        {
            for t in state.active_tasks.iter().filter(|t| t.status != "completed").take(5) {
                let _ = writeln!(out, "    task ({}): {}", t.status, t.content);
            }
        }
    }
    Ok(clip(&out))
}

fn session_line(s: &SessionMsg, own: bool) -> String {
    let mut line = format!(
        "- {} {} {} on {} ({}), last seen {}, {} tool calls",
        view::short(&s.id),
        view::status(s.status),
        view::agent(s.agent),
        s.host,
        if s.branch.is_empty() { "no branch" } else { &s.branch },
        view::age(s.last_seen_at.as_ref()),
        s.tool_count
    );
    if own {
        line.push_str(" — this session");
    }
    if !s.goal.is_empty() {
        let _ = write!(line, "\n    goal: {}", crate::text::clip(&s.goal, 200));
    }
    if !s.summary.is_empty() {
        let _ = write!(line, "\n    summary: {}", crate::text::clip(&s.summary, 400));
    }
    line.push('\n');
    line
}

async fn head_state(hub: &mut Hub, s: &SessionMsg) -> Option<CheckpointState> {
    if s.head_checkpoint_id.is_empty() {
        return None;
    }
    let reply = hub
        .checkpoints
        .get_checkpoint(GetCheckpointRequest {
            checkpoint_id: s.head_checkpoint_id.clone(),
            include_payload: false,
        })
        .await
        .ok()?;
    reply.into_inner().checkpoint?.state
}

pub async fn session(call: &Call<'_>, p: params::Session) -> Answer {
    let id = p.id.trim();
    if id.len() < 8 {
        return Err(Failure::Arguments(format!(
            "{id:?} is too short: give the id sessions shows (8+ characters)"
        )));
    }
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let full = match crate::usecase::sessions::resolve(&mut hub, &call.project.key, id).await {
        Ok(full) => full,
        Err(e) => return Err(Failure::Tool(format!("{e:#}"))),
    };
    let s = match hub.sessions.get_session(GetSessionRequest { session_id: full }).await {
        Ok(r) => r.into_inner().session.unwrap_or_default(),
        Err(status) => return Err(Failure::Tool(status_words(&status))),
    };
    let own = call.conversation().is_some_and(|c| c.record.baton_session_id == s.id);
    let mut out = session_line(&s, own);
    let _ = writeln!(out, "    id {}, by {}@{} in {}", s.id, s.user, s.host, s.cwd);
    if !s.resumed_from.is_empty() {
        let _ = writeln!(out, "    resumed from {}", s.resumed_from);
    }
    match head_state(&mut hub, &s).await {
        Some(state) => out.push_str(&state_words(&state)),
        None => out.push_str("    no checkpoint yet\n"),
    }
    Ok(clip(&out))
}

/// A checkpoint's state, section by section, empty ones left out.
fn state_words(st: &CheckpointState) -> String {
    let mut out = String::from("Where it stands (its last checkpoint):\n");
    let list = |out: &mut String, title: &str, items: &[String]| {
        if !items.is_empty() {
            let _ = writeln!(out, "{title}:");
            for i in items.iter().take(30) {
                let _ = writeln!(out, "  - {i}");
            }
        }
    };
    let tasks: Vec<String> =
        st.active_tasks.iter().map(|t| format!("({}) {}", t.status, t.content)).collect();
    list(&mut out, "Tasks", &tasks);
    let decisions: Vec<String> = st
        .decisions
        .iter()
        .map(|d| {
            if d.rationale.is_empty() {
                d.decision.clone()
            } else {
                format!("{} (why: {})", d.decision, d.rationale)
            }
        })
        .collect();
    list(&mut out, "Decisions", &decisions);
    list(&mut out, "Open questions", &st.open_questions);
    list(&mut out, "Blockers", &st.blockers);
    list(&mut out, "Files created", &st.files_created);
    list(&mut out, "Files modified", &st.files_modified);
    list(&mut out, "Files deleted", &st.files_deleted);
    list(&mut out, "Errors", &st.errors);
    if !st.last_prompt.is_empty() {
        let _ = writeln!(out, "Last prompt: {}", crate::text::clip(&st.last_prompt, 600));
    }
    if !st.last_answer.is_empty() {
        let _ = writeln!(out, "Last answer: {}", crate::text::clip(&st.last_answer, 600));
    }
    out
}
