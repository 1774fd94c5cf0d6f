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
/// none); $31 new memory caps (NULL: unchanged); $32 the new head (NULL: the lock's);
/// $33–$59 sessions added (their columns but the project, in `INSERT_SESSION`'s order);
/// $60–$78 sessions written back (`PUT_SESSION`'s columns, then the id): liveness only
/// forward, as heartbeats move it without the project's lock.
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
    added_sessions AS (INSERT INTO sessions (id, project, agent, agent_session_id, host, user_name, cwd, branch, \
        goal, status, lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count, \
        resumed_from, resumed_by, metadata, created_us, updated_us, revision, written_us, author, head_revision, \
        head_written_us, head_author, start_revision) \
        SELECT s.id, $1, s.agent, s.agent_session_id, s.host, s.user_name, s.cwd, s.branch, s.goal, s.status, \
        s.lease_ttl_ms, s.last_seen_us, s.head_checkpoint_id, s.git_base, s.git_head, s.summary, s.tool_count, \
        s.resumed_from, s.resumed_by, s.metadata, s.created_us, s.updated_us, s.revision, s.written_us, s.author, \
        s.head_revision, s.head_written_us, s.head_author, s.revision \
        FROM UNNEST($33::text[], $34::integer[], $35::text[], $36::text[], $37::text[], $38::text[], $39::text[], \
        $40::text[], $41::integer[], $42::bigint[], $43::bigint[], $44::text[], $45::text[], $46::text[], $47::text[], \
        $48::bigint[], $49::text[], $50::text[], $51::text[], $52::bigint[], $53::bigint[], $54::bigint[], \
        $55::bigint[], $56::bytea[], $57::bigint[], $58::bigint[], $59::bytea[]) \
        AS s (id, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms, last_seen_us, \
        head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, resumed_by, metadata, created_us, \
        updated_us, revision, written_us, author, head_revision, head_written_us, head_author)), \
    put_sessions AS (UPDATE sessions t SET agent_session_id = s.agent_session_id, branch = s.branch, goal = s.goal, \
        status = s.status, last_seen_us = GREATEST(t.last_seen_us, s.last_seen_us), \
        head_checkpoint_id = s.head_checkpoint_id, git_head = s.git_head, summary = s.summary, \
        tool_count = GREATEST(t.tool_count, s.tool_count), resumed_by = s.resumed_by, metadata = s.metadata, \
        updated_us = s.updated_us, revision = s.revision, written_us = s.written_us, author = s.author, \
        head_revision = s.head_revision, head_written_us = s.head_written_us, head_author = s.head_author \
        FROM UNNEST($60::text[], $61::text[], $62::text[], $63::integer[], $64::bigint[], $65::text[], $66::text[], \
        $67::text[], $68::bigint[], $69::text[], $70::text[], $71::bigint[], $72::bigint[], $73::bigint[], \
        $74::bytea[], $75::bigint[], $76::bigint[], $77::bytea[], $78::text[]) \
        AS s (agent_session_id, branch, goal, status, last_seen_us, head_checkpoint_id, git_head, summary, \
        tool_count, resumed_by, metadata, updated_us, revision, written_us, author, head_revision, head_written_us, \
        head_author, id) \
        WHERE t.id = s.id AND t.project = $1), \
    project AS (UPDATE projects SET memory_caps = COALESCE($31::text, memory_caps), \
        head_revision = GREATEST(head_revision, COALESCE($32::bigint, 0)) \
        WHERE key = $1 AND ($31::text IS NOT NULL OR $32::bigint IS NOT NULL)) \
    SELECT 1";

/// A session's columns (`SessionRow`).
macro_rules! session_columns {
    () => {
        "id, project, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms, \
         last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, resumed_by, \
         metadata, created_us, updated_us, revision, written_us, author, head_revision, head_written_us, head_author"
    };
}

/// One session of a project. $1 id, $2 project.
pub const SESSION: &str =
    concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = $1 AND project = $2");

/// Liveness without a write (`Store::touch_session`). $1 id, $2 tool count, $3 status
/// (NULL: any), $4 project (NULL: any).
pub const TOUCH_SESSION: &str = "UPDATE sessions SET last_seen_us = baton_now_us(), \
     tool_count = GREATEST(tool_count, $2) WHERE id = $1 AND status = COALESCE($3, status) \
     AND project = COALESCE($4, project) RETURNING status, last_seen_us";

/// Sessions whose liveness ran out: a lease that expired, or (without a lease) no
/// activity for the idle time. $1–$3 the live statuses, $4 active, $5 the idle time (µs).
pub const EXPIRED_SESSIONS: &str = "SELECT id, project, status, last_seen_us FROM sessions \
     WHERE status IN ($1, $2, $3) AND ((lease_ttl_ms > 0 AND last_seen_us + lease_ttl_ms * 1000 < baton_now_us()) \
     OR (lease_ttl_ms = 0 AND status = $4 AND last_seen_us + $5 < baton_now_us())) LIMIT 500";
