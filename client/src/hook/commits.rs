//! Commits seen by the hooks: HEAD read before and after the agent's calls and at every
//! checkpoint (without a `git` process in the plain layout, `git::info`). A move across a
//! call that can commit (a shell command, a git tool) is the agent's; a move between calls
//! is the person's, linked ambiguously when other conversations are live in the same
//! worktree (a later agent's claim drops those links on the hub). `usecase::commits` makes
//! and sends the links.

use baton_proto::v1::{CommitMadeBy, CommitSeenBy};

use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::project::{Project, git};
use crate::usecase::commits::{self, Holder, Move};

/// Whether a call may commit: a shell command, or a tool of git's.
fn can_commit(p: &Payload) -> bool {
    p.shell_command().is_some()
        || p.tool_name.as_deref().is_some_and(|t| {
            let t = t.to_ascii_lowercase();
            t.contains("git") || t.contains("commit")
        })
}

/// At a conversation's start (new, resumed or compacted): HEAD as it is now is where its
/// work starts; what moved HEAD while it was not running was not its work.
pub(super) fn start(ctx: &Ctx, agent: Agent, p: &Payload, info: &git::Info) {
    let sid = p.agent_session_id().unwrap_or("unknown");
    let head = info.head.clone().unwrap_or_default();
    let branch = info.branch.clone().unwrap_or_default();
    // A new conversation's record notes HEAD as it is made (`session::remember`).
    if ctx.state.get(agent.name(), sid).is_some_and(|r| r.head_seen == head && r.head_branch == branch) {
        return;
    }
    let now = crate::clock::now_us();
    let looked = ctx.state.update(agent.name(), sid, |s| {
        s.head_seen.clone_from(&head);
        s.head_branch.clone_from(&branch);
        s.head_seen_us = now;
        s.pre_head.clear();
        s.hook_us = now;
    });
    if let Err(e) = looked {
        log(ctx, &format!("{} commits: cannot note HEAD at the start: {e:#}", agent.name()));
    }
}

/// Before a call that may commit: HEAD moved since the conversation last looked means the
/// person committed in between; kept for the hook after the call.
pub(super) fn before_call(ctx: &Ctx, agent: Agent, p: &Payload) {
    if !can_commit(p) {
        return;
    }
    let sid = p.agent_session_id().unwrap_or("unknown");
    let Some(record) = ctx.state.get(agent.name(), sid) else { return };
    if record.head_seen.is_empty() {
        return;
    }
    let Some(head) = git::info(&p.cwd()).head else { return };
    if head != record.head_seen && head != record.pre_head {
        let _ = ctx.state.update(agent.name(), sid, |s| s.pre_head = head);
    }
}

/// After a call (`call`) or at another hook: links the commits HEAD moved to since the
/// conversation last looked. Never fails the hook: problems are logged.
pub(super) async fn after(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    hub: Option<&mut Hub>,
    project: &Project,
    call: bool,
) {
    let info = git::info(&p.cwd());
    let (Some(head), Some(root)) = (info.head, info.toplevel) else { return };
    let branch = info.branch.unwrap_or_default();
    let sid = p.agent_session_id().unwrap_or("unknown");
    // Most calls commit nothing: then the record is read, not written (hook-bench's
    // PostToolUse row).
    let unmoved = ctx
        .state
        .get(agent.name(), sid)
        .is_some_and(|r| r.head_seen == head && r.pre_head.is_empty() && r.head_branch == branch);
    if unmoved {
        return;
    }
    let agent_call = call && can_commit(p);
    let now = crate::clock::now_us();
    let seen = ctx.state.update(agent.name(), sid, |s| {
        s.hook_us = now;
        let mut moves = Vec::new();
        if s.head_seen.is_empty() {
            // The conversation's first look: what came before is not its work.
            s.head_seen.clone_from(&head);
            s.head_branch.clone_from(&branch);
            s.head_seen_us = now;
            return (moves, None);
        }
        let pre = std::mem::take(&mut s.pre_head);
        let mut from = s.head_seen.clone();
        let since = s.head_seen_us;
        let branch_changed = s.head_branch != branch;
        if !pre.is_empty() && pre != from {
            moves.push(Move {
                from: from.clone(),
                to: pre.clone(),
                made_by: CommitMadeBy::Person,
                seen_by: CommitSeenBy::BetweenHooks,
                branch_changed,
                since_us: since,
            });
            from = pre;
        }
        if from != head {
            let (made_by, seen_by) = if agent_call {
                (CommitMadeBy::Agent, CommitSeenBy::ToolCall)
            } else {
                (CommitMadeBy::Person, CommitSeenBy::BetweenHooks)
            };
            moves.push(Move { from, to: head.clone(), made_by, seen_by, branch_changed, since_us: since });
        }
        if s.head_seen != head {
            s.head_seen.clone_from(&head);
            s.head_seen_us = now;
        }
        s.head_branch.clone_from(&branch);
        let holder = (!moves.is_empty()).then(|| Holder::of(s, agent.kind() as i32));
        (moves, holder)
    });
    let (moves, holder) = match seen {
        Ok((moves, Some(holder))) if !moves.is_empty() => (moves, holder),
        Ok(_) => return,
        Err(e) => {
            log(ctx, &format!("{} commits: cannot read the conversation's record: {e:#}", agent.name()));
            return;
        }
    };
    let mut links = Vec::new();
    for mv in &moves {
        let ambiguous = mv.made_by == CommitMadeBy::Person
            && !commits::live_beside(ctx, &root, &holder.session_id, now).is_empty();
        for d in commits::moved(&root, mv) {
            links.push(commits::link(&d, &holder, mv.made_by, mv.seen_by, ambiguous, &branch));
        }
    }
    if links.is_empty() {
        return;
    }
    // A hook without a connection of its own (a known conversation's PostToolUse) makes one
    // only when there is something to send.
    let mut own =
        if hub.is_none() { remote::connect(&ctx.settings, Timeouts::HOOK).await.ok() } else { None };
    let hub = hub.or(own.as_mut());
    if let Err(e) = commits::send(ctx, hub, &project.key, &holder, links).await {
        log(ctx, &format!("{} commits: not recorded: {e:#}", agent.name()));
    }
}
