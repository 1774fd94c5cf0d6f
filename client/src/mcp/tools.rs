//! What each tool does, through the same client paths as the CLI (config, token, TLS, the
//! offline queue), with answers written for a model: what happened, and what to do next.

use std::fmt::Write as _;
use std::path::PathBuf;

use baton_proto::v1::{
    AgentKind, CheckpointKind, CheckpointState, CreateCheckpointRequest, DeleteMemoryRequest,
    GetCheckpointRequest, GetSessionRequest, ListMemoryRequest, ListSessionsRequest, MemoryEntry,
    Session as SessionMsg, WriteResult, delete_memory_request,
};

use super::params;
use crate::agents::Agent;
use crate::hub::remote::{self, Hub, Timeouts};
use crate::outbox::write::{self, Delivered, Write};
use crate::project::Project;
use crate::usecase::checkpoint::conversation_state;
use crate::usecase::memory::{self, Put};
use crate::usecase::workspace::{self, Conversation};
use crate::{ctx::Ctx, view};

/// The most characters a tool answers with (a model's context is the budget).
const ANSWER_CHARS: usize = 24_000;

/// Why a call failed: the arguments (an MCP error naming what to fix), or the work (a tool
/// result marked as an error, which the model reads).
pub enum Failure {
    Arguments(String),
    Tool(String),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::Tool(format!("{e:#}"))
    }
}

pub type Answer = Result<String, Failure>;

/// One call's surroundings.
pub struct Call<'a> {
    pub ctx: &'a Ctx,
    pub agent: Option<Agent>,
    pub dir: PathBuf,
    pub project: Project,
}

impl Call<'_> {
    pub(super) async fn hub(&self) -> Option<Hub> {
        remote::connect(&self.ctx.settings, Timeouts::MCP).await.ok()
    }

    fn conversation(&self) -> Option<Conversation> {
        workspace::conversation(self.ctx, self.agent, &self.project.key)
    }

    fn author(&self, conversation: Option<&Conversation>) -> (i32, String) {
        let kind = conversation.map(|c| c.agent).or(self.agent).map_or(AgentKind::Custom, Agent::kind);
        (kind as i32, conversation.map(|c| c.record.baton_session_id.clone()).unwrap_or_default())
    }

    /// What a read answers with the hub down: the cached brief, marked as such.
    pub(super) fn offline(&self) -> String {
        let budget =
            self.agent.map_or(self.ctx.settings.brief_budget as usize, |a| self.ctx.settings.brief_budget(a));
        clip(&crate::usecase::brief::offline_brief(self.ctx, &self.project, budget))
    }
}

pub(super) fn clip(text: &str) -> String {
    if text.chars().count() <= ANSWER_CHARS {
        return text.to_owned();
    }
    let mut out = crate::text::fit_lines(text, ANSWER_CHARS - 120);
    out.push_str("… (cut to fit; ask for less, e.g. one category)\n");
    out
}

pub(super) fn status_words(status: &tonic::Status) -> String {
    remote::explain(status)
}

pub async fn brief(call: &Call<'_>, p: params::Brief) -> Answer {
    let budget = match p.budget {
        Some(b) if !(500..=50_000).contains(&b) => {
            return Err(Failure::Arguments(format!("budget must be 500 to 50000 characters, not {b}")));
        }
        Some(b) => b as usize,
        None => {
            call.agent.map_or(call.ctx.settings.brief_budget as usize, |a| call.ctx.settings.brief_budget(a))
        }
    };
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let info = crate::project::git::info(&call.dir);
    let session = call.conversation().map(|c| c.record.baton_session_id);
    match crate::usecase::brief::brief_text(
        &mut hub,
        &call.project,
        session.as_deref(),
        &call.dir,
        &info,
        budget,
    )
    .await
    {
        Ok(text) => {
            let _ = crate::local::cache::store(&call.ctx.settings.data_dir, &call.project.key, &text);
            Ok(clip(&text))
        }
        Err(status) => Err(Failure::Tool(status_words(&status))),
    }
}

pub async fn remember(call: &Call<'_>, p: params::Remember) -> Answer {
    let text = p.text.trim();
    if text.is_empty() {
        return Err(Failure::Arguments("text is empty: say what to remember".into()));
    }
    if p.category == params::Category::Note && p.key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        return Err(Failure::Arguments(
            "a note needs a key (e.g. \"deploy\"): a later note with the same key replaces it".into(),
        ));
    }
    if p.category != params::Category::Note && p.key.is_some() {
        return Err(Failure::Arguments(format!("key is for notes only, not for {}", p.category.name())));
    }
    if p.rationale.is_some() && p.category != params::Category::Decision {
        return Err(Failure::Arguments(format!(
            "rationale is for decisions only, not for {}",
            p.category.name()
        )));
    }
    let conversation = call.conversation();
    let (kind, session) = call.author(conversation.as_ref());
    let add = memory::Add {
        category: p.category.name().to_owned(),
        text: text.to_owned(),
        rationale: p.rationale.clone(),
        key: p.key.clone(),
        branch: p.branch.clone(),
        if_revision: None,
    };
    let mut hub = call.hub().await;
    let (put, redacted) =
        match memory::put(call.ctx, hub.as_mut(), &call.project.key, &add, (kind, &session)).await {
            Ok(done) => done,
            Err(e) => return Err(Failure::Tool(format!("not remembered: {e:#}"))),
        };
    let what = p.category.name().replace('_', " ");
    let mut out = match put {
        Put::AlreadyHeld => format!("The project's {what} list already holds that; nothing added."),
        Put::Queued => format!(
            "The Baton hub is unreachable: the {what} is queued on this machine and will be sent when it is back (it applies to the list as it is then)."
        ),
        Put::Sent(r) => {
            let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
            let evicted = evicted_words(&r.evicted);
            let evicted = if evicted.is_empty() { evicted } else { format!(" {evicted}") };
            format!(
                "Remembered as {article} {what} (revision {}).{}{evicted}",
                r.result.revision,
                conflict_words(&r.result)
            )
        }
    };
    if redacted > 0 {
        let _ = write!(
            out,
            " {} redacted before storing.",
            crate::text::count(redacted, "secret was", "secrets were")
        );
    }
    Ok(out)
}

/// The entries an append pushed out past its category's cap, in words (empty when none).
pub fn evicted_words(evicted: &[MemoryEntry]) -> String {
    let items: Vec<String> = evicted.iter().map(view::entry_line).collect();
    if items.is_empty() {
        return String::new();
    }
    format!(
        "The category is at its cap: {} evicted to history ({}); `recall` with evicted shows it.",
        if items.len() == 1 { "the oldest entry was" } else { "the oldest entries were" },
        items.join(", ")
    )
}

/// A write's conflict, in words a model can act on.
fn conflict_words(r: &WriteResult) -> String {
    let Some(c) = &r.conflict else { return String::new() };
    let by = c.current_author.as_ref().map(|a| format!(" by {}@{}", a.user, a.host)).unwrap_or_default();
    let detail = if c.detail.is_empty() { String::new() } else { format!(" ({})", c.detail) };
    format!(
        " Note: {} had changed since you last read it (now revision {}{by}); your write was {}{detail}. Use recall to see what it holds now.",
        c.record,
        c.current_revision,
        view::outcome(c.outcome)
    )
}

pub async fn forget(call: &Call<'_>, p: params::Forget) -> Answer {
    let id = p.id.trim();
    if id.len() < 8 || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(Failure::Arguments(format!(
            "{id:?} is not an entry id: give the id recall shows (at least its last 8 characters)"
        )));
    }
    let mut hub = call.hub().await;
    let full = if uuid::Uuid::parse_str(id).is_ok() {
        id.to_owned()
    } else {
        let Some(h) = hub.as_mut() else {
            return Err(Failure::Tool(
                "the Baton hub is unreachable: a short id cannot be looked up; give the full id to queue it"
                    .into(),
            ));
        };
        memory::entry_id(h, &call.project.key, id).await?
    };
    let conversation = call.conversation();
    let (kind, session) = call.author(conversation.as_ref());
    let request = DeleteMemoryRequest {
        project: call.project.key.clone(),
        target: Some(delete_memory_request::Target::EntryId(full.clone())),
        write: write::options(kind, &session),
    };
    match write::submit(&call.ctx.queue, hub.as_mut(), Write::DeleteMemory(request), None).await {
        Ok(Delivered::Sent(r)) => {
            Ok(format!("Forgot entry {full} (revision {}).{}", r.result.revision, conflict_words(&r.result)))
        }
        Ok(Delivered::Queued) => Ok(format!(
            "The Baton hub is unreachable: forgetting {full} is queued and will be sent when it is back."
        )),
        Err(e) => Err(Failure::Tool(format!("not forgotten: {e:#}"))),
    }
}

async fn list_memory(
    hub: &mut Hub,
    project: &str,
    category: &str,
    evicted: bool,
) -> Result<Vec<MemoryEntry>, Failure> {
    let request = ListMemoryRequest {
        project: project.to_owned(),
        category: category.to_owned(),
        include_evicted: evicted,
        ..Default::default()
    };
    Ok(crate::hub::pages::memory(hub, request).await?.entries)
}

pub async fn recall(call: &Call<'_>, p: params::Recall) -> Answer {
    let category = p.category.as_deref().map(str::trim).unwrap_or_default();
    if !category.is_empty() && !memory::categories().any(|c| c == category) {
        let all: Vec<&str> = memory::categories().collect();
        return Err(Failure::Arguments(format!(
            "unknown category {category:?}: use one of {}",
            all.join(", ")
        )));
    }
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let entries = list_memory(&mut hub, &call.project.key, category, p.include_evicted).await?;
    if entries.is_empty() {
        let what = if category.is_empty() { "memory" } else { category };
        return Ok(format!("Project {} has no {what} yet.", call.project.key));
    }
    let mut out = format!(
        "Memory of project {} ({}):\n",
        call.project.key,
        crate::text::count(entries.len(), "entry", "entries")
    );
    for e in &entries {
        let mut line = format!("- [{}", e.category);
        if !e.key.is_empty() {
            let _ = write!(line, " {}", e.key);
        }
        if !e.branch.is_empty() {
            let _ = write!(line, " @{}", e.branch);
        }
        let _ = write!(line, "] {}", e.content);
        if !e.rationale.is_empty() {
            let _ = write!(line, " (why: {})", e.rationale);
        }
        let by = e.author.as_ref().map(|a| a.host.clone()).unwrap_or_default();
        let _ = write!(line, " — id {}, by {by}, revision {}", view::short(&e.id), e.record_revision);
        if e.evicted {
            line.push_str(", evicted from the brief");
        }
        out.push_str(&line);
        out.push('\n');
    }
    Ok(clip(&out))
}

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

const TASK_STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

pub async fn checkpoint(call: &Call<'_>, p: params::Checkpoint) -> Answer {
    let reason = p.reason.trim();
    if reason.is_empty() {
        return Err(Failure::Arguments("reason is empty: say why you are saving now".into()));
    }
    if let Some(t) = p.tasks.iter().find(|t| !TASK_STATUSES.contains(&t.status.as_str())) {
        return Err(Failure::Arguments(format!(
            "task {:?} has status {:?}: use pending, in_progress or completed",
            t.content, t.status
        )));
    }
    let Some(conversation) = call.conversation() else {
        return Err(Failure::Tool(no_session(call)));
    };
    let cwd = workspace::conversation_cwd(&conversation, &call.dir);
    let mut state = conversation_state(call.ctx, &conversation.record, None, &cwd, &call.project.root);
    if !p.tasks.is_empty() {
        state.active_tasks = p
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| baton_proto::v1::Task {
                id: (i + 1).to_string(),
                content: t.content.clone(),
                status: t.status.clone(),
                progress: 0,
            })
            .collect();
    }
    state.decisions.extend(p.decisions.iter().map(|d| baton_proto::v1::Decision {
        decision: d.decision.clone(),
        rationale: d.rationale.clone().unwrap_or_default(),
        impact: String::new(),
    }));
    state.open_questions.extend(p.open_questions.iter().cloned());
    let mut redactor = baton_proto::redact::Redactor::default();
    redactor.fields(baton_proto::redact::state_texts(&mut state));
    let (reason, n) = baton_proto::redact::redact(reason);
    let session_id = conversation.record.baton_session_id.clone();
    let request = CreateCheckpointRequest {
        session_id: session_id.clone(),
        checkpoint_id: uuid::Uuid::now_v7().to_string(),
        kind: CheckpointKind::Manual as i32,
        reason: reason.into_owned(),
        state: Some(state),
        write: write::options(conversation.agent.kind() as i32, &session_id),
        ..Default::default()
    };
    let mut hub = call.hub().await;
    let sent = write::submit(
        &call.ctx.queue,
        hub.as_mut(),
        Write::CreateCheckpoint(Box::new(request), call.project.key.clone()),
        None,
    )
    .await;
    let redacted = redactor.count + n;
    let note = if redacted > 0 {
        format!(" {} redacted.", crate::text::count(redacted, "secret was", "secrets were"))
    } else {
        String::new()
    };
    match sent {
        Ok(Delivered::Sent(r)) => Ok(format!(
            "Saved a checkpoint of session {} (revision {}).{}{note}",
            view::short(&session_id),
            r.result.revision,
            conflict_words(&r.result)
        )),
        Ok(Delivered::Queued) => Ok(format!(
            "The Baton hub is unreachable: the checkpoint is queued on this machine and will be sent when it is back.{note}"
        )),
        Err(e) => Err(Failure::Tool(format!("not saved: {e:#}"))),
    }
}

fn no_session(call: &Call<'_>) -> String {
    let init = call.agent.map_or("baton init <agent>".to_owned(), |a| format!("baton init {}", a.name()));
    format!(
        "This conversation has no Baton session on this machine for project {}: Baton's hooks start one at SessionStart (install them with `{init}`, then start a new conversation). Memory tools (remember, recall, brief) work without one.",
        call.project.key
    )
}

/// Conflicts since this session started (the last 24 hours without a session).
pub async fn conflicts(call: &Call<'_>, _p: params::Conflicts) -> Answer {
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let conversation = call.conversation();
    let since = match &conversation {
        Some(c) => hub
            .sessions
            .get_session(GetSessionRequest { session_id: c.record.baton_session_id.clone() })
            .await
            .ok()
            .and_then(|r| r.into_inner().session)
            .and_then(|s| s.created_at)
            .map(|t| t.seconds * 1_000_000 + i64::from(t.nanos / 1000)),
        None => None,
    };
    let (since_us, label) = match since {
        Some(us) => (us, "since this session started"),
        None => (crate::clock::now_us() - 24 * 3600 * 1_000_000, "in the last 24 hours"),
    };
    let all = crate::hub::pages::conflicts(&mut hub, &call.project.key, 0).await?;
    let recent: Vec<_> = all
        .iter()
        .filter(|c| {
            c.at.as_ref().is_some_and(|t| t.seconds * 1_000_000 + i64::from(t.nanos / 1000) >= since_us)
        })
        .collect();
    if recent.is_empty() {
        return Ok(format!("No conflicts in project {} {label}.", call.project.key));
    }
    let mut out = format!("Conflicts in project {} {label} ({}):\n", call.project.key, recent.len());
    for c in recent {
        let writer = c.writer.as_ref().map(|a| format!("{}@{}", a.user, a.host)).unwrap_or_default();
        let other = c.current_author.as_ref().map(|a| format!("{}@{}", a.user, a.host)).unwrap_or_default();
        let _ = writeln!(
            out,
            "- {}: a write by {writer} was {} against revision {} by {other}{}",
            c.record,
            view::outcome(c.outcome),
            c.current_revision,
            if c.detail.is_empty() { String::new() } else { format!(" ({})", c.detail) }
        );
    }
    Ok(clip(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An append past its category's cap names what it pushed out, and how to see it again.
    #[test]
    fn evictions_are_named() {
        assert_eq!(evicted_words(&[]), "");
        let entry = MemoryEntry {
            id: "0190aaaa-0000-7000-8000-00000000beef".into(),
            content: "use option 1".into(),
            ..Default::default()
        };
        let words = evicted_words(&[entry]);
        assert!(
            words.contains("the oldest entry was evicted") && words.contains("\"use option 1\" (0000beef)"),
            "{words}"
        );
        assert!(words.contains("recall"), "{words}");
    }
}
