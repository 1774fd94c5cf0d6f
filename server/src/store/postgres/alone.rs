//! A write's changes as one statement, for a write its batch keeps alone
//! (`store::writer::Handover::send_alone`): a data-modifying CTE over the same bound
//! arguments as `baton_apply_lock` ($1–$20, `apply::arguments`), without the function's
//! subtransaction, since a failure then rolls back a batch that holds nothing else. This is
//! for `baton-bench`'s row "Baton/etcd, 1 client" (every write alone on its lane, as a
//! hook's write to an idle hub is): the PL/pgSQL call and its subtransaction cost Postgres
//! more than the statements they run.
//!
//! Only the parts a write has are in the statement (a part's table and indexes are opened
//! even for no rows), so its shape picks the text from the constants below; values are
//! always bound. A CTE's parts all see the rows as they were before the statement. Where
//! the function's order matters, a part reads the output of the one it must follow, which
//! then runs first: new memory entries after the deleted ones (an entry may keep its id),
//! a record's new search documents after its old ones are dropped. Shapes in which two
//! parts would touch the same row through the function's order (a session added and
//! written back by one write, search documents dropped by id or given a new text) keep the
//! function.

/// A part of the statement, in the function's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// A memory record's search documents (edits of op 2), found through its entries.
    DropRecordDocs,
    DeleteRecords,
    DeleteEntries,
    Evict,
    Entries,
    Versions,
    AddSessions,
    Checkpoints,
    PutSessions,
    Events,
    Conflicts,
    Request,
    Docs,
}

impl Part {
    /// The part's name in the statement and its text after `AS`, up to where a part it
    /// must follow would be waited for (`after`), and the rest.
    fn text(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::DropRecordDocs => ("drop_docs", DROP_RECORD_DOCS, ""),
            Self::DeleteRecords => ("deleted_records", DELETE_RECORDS, ""),
            Self::DeleteEntries => ("deleted_entries", DELETE_ENTRIES, ""),
            Self::Evict => ("evict", EVICT, ""),
            Self::Entries => ("entries", ENTRIES, ""),
            Self::Versions => ("versions", VERSIONS, ""),
            Self::AddSessions => ("added_sessions", ADD_SESSIONS, ""),
            Self::Checkpoints => ("checkpoints", CHECKPOINTS, ""),
            Self::PutSessions => ("put_sessions", PUT_SESSIONS, ""),
            Self::Events => ("events", EVENTS, ""),
            Self::Conflicts => ("conflicts", CONFLICTS, ""),
            Self::Request => ("request", REQUEST, ""),
            Self::Docs => ("docs", DOCS, DOCS_ON_CONFLICT),
        }
    }

    /// The parts that must have run before this one, if the write has them.
    fn after(self) -> &'static [Part] {
        match self {
            Self::Entries => &[Self::DeleteRecords, Self::DeleteEntries],
            Self::Docs => &[Self::DropRecordDocs],
            _ => &[],
        }
    }
}

/// The statement for a write with `parts` (in `Part`'s order), then the project's row.
pub(super) fn statement(parts: &[Part]) -> String {
    let mut sql = String::with_capacity(4096);
    for (i, &part) in parts.iter().enumerate() {
        let (name, head, tail) = part.text();
        sql.push_str(if i == 0 { "WITH " } else { ", " });
        sql.push_str(name);
        sql.push_str(" AS (");
        sql.push_str(head);
        let waits: Vec<&str> =
            part.after().iter().filter(|p| parts.contains(p)).map(|p| p.text().0).collect();
        for (j, wait) in waits.iter().enumerate() {
            sql.push_str(if j == 0 { " WHERE " } else { " AND " });
            sql.push_str("(SELECT count(*) FROM ");
            sql.push_str(wait);
            sql.push_str(") >= 0");
        }
        sql.push_str(tail);
        sql.push(')');
    }
    if !parts.is_empty() {
        sql.push(' ');
    }
    sql.push_str(PROJECT_ROW);
    sql
}

// The parts, each as `baton_apply_lock` writes it (the migration `apply_lock_in_one`). The
// parts that others wait for return a row per row they change.
const DROP_RECORD_DOCS: &str = "DELETE FROM search_docs d USING unnest($19) e, memory m WHERE e.op = 2 \
     AND m.project = $1 AND m.record = e.record AND d.project = $1 AND d.kind = 1 AND d.record_id = m.id \
     RETURNING 1";
const DELETE_RECORDS: &str = "DELETE FROM memory m USING unnest($6) r(record) WHERE m.project = $1 \
     AND m.record = r.record RETURNING 1";
const DELETE_ENTRIES: &str = "DELETE FROM memory WHERE project = $1 AND id = ANY($7) RETURNING 1";
// Not the entries deleted: in the function they are gone before this runs.
const EVICT: &str = "UPDATE memory SET evicted = TRUE WHERE project = $1 AND id = ANY($8) \
     AND record <> ALL($6) AND id <> ALL($7)";
const ENTRIES: &str = "INSERT INTO memory (id, project, category, branch, key, record, content, rationale, \
     author, revision, seq, created_us, evicted) SELECT e.id, $1, e.category, e.branch, e.key, e.record, \
     e.content, e.rationale, e.author, e.revision, e.seq, e.created_us, e.evicted FROM unnest($9) e";
const VERSIONS: &str = "INSERT INTO records (project, record, revision, written_us, author) \
     SELECT $1, v.record, v.revision, v.written_us, v.author FROM unnest($10) v \
     ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision, \
     written_us = excluded.written_us, author = excluded.author";
const ADD_SESSIONS: &str = "INSERT INTO sessions (id, project, agent, agent_session_id, host, user_name, \
     cwd, branch, goal, status, lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, \
     tool_count, resumed_from, resumed_by, metadata, created_us, updated_us, revision, written_us, author, \
     head_revision, head_written_us, head_author, start_revision) \
     SELECT s.id, $1, s.agent, s.agent_session_id, s.host, s.user_name, s.cwd, s.branch, s.goal, s.status, \
     s.lease_ttl_ms, s.last_seen_us, s.head_checkpoint_id, s.git_base, s.git_head, s.summary, s.tool_count, \
     s.resumed_from, s.resumed_by, s.metadata, s.created_us, s.updated_us, s.revision, s.written_us, \
     s.author, s.head_revision, s.head_written_us, s.head_author, s.revision FROM unnest($11) s";
const CHECKPOINTS: &str = "INSERT INTO checkpoints (id, session_id, project, parent_id, kind, reason, state, \
     payload, payload_content_type, compression, size_bytes, digest, state_digest, created_us, revision, \
     author, blobs) SELECT c.id, c.session_id, $1, c.parent_id, c.kind, c.reason, c.state, c.payload, \
     c.payload_content_type, c.compression, c.size_bytes, c.digest, c.state_digest, c.created_us, \
     c.revision, c.author, c.blobs FROM unnest($18) c";
// Liveness only forward: heartbeats move it without the project's lock.
const PUT_SESSIONS: &str = "UPDATE sessions t SET agent_session_id = s.agent_session_id, branch = s.branch, \
     goal = s.goal, status = s.status, last_seen_us = GREATEST(t.last_seen_us, s.last_seen_us), \
     head_checkpoint_id = s.head_checkpoint_id, git_head = s.git_head, summary = s.summary, \
     tool_count = GREATEST(t.tool_count, s.tool_count), resumed_by = s.resumed_by, metadata = s.metadata, \
     updated_us = s.updated_us, revision = s.revision, written_us = s.written_us, author = s.author, \
     head_revision = s.head_revision, head_written_us = s.head_written_us, head_author = s.head_author \
     FROM unnest($12) s WHERE t.id = s.id AND t.project = $1";
const EVENTS: &str = "INSERT INTO events (project, revision, kind, body) SELECT $1, e.revision, e.kind, e.body FROM unnest($13) e";
const CONFLICTS: &str = "INSERT INTO conflicts (id, project, revision, body) SELECT c.id, $1, c.revision, c.body FROM unnest($14) c";
const REQUEST: &str = "INSERT INTO requests (project, request_id, request_hash, reply, created_us) \
     VALUES ($1, $15, $16, $17, $3)";
const DOCS: &str = "INSERT INTO search_docs AS t (project, kind, record_id, record, session_id, branch, \
     author, created_us, revision, body, words) SELECT $1, d.kind, d.record_id, d.record, d.session_id, \
     d.branch, d.author, d.created_us, d.revision, d.body, d.words::tsvector FROM unnest($20) d";
const DOCS_ON_CONFLICT: &str = " ON CONFLICT (project, kind, record_id) DO UPDATE SET record = excluded.record, \
     session_id = excluded.session_id, branch = excluded.branch, author = excluded.author, \
     revision = excluded.revision, body = excluded.body, words = excluded.words \
     WHERE t.body <> excluded.body OR t.branch <> excluded.branch OR t.author <> excluded.author";
const PROJECT_ROW: &str = "UPDATE projects SET head_revision = GREATEST(head_revision, $2), \
     last_write_us = GREATEST(last_write_us, $3), memory_revision = COALESCE($4, memory_revision), \
     memory_caps = COALESCE($5, memory_caps) WHERE key = $1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_waits_only_for_the_parts_the_write_has() {
        let sql = statement(&[Part::DeleteRecords, Part::Entries, Part::Events]);
        assert!(sql.starts_with("WITH deleted_records AS (DELETE FROM memory"), "{sql}");
        assert!(
            sql.contains("FROM unnest($9) e WHERE (SELECT count(*) FROM deleted_records) >= 0)"),
            "{sql}"
        );
        assert!(!sql.contains("deleted_entries"), "{sql}");
        assert!(sql.ends_with("WHERE key = $1"), "{sql}");

        let sql = statement(&[Part::DropRecordDocs, Part::Docs]);
        assert!(
            sql.contains("FROM unnest($20) d WHERE (SELECT count(*) FROM drop_docs) >= 0 ON CONFLICT"),
            "{sql}"
        );
        let sql = statement(&[Part::Docs]);
        assert!(sql.contains("FROM unnest($20) d ON CONFLICT"), "{sql}");
    }

    #[test]
    fn no_parts_is_the_project_row_alone() {
        assert_eq!(statement(&[]), PROJECT_ROW);
    }
}
