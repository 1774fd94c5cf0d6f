//! How records are shown: tables for people, JSON for scripts.

use baton_proto::v1::{
    AgentKind, Checkpoint, CheckpointKind, Conflict, Event, EventKind, MemoryEntry, Session, SessionStatus,
    WriteOutcome,
};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use serde_json::{Value, json};

pub fn time(ts: Option<&prost_types::Timestamp>) -> String {
    ts.and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

pub fn age(ts: Option<&prost_types::Timestamp>) -> String {
    ts.map(|t| {
        crate::text::ago(crate::clock::now_us() - (t.seconds * 1_000_000 + i64::from(t.nanos) / 1000))
            + " ago"
    })
    .unwrap_or_default()
}

pub fn agent(a: i32) -> &'static str {
    match AgentKind::try_from(a).unwrap_or_default() {
        AgentKind::ClaudeCode => "claude-code",
        AgentKind::Codex => "codex",
        AgentKind::Gemini => "gemini",
        AgentKind::Cursor => "cursor",
        AgentKind::Custom => "custom",
        AgentKind::Unspecified => "",
    }
}

pub fn status(s: i32) -> String {
    SessionStatus::try_from(s)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("SESSION_STATUS_")
        .to_ascii_lowercase()
}

pub fn kind(k: i32) -> String {
    CheckpointKind::try_from(k)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("CHECKPOINT_KIND_")
        .to_ascii_lowercase()
}

pub fn event_kind(k: i32) -> String {
    EventKind::try_from(k)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("EVENT_KIND_")
        .to_ascii_lowercase()
}

pub fn outcome(o: i32) -> String {
    WriteOutcome::try_from(o)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("WRITE_OUTCOME_")
        .to_ascii_lowercase()
}

/// A memory entry in one line: its text, quoted and clipped, and its short id.
pub fn entry_line(e: &MemoryEntry) -> String {
    format!("{:?} ({})", crate::text::clip(&crate::safe::line(&e.content), 80), short(&e.id))
}

pub fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}

/// A table as printed, or `none` when it has no rows (an empty box says nothing).
pub fn rows_or(t: &Table, none: &str) -> String {
    if t.row_count() == 0 { none.to_owned() } else { t.to_string() }
}

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.to_vec());
    t
}

pub fn session_json(s: &Session) -> Value {
    json!({
        "id": s.id, "project": s.project, "agent": agent(s.agent), "agent_session_id": s.agent_session_id,
        "host": s.host, "user": s.user, "cwd": s.cwd, "branch": s.branch, "goal": s.goal, "status": status(s.status),
        "last_seen_at": time(s.last_seen_at.as_ref()), "head_checkpoint_id": s.head_checkpoint_id,
        "git_base": s.git_base, "git_head": s.git_head, "summary": s.summary, "tool_count": s.tool_count,
        "resumed_from": s.resumed_from, "resumed_by": s.resumed_by, "created_at": time(s.created_at.as_ref()),
        "updated_at": time(s.updated_at.as_ref()), "revision": s.revision, "metadata": s.metadata,
    })
}

pub fn checkpoint_json(c: &Checkpoint) -> Value {
    let state = c.state.as_ref().map(|s| {
        json!({
            "active_tasks": s.active_tasks.iter().map(|t| json!({"content": t.content, "status": t.status, "progress": t.progress})).collect::<Vec<_>>(),
            "open_questions": s.open_questions, "blockers": s.blockers, "recent_changes": s.recent_changes,
            "decisions": s.decisions.iter().map(|d| json!({"decision": d.decision, "rationale": d.rationale, "impact": d.impact})).collect::<Vec<_>>(),
            "files_created": s.files_created, "files_modified": s.files_modified, "files_deleted": s.files_deleted,
            "tool_count": s.tool_count, "errors": s.errors, "phase": s.phase, "progress": s.progress, "git_head": s.git_head,
            "last_prompt": s.last_prompt, "last_answer": s.last_answer,
        })
    });
    json!({
        "id": c.id, "session_id": c.session_id, "parent_id": c.parent_id, "kind": kind(c.kind), "reason": c.reason,
        "size_bytes": c.size_bytes, "digest": c.digest, "created_at": time(c.created_at.as_ref()), "revision": c.revision,
        "depth": c.depth, "corrupt": c.corrupt, "state": state,
    })
}

pub fn entry_json(e: &MemoryEntry) -> Value {
    let author = e.author.as_ref();
    json!({
        "id": e.id, "category": e.category, "branch": e.branch, "key": e.key, "content": e.content, "rationale": e.rationale,
        "author": {"host": author.map(|a| a.host.clone()), "agent": author.map(|a| agent(a.agent)), "session_id": author.map(|a| a.session_id.clone())},
        "revision": e.revision, "record_revision": e.record_revision, "created_at": time(e.created_at.as_ref()), "evicted": e.evicted,
    })
}

pub fn conflict_json(c: &Conflict) -> Value {
    json!({
        "id": c.id, "record": c.record, "outcome": outcome(c.outcome), "revision": c.revision,
        "base_revision": c.base_revision, "current_revision": c.current_revision,
        "writer": c.writer.as_ref().map(|a| json!({"host": a.host, "agent": agent(a.agent), "session_id": a.session_id})),
        "current_author": c.current_author.as_ref().map(|a| json!({"host": a.host, "agent": agent(a.agent)})),
        "at": time(c.at.as_ref()), "detail": c.detail,
    })
}

pub fn event_json(e: &Event) -> Value {
    json!({
        "project": e.project, "revision": e.revision, "kind": event_kind(e.kind), "entity": e.entity, "entity_id": e.entity_id,
        "at": time(e.at.as_ref()), "actor": e.actor.as_ref().map(|a| json!({"host": a.host, "agent": agent(a.agent), "token": a.token})),
        "conflict": e.conflict.as_ref().map(conflict_json),
    })
}

/// One line for an event (watch, events).
pub fn event_line(e: &Event) -> String {
    let who = e.actor.as_ref().map(|a| format!("{}@{}", agent(a.agent), a.host)).unwrap_or_default();
    let conflict = e
        .conflict
        .as_ref()
        .map(|c| format!("  [{} conflict on {}]", outcome(c.outcome), c.record))
        .unwrap_or_default();
    format!(
        "r{:<6} {}  {:<24} {:<40} {who}{conflict}",
        e.revision,
        time(e.at.as_ref()),
        event_kind(e.kind),
        e.entity_id
    )
}

/// Prints to stdout. A reader that went away (`baton why big.rs | head`) ends the command
/// quietly, as Unix tools do, instead of a panic about a broken pipe.
pub fn print(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}
