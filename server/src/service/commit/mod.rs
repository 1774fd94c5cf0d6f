//! CommitService: links from git commits to the sessions that made them. RecordCommits is a
//! write like any other (`write::run`): a revision, an EVENT_KIND_COMMITS_CHANGED event
//! with the links it stored, idempotency by request id; `core::commit` decides how a link
//! meets the stored ones. FindCommits and ListCommits read.

mod expire;
mod find;
mod list;
mod record;

pub use expire::expire;
pub use find::{Asked, find};
pub use list::list;
pub use record::record;

use baton_proto::v1::CommitLink;

use crate::core::commit::Link;
use crate::core::time::ts;
use crate::store::rows::decode_actor;

/// A link as replies show it.
pub(crate) fn link_message(l: &Link) -> CommitLink {
    CommitLink {
        commit_id: l.commit_id.clone(),
        session_id: l.session_id.clone(),
        checkpoint_id: l.checkpoint_id.clone(),
        patch_id: l.patch_id.clone(),
        made_by: i32::try_from(l.made_by).unwrap_or_default(),
        seen_by: i32::try_from(l.seen_by).unwrap_or_default(),
        ambiguous: l.ambiguous != 0,
        branch: l.branch.clone(),
        subject: l.subject.clone(),
        committed_at: Some(ts(l.committed_us)),
        files: l.file_list(),
        prompt: l.prompt.clone(),
        task: l.task.clone(),
        lines: i32::try_from(l.lines).unwrap_or(i32::MAX),
        lines_truncated: l.lines_truncated != 0,
        revision: l.revision,
        recorded_at: Some(ts(l.created_us)),
        author: Some(decode_actor(&l.author)),
    }
}
