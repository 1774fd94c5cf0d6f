//! A write's changes and the next write's lock in one round trip: one call of a PL/pgSQL
//! function whose text is here (`FUNCTION`), installed at start under a name made of its
//! text's hash, with the write's rows as arrays of the composite types the migrations
//! declare (checkpoints: the table's own row type). Serves `baton-bench`'s etcd rows and "50 KB checkpoints" on Postgres.

use std::sync::LazyLock;

use sha2::{Digest as _, Sha256};
use sqlx::Arguments as _;
use sqlx::error::BoxDynError;
use sqlx::postgres::PgArguments;

use crate::core::search::tokens::tsvector_literal;
use crate::store::model::{
    Change, Checkpoint, CommitChange, FirstRead, Index, ItemChange, Lock, Log, Maintenance, PendingWrite,
    ReservationChange, SearchDoc, Session,
};
use crate::store::rows::encode_actor;

/// What the lock gave the write, as the function records it on the project.
pub(super) struct Write<'a> {
    pub project: &'a str,
    /// The project's head after this write.
    pub head: i64,
    pub now_us: i64,
    /// The write's revision, if it may have changed memory (the brief's cache key).
    pub memory_revision: Option<i64>,
}

/// `baton_entry`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_entry")]
struct EntryArg {
    id: String,
    category: String,
    branch: String,
    key: String,
    record: String,
    content: String,
    rationale: String,
    author: Vec<u8>,
    revision: i64,
    seq: i64,
    created_us: i64,
    evicted: bool,
}

/// `baton_record_version`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_record_version")]
struct VersionArg {
    record: String,
    revision: i64,
    written_us: i64,
    author: Vec<u8>,
}

/// `baton_session`: a session's columns but its project (and start revision).
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_session")]
struct SessionArg {
    id: String,
    agent: i32,
    agent_session_id: String,
    host: String,
    user_name: String,
    cwd: String,
    branch: String,
    goal: String,
    status: i32,
    lease_ttl_ms: i64,
    last_seen_us: i64,
    head_checkpoint_id: Option<String>,
    git_base: String,
    git_head: String,
    summary: String,
    tool_count: i64,
    resumed_from: Option<String>,
    resumed_by: Option<String>,
    metadata: String,
    created_us: i64,
    updated_us: i64,
    revision: i64,
    written_us: i64,
    author: Vec<u8>,
    head_revision: i64,
    head_written_us: i64,
    head_author: Vec<u8>,
    thread_key: Option<String>,
    thread_ns: Option<String>,
}

impl From<Session> for SessionArg {
    fn from(s: Session) -> Self {
        Self {
            id: s.id,
            agent: s.agent,
            agent_session_id: s.agent_session_id,
            host: s.host,
            user_name: s.user_name,
            cwd: s.cwd,
            branch: s.branch,
            goal: s.goal,
            status: s.status,
            lease_ttl_ms: s.lease_ttl_ms,
            last_seen_us: s.last_seen_us,
            head_checkpoint_id: s.head_checkpoint_id,
            git_base: s.git_base,
            git_head: s.git_head,
            summary: s.summary,
            tool_count: s.tool_count,
            resumed_from: s.resumed_from,
            resumed_by: s.resumed_by,
            metadata: s.metadata,
            created_us: s.created_us,
            updated_us: s.updated_us,
            revision: s.revision,
            written_us: s.written_us,
            author: s.author,
            head_revision: s.head_revision,
            head_written_us: s.head_written_us,
            head_author: s.head_author,
            thread_key: s.thread_key,
            thread_ns: s.thread_ns,
        }
    }
}

/// `baton_pending_write`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_pending_write")]
struct PendingWriteArg {
    checkpoint_id: String,
    task_id: String,
    idx: i32,
    channel: String,
    task_path: String,
    value_type: String,
    value: Vec<u8>,
    revision: i64,
}

impl From<PendingWrite> for PendingWriteArg {
    fn from(w: PendingWrite) -> Self {
        Self {
            checkpoint_id: w.checkpoint_id,
            task_id: w.task_id,
            idx: w.idx,
            channel: w.channel,
            task_path: w.task_path,
            value_type: w.value_type,
            value: w.value,
            revision: w.revision,
        }
    }
}

/// `baton_search_doc`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_search_doc")]
struct SearchDocArg {
    kind: i16,
    record_id: String,
    record: String,
    session_id: String,
    branch: String,
    author: String,
    created_us: i64,
    revision: i64,
    body: String,
    words: String,
}

impl From<SearchDoc> for SearchDocArg {
    fn from(d: SearchDoc) -> Self {
        Self {
            kind: d.kind as i16,
            record_id: d.record_id,
            record: d.record,
            session_id: d.session_id,
            branch: d.branch,
            author: d.author,
            created_us: d.created_us,
            revision: d.revision,
            words: tsvector_literal(&d.words),
            body: d.body,
        }
    }
}

/// `baton_search_edit`: op 1 drops a document, 2 a memory record's, 3 replaces a text.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_search_edit")]
struct SearchEditArg {
    op: i16,
    kind: i16,
    record_id: String,
    record: String,
    body: String,
    words: String,
}

impl SearchEditArg {
    fn of(index: Index) -> Vec<Self> {
        let edit = |op, kind: crate::store::model::Kind, record_id: String| Self {
            op,
            kind: kind as i16,
            record_id,
            record: String::new(),
            body: String::new(),
            words: String::new(),
        };
        match index {
            Index::Put(_) => Vec::new(),
            Index::Drop { kind, record_ids } => record_ids.into_iter().map(|id| edit(1, kind, id)).collect(),
            Index::DropRecord { record } => {
                vec![Self { record, ..edit(2, crate::store::model::Kind::Memory, String::new()) }]
            }
            Index::Retext { kind, record_id, body, words } => {
                vec![Self { body, words: tsvector_literal(&words), ..edit(3, kind, record_id) }]
            }
        }
    }
}

/// `baton_event`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_event")]
struct EventArg {
    revision: i64,
    kind: i32,
    body: Vec<u8>,
}

/// `baton_conflict`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_conflict")]
struct ConflictArg {
    id: String,
    revision: i64,
    body: Vec<u8>,
}

/// A change the function does not make: its own statements run before it.
pub(super) enum Plain {
    Maintenance(Maintenance),
    Items(ItemChange),
    Reservations(ReservationChange),
    Commits(CommitChange),
}

/// A write's changes, by kind, as the function takes them.
#[derive(Default)]
pub(super) struct Changes {
    caps: Option<String>,
    deleted_records: Vec<String>,
    deleted_entries: Vec<String>,
    evicted: Vec<String>,
    entries: Vec<EntryArg>,
    versions: Vec<VersionArg>,
    added_sessions: Vec<SessionArg>,
    put_sessions: Vec<SessionArg>,
    /// As the table's rows (`CheckpointRow` is its row type).
    checkpoints: Vec<Checkpoint>,
    search_edits: Vec<SearchEditArg>,
    search_docs: Vec<SearchDocArg>,
    writes: Vec<PendingWriteArg>,
}

impl Changes {
    /// The changes the function makes, and those it does not (maintenance and item logs:
    /// plain statements, `write.rs`).
    pub(super) fn of(changes: Vec<Change>) -> (Self, Vec<Plain>) {
        let mut c = Self::default();
        let mut maintenance = Vec::new();
        for change in changes {
            match change {
                Change::DeleteRecord { record } => c.deleted_records.push(record),
                Change::DeleteEntries { ids } => c.deleted_entries.extend(ids),
                Change::Evict { ids } => c.evicted.extend(ids),
                Change::InsertEntries { record, entries } => {
                    c.entries.extend(entries.into_iter().map(|e| EntryArg {
                        id: e.id,
                        category: e.category,
                        branch: e.branch,
                        key: e.key,
                        record: record.clone(),
                        content: e.content,
                        rationale: e.rationale,
                        author: encode_actor(&e.author),
                        revision: e.revision,
                        seq: e.seq,
                        created_us: e.created_us,
                        evicted: e.evicted,
                    }));
                }
                Change::PutRecordVersion { record, revision, written_us, author } => {
                    c.versions.push(VersionArg {
                        record,
                        revision,
                        written_us,
                        author: encode_actor(&author),
                    });
                }
                Change::SetMemoryCaps { json } => c.caps = Some(json),
                Change::InsertSession(session) => c.added_sessions.push((*session).into()),
                Change::PutSession(session) => c.put_sessions.push((*session).into()),
                Change::InsertCheckpoint(checkpoint) => c.checkpoints.push(*checkpoint),
                Change::Maintenance(m) => maintenance.push(Plain::Maintenance(m)),
                Change::Items(i) => maintenance.push(Plain::Items(i)),
                Change::Reservations(r) => maintenance.push(Plain::Reservations(r)),
                Change::Commits(c) => maintenance.push(Plain::Commits(c)),
                Change::Index(Index::Put(doc)) => c.search_docs.push((*doc).into()),
                Change::Index(index) => c.search_edits.extend(SearchEditArg::of(index)),
                Change::PutWrites(writes) => c.writes.extend(writes.into_iter().map(PendingWriteArg::from)),
            }
        }
        (c, maintenance)
    }
}

/// The function's arguments for a write's changes, in order (`CALL`).
pub(super) fn arguments(write: &Write<'_>, c: Changes, log: Log) -> Result<PgArguments, BoxDynError> {
    let events: Vec<EventArg> = log
        .events
        .into_iter()
        .map(|e| EventArg { revision: e.revision, kind: e.kind, body: e.body })
        .collect();
    let conflicts: Vec<ConflictArg> = log
        .conflicts
        .into_iter()
        .map(|c| ConflictArg { id: c.id, revision: c.revision, body: c.body })
        .collect();
    let request = log.request;
    let mut args = PgArguments::default();
    args.add(write.project)?;
    args.add(write.head)?;
    args.add(write.now_us)?;
    args.add(write.memory_revision)?;
    args.add(c.caps)?;
    args.add(c.deleted_records)?;
    args.add(c.deleted_entries)?;
    args.add(c.evicted)?;
    args.add(c.entries)?;
    args.add(c.versions)?;
    args.add(c.added_sessions)?;
    args.add(c.put_sessions)?;
    args.add(events)?;
    args.add(conflicts)?;
    args.add(request.as_ref().map(|r| r.request_id.clone()))?;
    args.add(request.as_ref().map(|r| r.request_hash.clone()))?;
    args.add(request.map(|r| r.reply))?;
    args.add(c.checkpoints)?;
    args.add(c.search_edits)?;
    args.add(c.search_docs)?;
    args.add(c.writes)?;
    Ok(args)
}

/// The function, in two parts, each skipped when its arguments are NULL.
///
/// A write's changes, in the order they must go (a record's documents while its entries are
/// still there; deletions before the rows that may take their keys), in a subtransaction of
/// their own, which rolls back alone when one fails (its SQLSTATE and message are then
/// `out_code` and `out_message`); then, in the batch's transaction, which holds the row's
/// lock, the project's head, time, memory revision and caps. Updated in the subtransaction,
/// the row would get a MultiXact as its locker, which every later lock and read of it must
/// look up.
///
/// The next write's lock (`p_lock`, its project), which changes nothing but may make the
/// project's row: the write's revision and time (never before the project's last write, the
/// clock read once the row is locked), the memory caps, an earlier reply to its request id
/// and its first read (a record's version and live entries, or a session). With
/// `p_bounded` (`SKIP LOCKED`) a row locked elsewhere, or none, leaves `out_revision` NULL.
/// Each statement of a function takes a new snapshot, so the reads after the lock see every
/// write before it, the changes just made included.
const FUNCTION: &str = r"(p_project TEXT, p_head BIGINT, p_now_us BIGINT, p_memory_revision BIGINT, p_caps TEXT,
    p_deleted_records TEXT[], p_deleted_entries TEXT[], p_evicted TEXT[], p_entries baton_entry[],
    p_versions baton_record_version[], p_added_sessions baton_session[], p_put_sessions baton_session[],
    p_events baton_event[], p_conflicts baton_conflict[], p_request_id TEXT, p_request_hash BYTEA,
    p_reply BYTEA, p_checkpoints checkpoints[], p_search_edits baton_search_edit[],
    p_search_docs baton_search_doc[], p_writes baton_pending_write[], p_lock TEXT, p_lock_request TEXT, p_bounded BOOLEAN, p_record TEXT,
    p_session TEXT, OUT out_code TEXT, OUT out_message TEXT, OUT out_revision BIGINT, OUT out_now_us BIGINT,
    OUT out_caps TEXT, OUT out_hash BYTEA, OUT out_reply BYTEA, OUT out_record records,
    OUT out_entries memory[], OUT out_session sessions)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_record TEXT;
    v_edit baton_search_edit;
BEGIN
    IF p_project IS NOT NULL THEN
      BEGIN
        FOREACH v_edit IN ARRAY p_search_edits LOOP
            IF v_edit.op = 2 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = 1 AND record_id IN
                    (SELECT id FROM memory WHERE project = p_project AND record = v_edit.record);
            END IF;
        END LOOP;
        -- One record at a time, by equality: with `record = ANY(...)` the planner, knowing
        -- nothing of a new project, filtered the project's entries through another index.
        FOREACH v_record IN ARRAY p_deleted_records LOOP
            DELETE FROM memory WHERE project = p_project AND record = v_record;
        END LOOP;
        IF cardinality(p_deleted_entries) > 0 THEN
            DELETE FROM memory WHERE project = p_project AND id = ANY(p_deleted_entries);
        END IF;
        IF cardinality(p_evicted) > 0 THEN
            UPDATE memory SET evicted = TRUE WHERE project = p_project AND id = ANY(p_evicted);
        END IF;
        IF cardinality(p_entries) > 0 THEN
            INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, revision,
                seq, created_us, evicted)
            SELECT e.id, p_project, e.category, e.branch, e.key, e.record, e.content, e.rationale, e.author,
                e.revision, e.seq, e.created_us, e.evicted FROM unnest(p_entries) e;
        END IF;
        IF cardinality(p_versions) > 0 THEN
            INSERT INTO records (project, record, revision, written_us, author)
            SELECT p_project, v.record, v.revision, v.written_us, v.author FROM unnest(p_versions) v
            ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision,
                written_us = excluded.written_us, author = excluded.author;
        END IF;
        IF cardinality(p_added_sessions) > 0 THEN
            INSERT INTO sessions (id, project, agent, agent_session_id, host, user_name, cwd, branch, goal, status,
                lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count,
                resumed_from, resumed_by, metadata, created_us, updated_us, revision, written_us, author,
                head_revision, head_written_us, head_author, thread_key, thread_ns, start_revision)
            SELECT s.id, p_project, s.agent, s.agent_session_id, s.host, s.user_name, s.cwd, s.branch, s.goal,
                s.status, s.lease_ttl_ms, s.last_seen_us, s.head_checkpoint_id, s.git_base, s.git_head, s.summary,
                s.tool_count, s.resumed_from, s.resumed_by, s.metadata, s.created_us, s.updated_us, s.revision,
                s.written_us, s.author, s.head_revision, s.head_written_us, s.head_author, s.thread_key, s.thread_ns,
                s.revision
            FROM unnest(p_added_sessions) s;
        END IF;
        IF cardinality(p_checkpoints) > 0 THEN
            INSERT INTO checkpoints SELECT c.* FROM unnest(p_checkpoints) c;
        END IF;
        IF cardinality(p_writes) > 0 THEN
            INSERT INTO pending_writes (checkpoint_id, task_id, idx, project, channel, task_path, value_type, value,
                revision)
            SELECT w.checkpoint_id, w.task_id, w.idx, p_project, w.channel, w.task_path, w.value_type, w.value,
                w.revision FROM unnest(p_writes) w
            ON CONFLICT (checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel,
                task_path = excluded.task_path, value_type = excluded.value_type, value = excluded.value,
                revision = excluded.revision;
        END IF;
        IF cardinality(p_put_sessions) > 0 THEN
            -- Liveness only forward: heartbeats move it without the project's lock.
            UPDATE sessions t SET agent_session_id = s.agent_session_id, branch = s.branch, goal = s.goal,
                status = s.status, last_seen_us = GREATEST(t.last_seen_us, s.last_seen_us),
                head_checkpoint_id = s.head_checkpoint_id, git_head = s.git_head, summary = s.summary,
                tool_count = GREATEST(t.tool_count, s.tool_count), resumed_by = s.resumed_by,
                metadata = s.metadata, updated_us = s.updated_us, revision = s.revision,
                written_us = s.written_us, author = s.author, head_revision = s.head_revision,
                head_written_us = s.head_written_us, head_author = s.head_author
            FROM unnest(p_put_sessions) s WHERE t.id = s.id AND t.project = p_project;
        END IF;
        INSERT INTO events (project, revision, kind, body)
        SELECT p_project, e.revision, e.kind, e.body FROM unnest(p_events) e;
        IF cardinality(p_conflicts) > 0 THEN
            INSERT INTO conflicts (id, project, revision, body)
            SELECT c.id, p_project, c.revision, c.body FROM unnest(p_conflicts) c;
        END IF;
        IF p_request_id IS NOT NULL THEN
            INSERT INTO requests (project, request_id, request_hash, reply, created_us)
            VALUES (p_project, p_request_id, p_request_hash, p_reply, p_now_us);
        END IF;
        -- The index's other changes: 1 drops a document, 3 replaces a document's text (a
        -- purge's mask).
        FOREACH v_edit IN ARRAY p_search_edits LOOP
            IF v_edit.op = 1 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = v_edit.kind
                    AND record_id = v_edit.record_id;
            ELSIF v_edit.op = 3 THEN
                UPDATE search_docs SET body = v_edit.body, words = v_edit.words::tsvector
                WHERE project = p_project AND kind = v_edit.kind AND record_id = v_edit.record_id;
            END IF;
        END LOOP;
        IF cardinality(p_search_docs) > 0 THEN
            INSERT INTO search_docs AS t (project, kind, record_id, record, session_id, branch, author, created_us,
                revision, body, words)
            SELECT p_project, d.kind, d.record_id, d.record, d.session_id, d.branch, d.author, d.created_us,
                d.revision, d.body, d.words::tsvector FROM unnest(p_search_docs) d
            ON CONFLICT (project, kind, record_id) DO UPDATE SET record = excluded.record,
                session_id = excluded.session_id, branch = excluded.branch, author = excluded.author,
                revision = excluded.revision, body = excluded.body, words = excluded.words
            WHERE t.body <> excluded.body OR t.branch <> excluded.branch OR t.author <> excluded.author;
        END IF;
      EXCEPTION WHEN OTHERS THEN
        out_code := SQLSTATE;
        out_message := SQLERRM;
      END;
      IF out_code IS NULL THEN
        UPDATE projects SET head_revision = GREATEST(head_revision, p_head),
            last_write_us = GREATEST(last_write_us, p_now_us),
            memory_revision = COALESCE(p_memory_revision, memory_revision),
            memory_caps = COALESCE(p_caps, memory_caps)
        WHERE key = p_project;
      END IF;
    END IF;
    IF p_lock IS NULL THEN
        RETURN;
    END IF;
    -- At most: the project made, then locked.
    FOR v_try IN 1..2 LOOP
        IF p_bounded THEN
            SELECT head_revision + 1, GREATEST(last_write_us, baton_now_us()), memory_caps
            INTO out_revision, out_now_us, out_caps FROM projects WHERE key = p_lock FOR UPDATE SKIP LOCKED;
        ELSE
            SELECT head_revision + 1, GREATEST(last_write_us, baton_now_us()), memory_caps
            INTO out_revision, out_now_us, out_caps FROM projects WHERE key = p_lock FOR UPDATE;
        END IF;
        EXIT WHEN FOUND OR p_bounded;
        INSERT INTO projects (key, head_revision, last_write_us, created_us, memory_revision)
        VALUES (p_lock, 0, baton_now_us(), baton_now_us(), 0) ON CONFLICT (key) DO NOTHING;
    END LOOP;
    IF out_revision IS NULL THEN
        RETURN;
    END IF;
    SELECT request_hash, reply INTO out_hash, out_reply FROM requests
    WHERE project = p_lock AND request_id = p_lock_request;
    IF p_record IS NOT NULL THEN
        SELECT * INTO out_record FROM records WHERE project = p_lock AND record = p_record;
        SELECT array_agg(m ORDER BY m.revision, m.seq) INTO out_entries FROM memory m
        WHERE m.project = p_lock AND m.record = p_record AND m.evicted = FALSE;
    END IF;
    IF p_session IS NOT NULL THEN
        SELECT * INTO out_session FROM sessions WHERE id = p_session AND project = p_lock;
    END IF;
END;
$$";

/// The function's name: its text's hash, so that servers of different versions sharing a
/// database each call their own.
static NAME: LazyLock<String> =
    LazyLock::new(|| format!("baton_apply_{}", &hex::encode(Sha256::digest(FUNCTION))[..16]));

/// The function's arguments: a write's changes (`arguments`), then a lock's (`lock_arguments`).
const CHANGES: usize = 21;
const LOCK: usize = 5;

/// The statements that call it, with a write's changes, a lock, or both (the others NULL):
/// the SQLSTATE and message of what failed (NULL if nothing), the lock's columns, and its
/// first read as `RecordStateRow`'s columns (a row per entry) and `SessionRow`'s.
pub(super) static CALL: LazyLock<[String; 3]> =
    LazyLock::new(|| [call(true, false), call(false, true), call(true, true)]);

/// Which of `CALL` sends these arguments.
pub(super) fn call_for(changes: bool, lock: bool) -> &'static str {
    match (changes, lock) {
        (true, false) => &CALL[0],
        (false, _) => &CALL[1],
        (true, true) => &CALL[2],
    }
}

fn call(changes: bool, lock: bool) -> String {
    let mut n = 0;
    let mut params = |count: usize, given: bool| {
        (0..count)
            .map(|_| {
                n += usize::from(given);
                if given { format!("${n}") } else { "NULL".to_owned() }
            })
            .collect::<Vec<_>>()
    };
    let args = [params(CHANGES, changes), params(LOCK, lock)].concat().join(", ");
    format!(
        "SELECT w.out_code, w.out_message, w.out_revision, w.out_now_us, w.out_caps, w.out_hash, w.out_reply, \
         {record}, s.* FROM {name}({args}) w \
         LEFT JOIN LATERAL (SELECT (w.out_record).*) r ON TRUE \
         LEFT JOIN LATERAL unnest(w.out_entries) WITH ORDINALITY m ON TRUE \
         LEFT JOIN LATERAL (SELECT {session} FROM (SELECT (w.out_session).*) o) s ON TRUE \
         ORDER BY m.ordinality",
        record = super::sql::record_state_columns!(),
        session = crate::store::rows::session_columns!(),
        name = *NAME,
    )
}

/// A lock's arguments, after a write's changes if any (`CALL`).
pub(super) fn lock_arguments(args: &mut PgArguments, lock: &Lock, bounded: bool) -> Result<(), BoxDynError> {
    let (record, session) = match &lock.first_read {
        None => (None, None),
        Some(FirstRead::Record(record)) => (Some(record.as_str()), None),
        Some(FirstRead::Session(id)) => (None, Some(id.as_str())),
    };
    args.add(lock.project.as_str())?;
    args.add(lock.request_id.as_deref())?;
    args.add(bounded)?;
    args.add(record)?;
    args.add(session)?;
    Ok(())
}

/// Installs the function if this database has no function of that name yet (a server
/// starting beside another may find it made meanwhile).
pub(super) async fn install(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    if installed(&mut *conn).await? {
        return Ok(());
    }
    let create = format!("CREATE FUNCTION {}{FUNCTION}", *NAME);
    match sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&mut *conn).await {
        Ok(_) => Ok(()),
        Err(e) if installed(&mut *conn).await? => {
            tracing::debug!(error = %e, "another server made the write function first");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

async fn installed(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 \
         AND pronamespace = current_schema()::regnamespace)",
    )
    .bind(&*NAME)
    .fetch_one(conn)
    .await
}
