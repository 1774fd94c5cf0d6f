//! Commit links on Postgres: the statements of `model::CommitChange`, run one by one before
//! the write function (`write.rs`).

use sqlx::{PgConnection, Postgres};

use crate::store::model::CommitChange;

/// $1 project, then `Link`'s columns.
const PUT: &str = "INSERT INTO commit_links (project, commit_id, session_id, checkpoint_id, patch_id, made_by, \
     seen_by, ambiguous, branch, subject, committed_us, files, prompt, task, lines, lines_truncated, created_us, \
     revision, author) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19) ON CONFLICT (project, commit_id, session_id) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, \
     patch_id = excluded.patch_id, made_by = excluded.made_by, seen_by = excluded.seen_by, \
     ambiguous = excluded.ambiguous, branch = excluded.branch, subject = excluded.subject, \
     committed_us = excluded.committed_us, files = excluded.files, prompt = excluded.prompt, task = excluded.task, \
     lines = excluded.lines, lines_truncated = excluded.lines_truncated, revision = excluded.revision, \
     author = excluded.author";
/// $1 project, $2 commit, $3 session, $4 the fingerprints.
const LINES: &str = "INSERT INTO commit_lines (project, fingerprint, commit_id, session_id) \
     SELECT $1, f, $2, $3 FROM UNNEST(CAST($4 AS TEXT[])) AS f ON CONFLICT DO NOTHING";
/// $1 project, $2 commit, $3 session.
const REMOVE: &str = "DELETE FROM commit_links WHERE project = $1 AND commit_id = $2 AND session_id = $3";
const REMOVE_LINES: &str =
    "DELETE FROM commit_lines WHERE project = $1 AND commit_id = $2 AND session_id = $3";

/// Runs the statements of a commit link change.
pub(super) async fn run(
    conn: &mut PgConnection,
    project: &str,
    change: CommitChange,
) -> Result<(), sqlx::Error> {
    let query = |sql: &'static str| sqlx::query::<Postgres>(sql).bind(project.to_owned());
    match change {
        CommitChange::Put(links) => {
            for (l, lines) in links {
                let q = query(PUT).bind(l.commit_id.clone()).bind(l.session_id.clone()).bind(l.checkpoint_id);
                let q = q.bind(l.patch_id).bind(l.made_by).bind(l.seen_by).bind(l.ambiguous).bind(l.branch);
                let q = q.bind(l.subject).bind(l.committed_us).bind(l.files).bind(l.prompt).bind(l.task);
                let q = q.bind(l.lines).bind(l.lines_truncated).bind(l.created_us).bind(l.revision);
                q.bind(l.author).execute(&mut *conn).await?;
                if !lines.is_empty() {
                    let q = query(LINES).bind(l.commit_id).bind(l.session_id).bind(lines);
                    q.execute(&mut *conn).await?;
                }
            }
        }
        CommitChange::Remove(keys) => {
            for (commit, session) in keys {
                query(REMOVE).bind(commit.clone()).bind(session.clone()).execute(&mut *conn).await?;
                query(REMOVE_LINES).bind(commit).bind(session).execute(&mut *conn).await?;
            }
        }
    }
    Ok(())
}
