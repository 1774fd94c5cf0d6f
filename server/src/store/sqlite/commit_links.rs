//! Commit links on SQLite: the statements of `model::CommitChange`, sent with the write's
//! other changes (values bound in the order their `?` appear).

use super::write::Statements;
use crate::store::model::CommitChange;

/// Binds: project, then `Link`'s columns.
const PUT: &str = "INSERT INTO commit_links (project, commit_id, session_id, checkpoint_id, patch_id, made_by, \
     seen_by, ambiguous, branch, subject, committed_us, files, prompt, task, lines, lines_truncated, created_us, \
     revision, author) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
     ON CONFLICT (project, commit_id, session_id) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, \
     patch_id = excluded.patch_id, made_by = excluded.made_by, seen_by = excluded.seen_by, \
     ambiguous = excluded.ambiguous, branch = excluded.branch, subject = excluded.subject, \
     committed_us = excluded.committed_us, files = excluded.files, prompt = excluded.prompt, task = excluded.task, \
     lines = excluded.lines, lines_truncated = excluded.lines_truncated, revision = excluded.revision, \
     author = excluded.author";
/// Binds: project, commit, session, the fingerprints as a JSON array.
const LINES: &str = "INSERT OR IGNORE INTO commit_lines (project, fingerprint, commit_id, session_id) \
     SELECT ?, value, ?, ? FROM json_each(?)";
/// Binds: project, commit, session.
const REMOVE: &str = "DELETE FROM commit_links WHERE project = ? AND commit_id = ? AND session_id = ?";
const REMOVE_LINES: &str = "DELETE FROM commit_lines WHERE project = ? AND commit_id = ? AND session_id = ?";

/// The statements of a commit link change.
pub(super) fn push(query: &mut Statements, project: &str, change: &CommitChange) {
    match change {
        CommitChange::Put(links) => {
            for (l, lines) in links {
                query.push(PUT).bind(project).bind(l.commit_id.as_str()).bind(l.session_id.as_str());
                query.bind(l.checkpoint_id.as_str()).bind(l.patch_id.as_str()).bind(l.made_by);
                query.bind(l.seen_by).bind(l.ambiguous).bind(l.branch.as_str()).bind(l.subject.as_str());
                query
                    .bind(l.committed_us)
                    .bind(l.files.as_str())
                    .bind(l.prompt.as_str())
                    .bind(l.task.as_str());
                query.bind(l.lines).bind(l.lines_truncated).bind(l.created_us).bind(l.revision);
                query.bind(l.author.as_slice());
                if !lines.is_empty() {
                    // A list of strings always serializes.
                    let json = serde_json::to_string(lines).unwrap_or_default();
                    query.push(LINES).bind(project).bind(l.commit_id.as_str()).bind(l.session_id.as_str());
                    query.bind(json);
                }
            }
        }
        CommitChange::Remove(keys) => {
            for (commit, session) in keys {
                query.push(REMOVE).bind(project).bind(commit.as_str()).bind(session.as_str());
                query.push(REMOVE_LINES).bind(project).bind(commit.as_str()).bind(session.as_str());
            }
        }
    }
}
