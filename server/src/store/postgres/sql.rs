//! The SQL of Postgres writes: one statement each, every value a bound parameter.

/// The project lock (the migration `bounded_lock`'s function): creates the project on first
/// use, allocates the next revision, reads the write's time, memory caps and an earlier
/// reply to the request id, each with a snapshot taken once the row lock is held. With a
/// wait bound > 0 it gives up after that many ms (SQLSTATE `LOCK_NOT_AVAILABLE`).
/// $1 project, $2 request id, $3 memory, $4 wait bound (ms, 0 = none).
pub const LOCK: &str = "SELECT out_revision, out_now_us, out_caps, out_hash, out_reply \
     FROM baton_lock($1, $2, $3, $4)";

/// A memory record's LWW version (NULL columns if never written) and its live entries in
/// order (NULL entry columns if none), one row per entry. $1 project, $2 record.
pub const RECORD_STATE: &str = "SELECT r.revision AS record_revision, r.written_us AS record_written_us, \
     r.author AS record_author, m.id, m.category, m.branch, m.key, m.content, m.rationale, m.author, \
     m.revision, m.seq, m.created_us FROM (SELECT 1 AS one) k \
     LEFT JOIN records r ON r.project = $1 AND r.record = $2 \
     LEFT JOIN memory m ON m.project = $1 AND m.record = $2 AND m.evicted = FALSE \
     ORDER BY m.revision, m.seq";

/// The columns of a memory entry with its record's revision (`MemoryRow`).
macro_rules! entry_columns {
    () => {
        "SELECT m.id, m.project, m.category, m.branch, m.key, m.record, m.content, m.rationale, m.author, \
         m.revision, m.seq, m.created_us, m.evicted, r.revision AS record_revision FROM memory m \
         LEFT JOIN records r ON r.project = m.project AND r.record = m.record"
    };
}

/// A record's entries in order. $1 project, $2 record, $3 include evicted.
pub const RECORD_ENTRIES: &str = concat!(
    entry_columns!(),
    " WHERE m.project = $1 AND m.record = $2 AND (m.evicted = FALSE OR $3) ORDER BY m.revision, m.seq"
);

/// One entry. $1 id, $2 project.
pub const ENTRY: &str = concat!(entry_columns!(), " WHERE m.id = $1 AND m.project = $2");

/// A write's changes and its log, as one statement of data-modifying CTEs over array
/// parameters (empty arrays and NULLs where a write has none of a kind). They all see the
/// database as it was before the statement, which is why a write's changes never touch a
/// row twice (`model::Change`).
///
/// $1 project; $2 records whose entries go; $3 entry ids that go; $4 entry ids evicted;
/// $5–$16 entries added (id, category, branch, key, record, content, rationale, author,
/// revision, seq, created_us, evicted); $17–$20 record versions (record, revision,
/// written_us, author); $21–$23 events (revision, kind, body); $24–$26 conflicts (id,
/// revision, body); $27–$30 the stored request (id, hash, reply, created_us; NULLs for
/// none); $31 new memory caps (NULL: unchanged); $32 the new head (NULL: the lock's).
pub const APPLY: &str = "WITH \
    deleted_records AS (DELETE FROM memory WHERE project = $1 AND record = ANY($2::text[])), \
    deleted_entries AS (DELETE FROM memory WHERE project = $1 AND id = ANY($3::text[])), \
    evicted AS (UPDATE memory SET evicted = TRUE WHERE project = $1 AND id = ANY($4::text[])), \
    added AS (INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, \
        revision, seq, created_us, evicted) \
        SELECT e.id, $1, e.category, e.branch, e.key, e.record, e.content, e.rationale, e.author, e.revision, \
        e.seq, e.created_us, e.evicted FROM UNNEST($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], \
        $10::text[], $11::text[], $12::bytea[], $13::bigint[], $14::bigint[], $15::bigint[], $16::boolean[]) \
        AS e (id, category, branch, key, record, content, rationale, author, revision, seq, created_us, evicted)), \
    versions AS (INSERT INTO records (project, record, revision, written_us, author) \
        SELECT $1, v.record, v.revision, v.written_us, v.author \
        FROM UNNEST($17::text[], $18::bigint[], $19::bigint[], $20::bytea[]) AS v (record, revision, written_us, author) \
        ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision, \
        written_us = excluded.written_us, author = excluded.author), \
    logged_events AS (INSERT INTO events (project, revision, kind, body) \
        SELECT $1, e.revision, e.kind, e.body FROM UNNEST($21::bigint[], $22::integer[], $23::bytea[]) \
        AS e (revision, kind, body)), \
    logged_conflicts AS (INSERT INTO conflicts (id, project, revision, body) \
        SELECT c.id, $1, c.revision, c.body FROM UNNEST($24::text[], $25::bigint[], $26::bytea[]) \
        AS c (id, revision, body)), \
    stored_request AS (INSERT INTO requests (project, request_id, request_hash, reply, created_us) \
        SELECT $1, $27::text, $28::bytea, $29::bytea, $30::bigint WHERE $27::text IS NOT NULL), \
    project AS (UPDATE projects SET memory_caps = COALESCE($31::text, memory_caps), \
        head_revision = GREATEST(head_revision, COALESCE($32::bigint, 0)) \
        WHERE key = $1 AND ($31::text IS NOT NULL OR $32::bigint IS NOT NULL)) \
    SELECT 1";
