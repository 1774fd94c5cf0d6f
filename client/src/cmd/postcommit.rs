//! The git post-commit hook (`baton init AGENT --post-commit`): links the commit just made
//! to the session that made it, at once. An agent conversation's shell call (found by process
//! ancestry: the agent's own process above git) made it: the agent's. Else the person made
//! it while the conversations live in this worktree ran: each of them gets it, ambiguous when
//! there are several. None live: nothing is recorded. It never fails the commit.

use std::path::Path;

use baton_proto::v1::{CommitMadeBy, CommitSeenBy};

use crate::agents::Agent;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Timeouts};
use crate::project::git::{self, commits};
use crate::usecase::commits::{Holder, link, live_beside, send};
use crate::{host, project};

/// The hook (`cmd::githook`).
pub const HOOK: super::githook::Hook<'static> = super::githook::Hook {
    name: "post-commit",
    does: "links each commit made here to the agent session that made it (or that was live while you \
           made it), for `baton why`",
    chain: "link commits to sessions",
    then: "",
};

/// `baton post-commit`: the hook's work; problems go to the hook log, never to git.
pub async fn run(ctx: &Ctx, dir: &Path) -> anyhow::Result<()> {
    if let Err(e) = record(ctx, dir).await {
        log(ctx, &format!("post-commit: not recorded: {e:#}"));
    }
    Ok(())
}

async fn record(ctx: &Ctx, dir: &Path) -> anyhow::Result<()> {
    let info = git::info(dir);
    let (Some(head), Some(root)) = (info.head.clone(), info.toplevel.clone()) else { return Ok(()) };
    let branch = info.branch.clone().unwrap_or_default();
    let project = project::identify_in(dir, Some(root.clone()));
    let now = crate::clock::now_us();
    let live: Vec<(String, String, crate::local::state::AgentSession)> = {
        let others = live_beside(ctx, &root, "", now);
        let mut seen = std::collections::HashSet::new();
        // Newest record first; a session that two records name (a resumed conversation)
        // counts once.
        ctx.state
            .recent(None, 200)
            .into_iter()
            .filter(|(_, _, r)| others.iter().any(|o| o.baton_session_id == r.baton_session_id))
            .filter(|(_, _, r)| seen.insert(r.baton_session_id.clone()))
            .collect()
    };
    if live.is_empty() {
        return Ok(());
    }
    // The agent's own process (the hook's parent or grandparent when it recorded them) above
    // this git: its shell call made the commit.
    let mine = host::pids();
    let by_call: Vec<_> = live
        .iter()
        .filter(|(_, _, r)| r.agent_pids.iter().take(2).any(|p| mine.contains(p)))
        .cloned()
        .collect();
    let (holders, made_by, ambiguous) = if by_call.is_empty() {
        let ambiguous = live.len() > 1;
        (live, CommitMadeBy::Person, ambiguous)
    } else {
        (by_call, CommitMadeBy::Agent, false)
    };
    let Some(d) = commits::describe(&root, std::slice::from_ref(&head)).map_err(anyhow::Error::msg)?.pop()
    else {
        return Ok(());
    };
    let mut links = Vec::new();
    let mut first = None;
    // The conversations' hooks will see the commit too (HEAD moved): an agent's call that
    // made it then claims it, which the hub keeps over a person's link.
    for (agent, _, record) in &holders {
        let kind = Agent::from_name(agent).map_or(0, |a| a.kind() as i32);
        let holder = Holder::of(record, kind);
        links.push(link(&d, &holder, made_by, CommitSeenBy::PostCommit, ambiguous, &branch));
        first.get_or_insert(holder);
    }
    let Some(holder) = first else { return Ok(()) };
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    send(ctx, hub.as_mut(), &project.key, &holder, links).await
}
