//! Commit links as the client records them: the commits a move of HEAD added, described by
//! git (`project::git::commits`), linked to the session that was working, and sent like any
//! write (queued when the hub is down). The hooks (`hook::commits`) and git's post-commit
//! hook (`cmd::postcommit`) say which moves they saw and who made them.

use std::path::Path;

use baton_proto::v1::{CommitLink, CommitMadeBy, CommitSeenBy, NewCommitLink, RecordCommitsRequest};
use prost::Message as _;

use crate::ctx::Ctx;
use crate::hub::remote::Hub;
use crate::local::state::AgentSession;
use crate::outbox::write::{self, LOCK_WAIT, Write};
use crate::project::git::commits::{self, Described};

/// Links in one RecordCommits, at most (the hub's cap), and its size, about.
const BATCH: usize = 100;
const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// A conversation whose hooks ran this recently is live beside another.
const LIVE_US: i64 = 30 * 60 * 1_000_000;

/// A move of HEAD a hook saw.
#[derive(Debug, Clone)]
pub struct Move {
    pub from: String,
    pub to: String,
    pub made_by: CommitMadeBy,
    pub seen_by: CommitSeenBy,
    /// HEAD's branch changed too: only a branch that grew from `from`, by this user's
    /// commits, is work (else it is a checkout of someone's branch).
    pub branch_changed: bool,
    /// When `from` became HEAD: commits older than that came from elsewhere.
    pub since_us: i64,
}

/// What the session was doing, for its links.
#[derive(Debug, Clone, Default)]
pub struct Holder {
    pub session_id: String,
    pub agent: i32,
    pub checkpoint_id: String,
    pub prompt: String,
    pub task: String,
}

impl Holder {
    pub fn of(record: &AgentSession, agent: i32) -> Self {
        let task = record.journal.tasks.iter().find(|t| t.status == "in_progress").map(|t| t.content.clone());
        Self {
            session_id: record.baton_session_id.clone(),
            agent,
            checkpoint_id: record.last_checkpoint_id.clone(),
            // The hub's limits are bytes (4,000 and 1,000): the cut leaves room for its mark.
            prompt: crate::text::clip_bytes(&record.journal.last_prompt, 4000),
            task: crate::text::clip_bytes(&crate::safe::line(&task.unwrap_or_default()), 1000),
        }
    }
}

/// The commits a move added, described; none when it is not new work. Only this
/// repository's committer's (`user.email`) are: a pull or a merge brings others' commits,
/// newer ones too. Without a `user.email` that cannot be told, and a move that also changed
/// the branch (a checkout of someone's branch, maybe) is left alone.
pub fn moved(root: &Path, mv: &Move) -> Vec<Described> {
    if mv.branch_changed && !commits::is_ancestor(root, &mv.from, &mv.to) {
        return Vec::new();
    }
    let own = commits::own_email(root);
    if own.is_none() && mv.branch_changed {
        return Vec::new();
    }
    let Some(ids) = commits::added(root, &mv.from, &mv.to, mv.since_us, own.as_deref()) else {
        return Vec::new();
    };
    commits::describe(root, &ids).unwrap_or_default()
}

/// A commit's link to a session.
pub fn link(
    d: &Described,
    holder: &Holder,
    made_by: CommitMadeBy,
    seen_by: CommitSeenBy,
    ambiguous: bool,
    branch: &str,
) -> NewCommitLink {
    NewCommitLink {
        link: Some(CommitLink {
            commit_id: d.id.clone(),
            session_id: holder.session_id.clone(),
            checkpoint_id: holder.checkpoint_id.clone(),
            patch_id: d.patch_id.clone(),
            made_by: made_by as i32,
            seen_by: seen_by as i32,
            ambiguous,
            branch: branch.to_owned(),
            subject: crate::text::clip_bytes(&crate::safe::line(&d.subject), 1000),
            committed_at: Some(prost_types::Timestamp { seconds: d.committed_us / 1_000_000, nanos: 0 }),
            files: d.files.clone(),
            prompt: holder.prompt.clone(),
            task: holder.task.clone(),
            ..Default::default()
        }),
        line_fingerprints: d.fingerprints.clone(),
        lines_truncated: d.truncated,
    }
}

/// The other conversations live in the worktree at `root` (their hooks ran in the last half
/// hour and they have not ended), with their sessions: a commit none of their calls made
/// may be any of theirs.
pub fn live_beside(ctx: &Ctx, root: &Path, session_id: &str, now_us: i64) -> Vec<AgentSession> {
    let root = root.display().to_string();
    ctx.state
        .recent(None, 200)
        .into_iter()
        .map(|(_, _, r)| r)
        .filter(|r| {
            !r.ended
                && !r.baton_session_id.is_empty()
                && r.baton_session_id != session_id
                && r.root == root
                && now_us - r.hook_us.max(r.last_beat_us).max(r.last_checkpoint_us) < LIVE_US
        })
        .collect()
}

/// Sends links, a batch at a time (queued when the hub is down or older writes wait).
pub async fn send(
    ctx: &Ctx,
    mut hub: Option<&mut Hub>,
    project: &str,
    holder: &Holder,
    links: Vec<NewCommitLink>,
) -> anyhow::Result<()> {
    let mut batch: Vec<NewCommitLink> = Vec::new();
    let mut bytes = 0;
    let mut batches = Vec::new();
    for l in links {
        let size = l.encoded_len();
        if !batch.is_empty() && (batch.len() >= BATCH || bytes + size > BATCH_BYTES) {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += size;
        batch.push(l);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    for links in batches {
        let request = RecordCommitsRequest {
            project: project.to_owned(),
            links,
            write: write::options(holder.agent, &holder.session_id),
        };
        write::submit(&ctx.queue, hub.as_deref_mut(), Write::RecordCommits(request), Some(LOCK_WAIT)).await?;
    }
    Ok(())
}
