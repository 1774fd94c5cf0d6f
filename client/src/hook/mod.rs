//! `baton hook <agent> <event>`: what the agents' hooks call. It reads the agent's JSON
//! payload on stdin, does the right thing for the event, prints what the agent expects,
//! and never breaks the agent: bounded time, always exit 0, errors go to `hook.log`.
//!
//! This module dispatches by event; each event's work is in the file named for it
//! (`start`, `tools`, `end`), with the conversation's session (`session`) and the
//! checkpoints hooks make (`checkpoint`) beside them.

mod checkpoint;
mod commits;
mod end;
pub mod reserved;
pub mod risk;
mod session;
mod start;
mod tools;
mod writes;

use self::checkpoint::{checkpoint, checkpoint_now, syncs};
use self::end::{session_end, summarize};
use self::reserved::Verdict;
use self::session::{first_prompt_as_goal, record};
use self::start::session_start;
use self::tools::post_tool_use;

use std::path::Path;
use std::time::Duration;

use baton_proto::v1::CheckpointKind;

use crate::agents::payload::Payload;
pub use crate::agents::{Agent, Event};
use crate::ctx::log;
use crate::hub::remote::{self, Timeouts};
use crate::outbox::write::{self};
use crate::project::{self};
use crate::usecase::brief::{brief_budget, cached_brief, deliver, offline_brief};
use crate::{ctx::Ctx, project::git};

/// How long a hook may take in all (the agents allow more; Baton should not need it).
const HOOK_BUDGET: Duration = Duration::from_millis(2500);
/// How long the detached part of a hook may take (SessionEnd, and uploads), summaries aside.
const DETACHED_BUDGET: Duration = Duration::from_secs(30);
use crate::outbox::write::LOCK_WAIT;

/// Runs a hook and returns what to print. Never fails: problems are logged.
pub async fn run(ctx: &Ctx, agent: Agent, event: &str, stdin: &str, payload_file: Option<&Path>) -> String {
    if std::env::var_os(crate::agents::summary::RUNNING).is_some() {
        // Baton's own summarizer run (`crate::agents::summary`) is not a Baton session.
        return agent.quiet_output().to_owned();
    }
    let Some(event) = Event::parse(event) else {
        log(ctx, &format!("{}: unknown hook event {event:?} (ignored)", agent.name()));
        return agent.quiet_output().to_owned();
    };
    let parsed = match payload_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let _ = std::fs::remove_file(file);
            Payload::parse(&text)
        }
        None => Payload::parse(stdin),
    };
    let payload = match parsed {
        Ok(payload) => payload,
        Err(why) => {
            log(ctx, &format!("{} {event:?}: nothing done: {why}", agent.name()));
            return agent.quiet_output().to_owned();
        }
    };
    if agent.stands_down(&payload.cwd(), &|| git::toplevel(&payload.cwd())) {
        return agent.quiet_output().to_owned();
    }
    let detached = payload_file.is_some();
    // Work handed to a detached process has no agent waiting on it: room for an upload and
    // a summary's time limit, still bounded.
    let budget = if detached {
        DETACHED_BUDGET
            + Duration::from_secs(ctx.settings.summarize.map_or(0, |_| ctx.settings.summarize_seconds))
    } else {
        HOOK_BUDGET
    };
    let work = Box::pin(handle(ctx, agent, event, &payload, detached));
    match tokio::time::timeout(budget, work).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            log(ctx, &format!("{} {event:?}: {e:#}", agent.name()));
            let refused = e.downcast_ref::<write::Refused>().map(|r| r.0.as_str());
            fallback(ctx, agent, event, &payload, refused)
        }
        Err(_) => {
            log(ctx, &format!("{} {event:?}: gave up after {budget:?}", agent.name()));
            fallback(ctx, agent, event, &payload, None)
        }
    }
}

/// What to print when the work failed: for SessionStart, still a brief from the cache,
/// headed by what happened (the hub refused the session, or could not be reached).
fn fallback(ctx: &Ctx, agent: Agent, event: Event, payload: &Payload, refused: Option<&str>) -> String {
    if event == Event::SessionStart {
        let project = project::identify(&payload.cwd());
        let budget = brief_budget(ctx, agent);
        let brief = match refused {
            Some(why) => {
                cached_brief(ctx, &project, budget, &format!("The Baton hub refused this session: {why}"))
            }
            None => offline_brief(ctx, &project, budget),
        };
        return deliver(ctx, agent, &brief);
    }
    agent.quiet_output().to_owned()
}

async fn handle(
    ctx: &Ctx,
    agent: Agent,
    event: Event,
    p: &Payload,
    detached: bool,
) -> anyhow::Result<String> {
    match event {
        Event::SessionStart => session_start(ctx, agent, p).await,
        Event::PreToolUse => Ok(pre_tool_use(ctx, agent, p).await),
        Event::PostToolUse | Event::ToolFailure => {
            let error = (event == Event::ToolFailure)
                .then(|| p.error_text().unwrap_or_else(|| "the tool failed".into()));
            let notice = post_tool_use(ctx, agent, p, error.as_deref()).await?;
            Ok(tell_after(ctx, agent, p, notice))
        }
        _ => {
            Box::pin(record_event(ctx, agent, event, p, detached)).await?;
            Ok(agent.quiet_output().to_owned())
        }
    }
}

/// Before a tool call: a checkpoint before a risky command, and the reservation check
/// (with any notice waiting for this hook). What the agent is told, or its quiet output.
async fn pre_tool_use(ctx: &Ctx, agent: Agent, p: &Payload) -> String {
    commits::before_call(ctx, agent, p);
    let verdict = reserved::check(ctx, agent, p).await;
    if p.tool_name.as_deref() != Some("apply_patch")
        && let Some(command) = p.shell_command()
        && let Some(why) = risk::risky(&command)
    {
        let reason = format!("before {why}: {}", crate::text::clip(&command, 300));
        if let Err(e) = checkpoint_now(ctx, agent, p, CheckpointKind::Risk, &reason, false).await {
            log(ctx, &format!("{} PreToolUse: risk checkpoint: {e:#}", agent.name()));
        }
    }
    let sid = p.agent_session_id().unwrap_or("unknown");
    let warns_before = agent.pre_tool_output(&Verdict::Warn(String::new())).is_some();
    let waiting = if warns_before { take_notice(ctx, agent, sid) } else { None };
    let verdict = match (verdict, waiting) {
        (Some(Verdict::Deny(r)), Some(n)) => Some(Verdict::Deny(format!("{r}\n\n{n}"))),
        (Some(Verdict::Warn(w)), Some(n)) => Some(Verdict::Warn(format!("{w}\n\n{n}"))),
        (None, Some(n)) => Some(Verdict::Warn(n)),
        (verdict, None) => verdict,
    };
    let Some(verdict) = verdict else { return agent.quiet_output().to_owned() };
    if let Some(out) = agent.pre_tool_output(&verdict) {
        return out;
    }
    if let Verdict::Warn(text) = verdict {
        keep_notice(ctx, agent, sid, &text);
    }
    agent.quiet_output().to_owned()
}

/// After a tool call: `notice` (and a warning kept for this hook) put before the model, or
/// kept for the next pre-tool hook when this agent has no way here.
fn tell_after(ctx: &Ctx, agent: Agent, p: &Payload, notice: Option<String>) -> String {
    let sid = p.agent_session_id().unwrap_or("unknown");
    let warns_before = agent.pre_tool_output(&Verdict::Warn(String::new())).is_some();
    let kept = if warns_before { None } else { take_notice(ctx, agent, sid) };
    let text = [kept, notice].into_iter().flatten().collect::<Vec<_>>().join("\n\n");
    if text.is_empty() {
        return agent.quiet_output().to_owned();
    }
    if let Some(out) = agent.post_tool_output(&text) {
        return out;
    }
    keep_notice(ctx, agent, sid, &text);
    agent.quiet_output().to_owned()
}

/// Keeps text for the model until a hook can deliver it (appended to any kept already).
fn keep_notice(ctx: &Ctx, agent: Agent, sid: &str, text: &str) {
    let kept = ctx.state.update(agent.name(), sid, |s| {
        if !s.pending_notice.contains(text) {
            let joined = [s.pending_notice.as_str(), text]
                .iter()
                .filter(|t| !t.is_empty())
                .copied()
                .collect::<Vec<_>>();
            s.pending_notice = crate::text::clip(&joined.join("\n\n"), 8_000);
        }
    });
    if let Err(e) = kept {
        log(ctx, &format!("cannot keep a notice for the model: {e:#}"));
    }
}

/// The text kept for the model, taken (once).
fn take_notice(ctx: &Ctx, agent: Agent, sid: &str) -> Option<String> {
    ctx.state.get(agent.name(), sid).filter(|s| !s.pending_notice.is_empty())?;
    let taken = ctx.state.update(agent.name(), sid, |s| std::mem::take(&mut s.pending_notice)).ok()?;
    (!taken.is_empty()).then_some(taken)
}

/// What an event other than SessionStart records (its output is the agent's quiet one).
async fn record_event(
    ctx: &Ctx,
    agent: Agent,
    event: Event,
    p: &Payload,
    detached: bool,
) -> anyhow::Result<()> {
    match event {
        // `handle` answers these itself.
        Event::SessionStart | Event::PreToolUse | Event::PostToolUse | Event::ToolFailure => {}
        Event::Prompt => {
            if let Some(prompt) = &p.prompt {
                let sid = p.agent_session_id().unwrap_or("unknown");
                let first = ctx.state.get(agent.name(), sid).is_none_or(|s| s.journal.last_prompt.is_empty());
                record(ctx, agent, p, |j| j.prompt(prompt)).await?;
                if first {
                    first_prompt_as_goal(ctx, agent, p).await?;
                }
            }
        }
        Event::SubagentStop => {
            let name = p.agent_type.clone().unwrap_or_else(|| "subagent".into());
            record(ctx, agent, p, |j| j.note_tool("Subagent", &name)).await?;
        }
        Event::StopFailure => {
            let error = p.error_text().unwrap_or_else(|| "the turn ended in an error".into());
            record(ctx, agent, p, |j| j.error(&error)).await?;
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, "a turn ended in an error", false).await?;
        }
        Event::PostCompact => {
            if let Some(summary) = &p.compact_summary {
                record(ctx, agent, p, |j| j.compacted(summary)).await?;
            }
            let reason = format!("after compaction ({})", p.trigger.as_deref().unwrap_or("auto"));
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, &reason, false).await?;
        }
        Event::Stop | Event::PreCompact
            if !detached
                && (syncs(ctx, agent, p)
                    || (event == Event::PreCompact && ctx.settings.summarize.is_some())) =>
        {
            // Uploading a transcript is slow work: a detached process does it.
            let name = if event == Event::Stop { "Stop" } else { "PreCompact" };
            if let Err(e) = spawn_detached(ctx, agent, name, p) {
                log(ctx, &format!("cannot detach {name} work ({e:#})"));
            }
        }
        Event::Stop => {
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, "end of a turn", detached).await?;
        }
        Event::PreCompact => {
            let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
            let reason = format!("before compaction ({})", p.trigger.as_deref().unwrap_or("auto"));
            checkpoint(ctx, agent, p, hub.as_mut(), CheckpointKind::PreCompact, &reason, detached).await?;
            if detached {
                summarize(ctx, agent, p, hub.as_mut(), false).await;
            }
        }
        Event::SessionEnd if !detached => {
            // The agents give SessionEnd 1–1.5 s or do not wait at all: hand the work to a
            // detached process and return at once.
            if let Err(e) = spawn_detached(ctx, agent, "SessionEnd", p) {
                log(ctx, &format!("cannot detach SessionEnd work ({e:#}); doing it inline"));
                session_end(ctx, agent, p).await?;
            }
        }
        Event::SessionEnd => {
            session_end(ctx, agent, p).await?;
        }
    }
    Ok(())
}

/// Starts `baton hook <agent> <event> --payload-file F` in its own process group, so it
/// outlives the agent's wait and any signal to the hook's group.
fn spawn_detached(ctx: &Ctx, agent: Agent, event: &str, p: &Payload) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = ctx.settings.data_dir.join("tmp");
    crate::fsperm::create_private_dir(&dir)?;
    let file = dir.join(format!("{event}-{}.json", uuid::Uuid::now_v7()));
    let payload = serde_json::json!({
        "session_id": p.agent_session_id(),
        "transcript_path": p.transcript_path,
        "cwd": p.cwd(),
        "reason": p.reason,
        "trigger": p.trigger,
        "last_assistant_message": p.last_answer(),
    });
    crate::fsperm::write_private(&file, payload.to_string().as_bytes())?;
    std::process::Command::new(std::env::current_exe()?)
        .args(["hook", agent.name(), event, "--payload-file"])
        .arg(&file)
        // The same hub as this process, whether it came from a flag, the environment or
        // the config file.
        .env("BATON_SERVER", &ctx.settings.server)
        .envs(ctx.settings.token.as_ref().map(|t| ("BATON_TOKEN", t)))
        .envs(ctx.settings.ca_cert.as_ref().map(|c| ("BATON_CA_CERT", c)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(())
}
