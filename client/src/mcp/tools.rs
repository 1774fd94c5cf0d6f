//! What every tool shares (`Call`, `Failure`, `Answer`, clipping), and the brief, checkpoint
//! and conflicts tools: through the same client paths as the CLI (config, token, TLS, the
//! offline queue), with answers written for a model: what happened, and what to do next.

use std::fmt::Write as _;
use std::path::PathBuf;

use baton_proto::v1::{AgentKind, CheckpointKind, CreateCheckpointRequest, GetSessionRequest, WriteResult};

use super::params;
use crate::agents::Agent;
use crate::hub::remote::{self, Hub, Timeouts};
use crate::outbox::write::{self, Delivered, Write};
use crate::project::Project;
use crate::usecase::checkpoint::conversation_state;
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

    pub(super) fn conversation(&self) -> Option<Conversation> {
        workspace::conversation(self.ctx, self.agent, &self.project.key)
    }

    pub(super) fn author(&self, conversation: Option<&Conversation>) -> (i32, String) {
        let kind = conversation.map(|c| c.agent).or(self.agent).map_or(AgentKind::Custom, |a| a.kind());
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

/// A write's conflict, in words a model can act on.
pub(super) fn conflict_words(r: &WriteResult) -> String {
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
