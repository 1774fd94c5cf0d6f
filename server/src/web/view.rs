//! Records as the pages show them: labels for enums, short ids, clipped text, times.

use baton_proto::v1::{Actor, AgentKind, Event, EventKind, Session, SessionStatus, event};

use super::render::{When, clip, href};

pub fn status_label(status: i32) -> &'static str {
    match SessionStatus::try_from(status).unwrap_or_default() {
        SessionStatus::Unspecified => "unknown",
        SessionStatus::Initializing => "initializing",
        SessionStatus::Active => "active",
        SessionStatus::Idle => "idle",
        SessionStatus::Completed => "completed",
        SessionStatus::Crashed => "crashed",
        SessionStatus::Resumed => "resumed",
    }
}

pub fn agent_label(agent: i32) -> &'static str {
    match AgentKind::try_from(agent).unwrap_or_default() {
        AgentKind::Unspecified => "unknown",
        AgentKind::ClaudeCode => "claude",
        AgentKind::Codex => "codex",
        AgentKind::Gemini => "gemini",
        AgentKind::Cursor => "cursor",
        AgentKind::Custom => "custom",
    }
}

/// Who wrote something, as a line: user, host and token, those that are set.
pub fn actor_line(actor: Option<&Actor>) -> String {
    actor.map_or_else(String::new, |a| {
        [a.user.as_str(), a.host.as_str(), a.token.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" · ")
    })
}

/// The last 8 characters of an id, as the CLI shows it (a uuid v7 begins with its time,
/// the same for sessions started together; it ends with random bits).
pub fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}

pub fn session_href(id: &str) -> String {
    href("/session", &[("id", id)])
}

/// A session in a list.
pub struct SessionRow {
    pub id: String,
    pub short: String,
    pub href: String,
    pub status: &'static str,
    pub agent: &'static str,
    pub host: String,
    pub user: String,
    pub branch: String,
    pub goal: String,
    pub last_seen: When,
    pub project: String,
}

impl SessionRow {
    pub fn of(s: &Session) -> Self {
        Self {
            id: s.id.clone(),
            short: short(&s.id).to_owned(),
            href: session_href(&s.id),
            status: status_label(s.status),
            agent: agent_label(s.agent),
            host: clip(&s.host, 60),
            user: clip(&s.user, 60),
            branch: clip(&s.branch, 60),
            goal: clip(&s.goal, 140),
            last_seen: When::of(s.last_seen_at.as_ref()),
            project: s.project.clone(),
        }
    }
}

/// An event of the change stream, in a line.
pub struct EventLine {
    pub revision: i64,
    pub kind: &'static str,
    pub what: String,
    pub href: String,
    pub by: String,
    pub at: When,
    pub conflict: bool,
}

fn kind_label(kind: i32) -> &'static str {
    match EventKind::try_from(kind).unwrap_or_default() {
        EventKind::Unspecified => "change",
        EventKind::SessionStarted => "session started",
        EventKind::SessionUpdated => "session updated",
        EventKind::SessionStatusChanged => "session status",
        EventKind::CheckpointCreated => "checkpoint",
        EventKind::MemoryChanged => "memory",
        EventKind::ProjectSettingsChanged => "settings",
        EventKind::CheckpointsPruned => "retention",
        EventKind::EventsCompacted => "events compacted",
        EventKind::Purged => "purge",
        EventKind::SearchIndexed => "search indexed",
        EventKind::ThreadWrites => "thread writes",
        EventKind::CheckpointsDeleted => "checkpoints deleted",
        EventKind::ItemsChanged => "agent log",
        EventKind::ReservationsChanged => "reservations",
        EventKind::CommitsChanged => "commits",
    }
}

impl EventLine {
    pub fn of(e: &Event) -> Self {
        let (what, link) = match &e.value {
            Some(event::Value::Session(s)) => (
                format!("{} · {} on {}: {}", status_label(s.status), agent_label(s.agent), s.host, s.goal),
                session_href(&s.id),
            ),
            Some(event::Value::Checkpoint(c)) => {
                let head = if c.is_head { " (head)" } else { "" };
                (
                    format!("checkpoint {}{head} of session {}", short(&c.id), short(&c.session_id)),
                    session_href(&c.session_id),
                )
            }
            Some(event::Value::Memory(m)) => {
                let key = if m.key.is_empty() { String::new() } else { format!(" {}", m.key) };
                let branch =
                    if m.branch.is_empty() { String::new() } else { format!(" (branch {})", m.branch) };
                (format!("{}{key}{branch}", m.category), String::new())
            }
            Some(event::Value::Items(i)) => (format!("log {}", i.key), String::new()),
            Some(event::Value::Maintenance(m)) => (
                format!(
                    "{} checkpoints removed, {} records purged",
                    m.removed_checkpoints.len(),
                    m.purged_records
                ),
                String::new(),
            ),
            Some(event::Value::ThreadWrites(_)) => ("pending writes".into(), String::new()),
            Some(event::Value::Settings(_)) => ("project settings".into(), String::new()),
            Some(event::Value::Reservations(r)) => (reservations_line(r), String::new()),
            Some(event::Value::Commits(c)) => commits_line(&e.project, c),
            None => (format!("{} {}", e.entity, short(&e.entity_id)), String::new()),
        };
        let by = actor_line(e.actor.as_ref());
        Self {
            revision: e.revision,
            kind: kind_label(e.kind),
            what: clip(&what, 200),
            href: link,
            by: clip(&by, 120),
            at: When::of(e.at.as_ref()),
            conflict: e.conflict.is_some(),
        }
    }
}

/// An event's commit links in a line (the first one's page linked).
fn commits_line(project: &str, change: &baton_proto::v1::CommitsChange) -> (String, String) {
    if change.links.is_empty() {
        return (format!("{} commit links removed", change.removed.len()), String::new());
    }
    let parts: Vec<String> = change
        .links
        .iter()
        .take(5)
        .map(|l| format!("{} by session {}: {}", short(&l.commit_id), short(&l.session_id), l.subject))
        .collect();
    let more = change.links.len().saturating_sub(parts.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let href = change
        .links
        .first()
        .map(|l| super::pages::commit::commit_href(project, &l.commit_id))
        .unwrap_or_default();
    (format!("commit {}{more}", parts.join("; ")), href)
}

/// An event's reservations in a line: what each became, on what.
fn reservations_line(change: &baton_proto::v1::ReservationsChange) -> String {
    use baton_proto::v1::ReservationStatus;
    let mut parts: Vec<String> = change
        .reservations
        .iter()
        .take(5)
        .map(|r| {
            let status = match ReservationStatus::try_from(r.status).unwrap_or_default() {
                ReservationStatus::Waiting => "waits for",
                ReservationStatus::Held => "holds",
                ReservationStatus::Released => "released",
                ReservationStatus::Expired => "lapsed:",
                ReservationStatus::TakenOver => "taken over:",
                ReservationStatus::SessionEnded => "ended with its session:",
                ReservationStatus::WaitEnded => "stopped waiting for",
                ReservationStatus::Unspecified => "?",
            };
            let what = if r.path.is_empty() { format!("task {}", r.task) } else { r.path.clone() };
            format!("{} {status} {what}", short(&r.session_id))
        })
        .collect();
    if change.reservations.len() > 5 {
        parts.push(format!("and {} more", change.reservations.len() - 5));
    }
    if change.settings.is_some() {
        parts.push("reservation settings".into());
    }
    parts.join("; ")
}
