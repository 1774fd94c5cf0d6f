//! The SQL of Postgres writes: one statement each, every value a bound parameter. A write
//! is its lock with its first read and its changes, both through the write function
//! (`apply.rs`), and the reads it makes besides, which are here.

use crate::store::rows::{checkpoint_columns, entry_columns, session_columns};

/// A memory record's state as `RecordStateRow`'s columns, from `records r` and `memory m`.
macro_rules! record_state_columns {
    () => {
        "r.revision AS record_revision, r.written_us AS record_written_us, r.author AS record_author, \
         m.id AS m_id, m.category AS m_category, m.branch AS m_branch, m.key AS m_key, m.content AS m_content, \
         m.rationale AS m_rationale, m.author AS m_author, m.revision AS m_revision, m.seq AS m_seq, \
         m.created_us AS m_created_us"
    };
}
pub(super) use record_state_columns;

/// A memory record's LWW version (NULL columns if never written) and its live entries in
/// order (NULL entry columns if none), one row per entry. $1 project, $2 record.
pub const RECORD_STATE: &str = concat!(
    "SELECT ",
    record_state_columns!(),
    " FROM (SELECT 1 AS one) k LEFT JOIN records r ON r.project = $1 AND r.record = $2 \
     LEFT JOIN memory m ON m.project = $1 AND m.record = $2 AND m.evicted = FALSE ORDER BY m.revision, m.seq"
);

/// A record's entries in order. $1 project, $2 record, $3 include evicted.
pub const RECORD_ENTRIES: &str = concat!(
    entry_columns!(),
    " WHERE m.project = $1 AND m.record = $2 AND (m.evicted = FALSE OR $3) ORDER BY m.revision, m.seq"
);

/// One entry. $1 id, $2 project.
pub const ENTRY: &str = concat!(entry_columns!(), " WHERE m.id = $1 AND m.project = $2");

/// One session of a project. $1 id, $2 project.
pub const SESSION: &str =
    concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = $1 AND project = $2");

/// The session of one of the project's checkpoints. $1 project, $2 checkpoint id.
pub const CHECKPOINT_SESSION: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE project = $1 AND id = (SELECT session_id FROM checkpoints WHERE id = $2 AND project = $1)"
);

/// The project's most recently updated session of each status a resume may take over, one
/// index range each. The statuses are written into the text: bound, a generic plan would
/// estimate every status as common as the most common one. $1 project.
pub static LATEST_ENDED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    use baton_proto::v1::SessionStatus::{Completed, Crashed, Idle};
    let latest = [Crashed, Idle, Completed].map(|status| {
        format!(
            "(SELECT {} FROM sessions WHERE project = $1 AND status = {} AND thread_key IS NULL \
             ORDER BY updated_us DESC, id DESC LIMIT 1)",
            session_columns!(),
            status as i32
        )
    });
    latest.join(" UNION ALL ")
});

/// One checkpoint of a project, with its state and payload. $1 id, $2 project.
pub const CHECKPOINT: &str =
    concat!("SELECT ", checkpoint_columns!(), " FROM checkpoints WHERE id = $1 AND project = $2");

/// The project and session of a checkpoint of any project. $1 id.
pub const CHECKPOINT_OWNER: &str = "SELECT project, session_id FROM checkpoints WHERE id = $1";

/// Whether any project has a session of this id.
pub const SESSION_TAKEN: &str = "SELECT 1 FROM sessions WHERE id = $1";

/// The digests of $2 (in order) the project $1 has no chunk for.
pub const MISSING_CHUNKS: &str = "SELECT u.digest FROM unnest($2::text[]) WITH ORDINALITY AS u (digest, n) \
     WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.project = $1 AND c.digest = u.digest) ORDER BY u.n";

/// `Engine::TOUCH_SESSION`.
pub const TOUCH_SESSION: &str = "UPDATE sessions SET last_seen_us = baton_now_us(), \
     tool_count = GREATEST(tool_count, $2) WHERE id = $1 AND status = COALESCE($3, status) \
     AND project = COALESCE($4, project) RETURNING status, last_seen_us";

/// `Engine::EXPIRED_SESSIONS`.
pub const EXPIRED_SESSIONS: &str = "SELECT id, project, status, last_seen_us FROM sessions \
     WHERE status IN ($1, $2, $3) AND ((lease_ttl_ms > 0 AND last_seen_us + lease_ttl_ms * 1000 < baton_now_us()) \
     OR (lease_ttl_ms = 0 AND status = $4 AND last_seen_us + $5 < baton_now_us())) LIMIT 500";

/// A search's candidates (`model::SearchQuery`, values numbered in its field order): the
/// newest `search::RANKED` matches in the project that pass the filters, with their
/// `ts_rank_cd` (`core::search::rank` orders them). Sent unprepared (`reads.rs`), so each
/// search is planned for its own query: the GIN index for a rare term, the primary key
/// backwards for a common one.
pub const SEARCH: &str = "SELECT id, kind::int8 AS kind, session_id, created_us, \
     ts_rank_cd(words, CAST($1 AS tsquery))::float8 AS score FROM (SELECT id, kind, session_id, created_us, words \
     FROM search_docs WHERE words @@ CAST($1 AS tsquery) AND project = $2 \
     AND ($3 = 0 OR (($3 >> kind::int) & 1) = 1) \
     AND ($4 = '' OR session_id = $4) AND ($5 = '' OR branch = $5) AND ($6 = '' OR author = $6) \
     AND created_us >= $7 AND created_us < $8 AND revision <= $9 AND id <= $10 \
     ORDER BY id DESC LIMIT $11) newest";

/// A search's time limit, for the rest of its transaction: Postgres stops a statement that
/// runs longer (query_canceled). $1 the limit in milliseconds, with the unit `ms`.
pub const SEARCH_TIME_LIMIT: &str = "SELECT set_config('statement_timeout', $1, true)";

/// Search documents by id, for a page of hits.
pub const SEARCH_ROWS: &str = "SELECT id, kind::int8 AS kind, record_id, session_id, branch, author, created_us, \
     revision, body FROM search_docs WHERE id = ANY($1)";

/// What a search starts from: the project's head revision (a bound of the first page that
/// later pages keep), and whether the project's records from before search are still being
/// indexed. $1 project.
pub const SEARCH_HEAD: &str = "SELECT COALESCE((SELECT head_revision FROM projects WHERE key = $1), 0)::int8, \
     EXISTS (SELECT 1 FROM search_backfill WHERE project = $1)";

/// `Engine::SHARE_PROJECT`: a write holds the project's row from its lock to its commit.
pub const SHARE_PROJECT: &str = "SELECT 1 FROM projects WHERE key = $1 FOR SHARE";

/// `Engine::RENEW_RESERVATIONS`.
pub const RENEW_RESERVATIONS: &str = concat!(
    "UPDATE reservations SET expires_us = baton_now_us() + $3 WHERE project = $1 AND session_id = $2 \
     AND status = 2 AND expires_us > baton_now_us() RETURNING ",
    crate::store::reservations::reservation_columns!()
);
