//! The SQL of SQLite writes. Values are bound in the order their `?` appear; several of
//! these may be sent as one query (`;`-separated), the values of each in turn.

use crate::store::rows::{checkpoint_columns, entry_columns, session_columns};

/// µs since the epoch by the database clock.
macro_rules! now_us {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
    };
}

/// A project's row, made on its first write (then read by `LOCK`). Binds: project.
pub const CREATE_PROJECT: &str = concat!(
    "INSERT INTO projects (key, head_revision, last_write_us, created_us, memory_revision) VALUES (?, 0, ",
    now_us!(),
    ", ",
    now_us!(),
    ", 0) ON CONFLICT (key) DO NOTHING"
);

/// The project lock, which changes nothing: the writer holds the database's write lock
/// (`BEGIN IMMEDIATE`). Reads the write's revision, its time (never earlier than the
/// project's previous write) and memory caps, and an earlier reply to the request id.
/// Binds: project, request id, project, request id, project.
pub const LOCK: &str = concat!(
    "SELECT head_revision + 1 AS head_revision, MAX(last_write_us, ",
    now_us!(),
    ") AS last_write_us, memory_caps, ",
    "(SELECT request_hash FROM requests WHERE project = ? AND request_id = ?) AS request_hash, ",
    "(SELECT reply FROM requests WHERE project = ? AND request_id = ?) AS reply ",
    "FROM projects WHERE key = ?"
);

/// What a kept write records on its project: its head, time and, for a write that may
/// have changed memory, its revision as the project's `memory_revision` (which tells briefs
/// that a cached memory section is out of date).
/// Binds: head, time, memory revision (NULL: unchanged), project.
pub const SET_PROJECT: &str = "UPDATE projects SET head_revision = ?, last_write_us = MAX(last_write_us, ?), \
     memory_revision = COALESCE(?, memory_revision) WHERE key = ?";

/// A memory record's LWW version (NULL columns if never written) and its live entries in
/// order (NULL entry columns if none), one row per entry.
/// Binds: project, record, project, record.
pub const RECORD_STATE: &str = "SELECT r.revision AS record_revision, r.written_us AS record_written_us, \
     r.author AS record_author, m.id AS m_id, m.category AS m_category, m.branch AS m_branch, \
     m.key AS m_key, m.content AS m_content, m.rationale AS m_rationale, m.author AS m_author, \
     m.revision AS m_revision, m.seq AS m_seq, m.created_us AS m_created_us FROM (SELECT 1 AS one) k \
     LEFT JOIN records r ON r.project = ? AND r.record = ? \
     LEFT JOIN memory m ON m.project = ? AND m.record = ? AND m.evicted = FALSE \
     ORDER BY m.revision, m.seq";

/// A record's entries in order. Binds: project, record, include evicted.
pub const RECORD_ENTRIES: &str = concat!(
    entry_columns!(),
    " WHERE m.project = ? AND m.record = ? AND (m.evicted = FALSE OR ?) ORDER BY m.revision, m.seq"
);

/// One entry. Binds: id, project.
pub const ENTRY: &str = concat!(entry_columns!(), " WHERE m.id = ? AND m.project = ?");

/// Binds: project, record.
pub const DELETE_RECORD: &str = "DELETE FROM memory WHERE project = ? AND record = ?";

/// Binds: project, id.
pub const DELETE_ENTRY: &str = "DELETE FROM memory WHERE project = ? AND id = ?";

/// Binds: project, id.
pub const EVICT_ENTRY: &str = "UPDATE memory SET evicted = TRUE WHERE project = ? AND id = ?";

/// Binds: the columns in order.
pub const INSERT_ENTRY: &str = "INSERT INTO memory (id, project, category, branch, key, record, content, \
     rationale, author, revision, seq, created_us, evicted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Binds: project, record, revision, written_us, author.
pub const PUT_RECORD_VERSION: &str = "INSERT INTO records (project, record, revision, written_us, author) \
     VALUES (?, ?, ?, ?, ?) ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision, \
     written_us = excluded.written_us, author = excluded.author";

/// Binds: caps, project.
pub const SET_MEMORY_CAPS: &str = "UPDATE projects SET memory_caps = ? WHERE key = ?";

/// Binds: project, revision, kind, body.
pub const INSERT_EVENT: &str = "INSERT INTO events (project, revision, kind, body) VALUES (?, ?, ?, ?)";

/// Binds: id, project, revision, body.
pub const INSERT_CONFLICT: &str = "INSERT INTO conflicts (id, project, revision, body) VALUES (?, ?, ?, ?)";

/// Binds: project, request id, request hash, reply, created_us.
pub const INSERT_REQUEST: &str =
    "INSERT INTO requests (project, request_id, request_hash, reply, created_us) VALUES (?, ?, ?, ?, ?)";

/// One session of a project. Binds: id, project.
pub const SESSION: &str =
    concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = ? AND project = ?");

/// Binds: the columns in order (the start revision last).
pub const INSERT_SESSION: &str = concat!(
    "INSERT INTO sessions (",
    session_columns!(),
    ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
);

/// Every column a write may change; liveness only forward (heartbeats move it without the
/// project lock). Binds: agent_session_id, branch, goal, status, last_seen_us,
/// head_checkpoint_id, git_head, summary, tool_count, resumed_by, metadata, updated_us,
/// revision, written_us, author, head_revision, head_written_us, head_author, id, project.
pub const PUT_SESSION: &str = "UPDATE sessions SET agent_session_id = ?, branch = ?, goal = ?, status = ?, \
     last_seen_us = MAX(last_seen_us, ?), head_checkpoint_id = ?, git_head = ?, summary = ?, \
     tool_count = MAX(tool_count, ?), resumed_by = ?, metadata = ?, updated_us = ?, revision = ?, written_us = ?, \
     author = ?, head_revision = ?, head_written_us = ?, head_author = ? WHERE id = ? AND project = ?";

/// The session of one of the project's checkpoints. Binds: project, checkpoint id,
/// project.
pub const CHECKPOINT_SESSION: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE project = ? AND id = (SELECT session_id FROM checkpoints WHERE id = ? AND project = ?)"
);

/// The project's most recently updated session of each status a resume may take over, one
/// index range each. The statuses are written into the text, so that each is planned on
/// its own. Binds: project, project, project.
pub static LATEST_ENDED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    use baton_proto::v1::SessionStatus::{Completed, Crashed, Idle};
    let latest = [Crashed, Idle, Completed].map(|status| {
        format!(
            "SELECT * FROM (SELECT {} FROM sessions WHERE project = ? AND status = {} AND thread_key IS NULL \
             ORDER BY updated_us DESC, id DESC LIMIT 1)",
            session_columns!(),
            status as i32
        )
    });
    latest.join(" UNION ALL ")
});

/// One checkpoint of a project, with its state and payload. Binds: id, project.
pub const CHECKPOINT: &str =
    concat!("SELECT ", checkpoint_columns!(), " FROM checkpoints WHERE id = ? AND project = ?");

/// Binds: the columns in order (`checkpoint_columns!`).
pub static INSERT_CHECKPOINT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns = checkpoint_columns!();
    let values = vec!["?"; columns.split(',').count()].join(", ");
    format!("INSERT INTO checkpoints ({columns}) VALUES ({values})")
});

/// The project and session of a checkpoint of any project. Binds: id.
pub const CHECKPOINT_OWNER: &str = "SELECT project, session_id FROM checkpoints WHERE id = ?";

/// Whether any project has a session of this id.
pub const SESSION_TAKEN: &str = "SELECT 1 FROM sessions WHERE id = ?";

/// The digests of a JSON array (in order) the project has no chunk for. Binds: the array,
/// project.
pub const MISSING_CHUNKS: &str = "SELECT d.value FROM json_each(?) d WHERE NOT EXISTS \
     (SELECT 1 FROM chunks c WHERE c.project = ? AND c.digest = d.value) ORDER BY d.key";

/// `Engine::TOUCH_SESSION`.
pub const TOUCH_SESSION: &str = concat!(
    "UPDATE sessions SET last_seen_us = ",
    now_us!(),
    ", tool_count = MAX(tool_count, $2) WHERE id = $1 AND status = COALESCE($3, status) ",
    "AND project = COALESCE($4, project) RETURNING status, last_seen_us"
);

/// `Engine::EXPIRED_SESSIONS`.
pub const EXPIRED_SESSIONS: &str = concat!(
    "SELECT id, project, status, last_seen_us FROM sessions WHERE status IN ($1, $2, $3) AND (",
    "(lease_ttl_ms > 0 AND last_seen_us + lease_ttl_ms * 1000 < ",
    now_us!(),
    ") OR (lease_ttl_ms = 0 AND status = $4 AND last_seen_us + $5 < ",
    now_us!(),
    ")) LIMIT 500"
);

/// The database clock, for the brief (`store::brief`).
pub const NOW_US: &str = now_us!();

/// A search document, added or replaced when its text or branch changed (values in the
/// order of the columns).
pub const INDEX_PUT: &str = "INSERT INTO search_docs (project, kind, record_id, record, session_id, branch, \
     author, created_us, revision, body, words) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
     ON CONFLICT (project, kind, record_id) DO UPDATE SET record = excluded.record, \
     session_id = excluded.session_id, branch = excluded.branch, author = excluded.author, \
     revision = excluded.revision, body = excluded.body, words = excluded.words \
     WHERE search_docs.body <> excluded.body OR search_docs.branch <> excluded.branch \
     OR search_docs.author <> excluded.author";

/// A search document's text, as masked by a purge. Body, words, project, kind, record id.
pub const INDEX_RETEXT: &str =
    "UPDATE search_docs SET body = ?, words = ? WHERE project = ? AND kind = ? AND record_id = ?";

/// Drops a search document. Project, kind, record id.
pub const INDEX_DROP: &str = "DELETE FROM search_docs WHERE project = ? AND kind = ? AND record_id = ?";

/// Drops the search documents of a memory record's entries, found through the entries.
/// Project, project, record (plain `?`s: in a query of several statements, sqlx takes `?N`
/// as the query's Nth value, not the statement's).
pub const INDEX_DROP_RECORD: &str = "DELETE FROM search_docs WHERE project = ? AND kind = 1 \
     AND record_id IN (SELECT id FROM memory WHERE project = ? AND record = ?)";

/// A search's candidates (`model::SearchQuery`, values numbered in its field order; ?1's
/// words carry the project's prefix, `search::project_prefix`, so FTS5 reads the project's
/// lists only): the newest `search::RANKED` of its matches that pass the filters, with
/// their bm25 (`core::search::rank` orders them). `CROSS JOIN` keeps FTS5 the outer loop,
/// walking its matches newest first until enough pass: without it SQLite walks the
/// project's documents and runs the full-text query once per document (the rare-term row of
/// `baton-bench`, docs/performance.md). The candidates come back as
/// one JSON array of `[id, kind, session_id, created_us, score]`: one row instead of a
/// thousand, as each row costs a hand-off from the connection's thread (the 1% row).
pub const SEARCH: &str = "SELECT json_group_array(json_array(id, kind, session_id, created_us, score)) FROM \
     (SELECT d.id, d.kind, d.session_id, d.created_us, -bm25(search_fts) AS score \
     FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid \
     WHERE search_fts MATCH ?1 AND search_fts.rowid <= ?10 AND d.project = ?2 \
     AND (?3 = 0 OR ((?3 >> d.kind) & 1) = 1) \
     AND (?4 = '' OR d.session_id = ?4) AND (?5 = '' OR d.branch = ?5) AND (?6 = '' OR d.author = ?6) \
     AND d.created_us >= ?7 AND d.created_us < ?8 AND d.revision <= ?9 \
     ORDER BY search_fts.rowid DESC LIMIT ?11)";

/// Search documents by id (a JSON array), for a page of hits.
pub const SEARCH_ROWS: &str = "SELECT id, kind, record_id, session_id, branch, author, created_us, revision, body \
     FROM search_docs WHERE id IN (SELECT value FROM json_each(?))";

/// What a search starts from: the project's head revision (a bound of the first page that
/// later pages keep), and whether the project's records from before search are still being
/// indexed. ?1 project.
pub const SEARCH_HEAD: &str = "SELECT COALESCE((SELECT head_revision FROM projects WHERE key = ?1), 0), \
     EXISTS (SELECT 1 FROM search_backfill WHERE project = ?1)";

/// A thread's pending write, replacing any stored under its key (the service decides which
/// to write). Binds: checkpoint id, task id, idx, project, channel, task path, value type,
/// value, revision.
pub const PUT_WRITE: &str = "INSERT INTO pending_writes (checkpoint_id, task_id, idx, project, channel, task_path, \
     value_type, value, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (checkpoint_id, task_id, idx) \
     DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path, value_type = excluded.value_type, \
     value = excluded.value, revision = excluded.revision";

/// `Engine::SHARE_PROJECT`: nothing to take, the writer runs a renewal between writes.
pub const SHARE_PROJECT: &str = "SELECT 1 FROM projects WHERE key = $1";

/// `Engine::RENEW_RESERVATIONS`.
pub const RENEW_RESERVATIONS: &str = concat!(
    "UPDATE reservations SET expires_us = ",
    now_us!(),
    " + $3 WHERE project = $1 AND session_id = $2 AND status = 2 AND expires_us > ",
    now_us!(),
    " RETURNING ",
    crate::store::reservations::reservation_columns!()
);
