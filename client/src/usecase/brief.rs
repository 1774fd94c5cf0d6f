//! The brief: from the hub (with the git changes since the last session), or the last one
//! cached on this machine when the hub cannot be reached; sized and delivered for an agent.

use std::fmt::Write as _;
use std::path::Path;

use baton_proto::v1::GetBriefRequest;

use crate::agents::Agent;
use crate::ctx::Ctx;
use crate::hub::remote::Hub;
use crate::local::cache;
use crate::project::{Project, git};

/// One line saying Baton's MCP tools are there, only when `baton init` registered them for
/// this agent (its mark; `baton doctor` checks the agent's own files).
fn tools_line(ctx: &Ctx, agent: Agent) -> Option<&'static str> {
    crate::agents::mcp::marker(&ctx.settings.data_dir, agent).exists().then_some(
        "> Baton's tools are connected (MCP server \"baton\"): remember decisions, constraints and open loops as they happen; brief, recall, sessions and checkpoint when you need them.",
    )
}

/// The brief's budget for this agent, less the tools line.
pub fn brief_budget(ctx: &Ctx, agent: Agent) -> usize {
    let line = tools_line(ctx, agent).map_or(0, |l| l.chars().count() + 2);
    ctx.settings.brief_budget(agent).saturating_sub(line)
}

/// The brief as the agent's hook prints it, with the tools line after its title.
pub fn deliver(ctx: &Ctx, agent: Agent, brief: &str) -> String {
    let Some(line) = tools_line(ctx, agent) else { return agent.brief_output(brief) };
    let (title, rest) = brief.split_once('\n').unwrap_or((brief, ""));
    agent.brief_output(&format!("{title}\n{line}\n{rest}"))
}

/// The brief, with the git changes since the previous session's last commit.
pub async fn brief_text(
    hub: &mut Hub,
    project: &Project,
    session_id: Option<&str>,
    cwd: &Path,
    info: &git::Info,
    budget: usize,
) -> Result<String, tonic::Status> {
    let branch = info.branch.clone().unwrap_or_default();
    let request = GetBriefRequest {
        project: project.key.clone(),
        session_id: session_id.unwrap_or_default().to_owned(),
        branch,
        budget_chars: i32::try_from(budget).unwrap_or(i32::MAX),
        changes: vec![],
    };
    let brief = hub.brief.get_brief(request.clone()).await?.into_inner().brief.unwrap_or_default();
    let head = info.head.clone().unwrap_or_default();
    if brief.last_git_head.is_empty() || brief.last_git_head == head {
        return Ok(brief.text);
    }
    let changes = match git::changes_since(cwd, &brief.last_git_head) {
        Ok(lines) if lines.is_empty() => return Ok(brief.text),
        Ok(lines) => lines,
        Err(why) => vec![why],
    };
    let brief = hub
        .brief
        .get_brief(GetBriefRequest { changes, ..request })
        .await?
        .into_inner()
        .brief
        .unwrap_or_default();
    Ok(brief.text)
}

/// The last brief cached for the project, marked with its age, and what waits in the queue.
pub fn offline_brief(ctx: &Ctx, project: &Project, budget: usize) -> String {
    let (queued, dead) = ctx.queue.counts();
    let queued = crate::text::count(queued, "write", "writes");
    let mut note = format!("Baton hub unreachable ({}); {queued} queued locally", ctx.settings.server);
    if dead > 0 {
        let _ = write!(note, ", {dead} refused (see `baton status`)");
    }
    cached_brief(ctx, project, budget, &note)
}

/// The last brief cached for the project, marked with its age, headed by `note`.
pub fn cached_brief(ctx: &Ctx, project: &Project, budget: usize, note: &str) -> String {
    let note = crate::safe::line(note);
    match cache::load(&ctx.settings.data_dir, &project.key) {
        Some(cached) => {
            let age = crate::text::ago(crate::clock::now_us() - cached.cached_at_us);
            let header = format!("> {note}. This brief was cached {age} ago.\n\n");
            let room = budget.saturating_sub(header.chars().count());
            format!("{header}{}", crate::text::fit_lines(&cached.text, room))
        }
        None => format!("> {note}. No brief is cached for project {} yet.\n", project.key),
    }
}
