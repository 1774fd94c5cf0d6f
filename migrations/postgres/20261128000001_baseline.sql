-- Baton's schema on Postgres. Times are µs since the Unix epoch; actors, events and
-- conflicts are stored as encoded baton.v1 protobuf messages. A database made before this
-- baseline (by a development build) is adopted at start-up (`server/src/store/schema.rs`).

-- One row per project: its revision counter and what every write reads with its lock.
CREATE TABLE projects (
    key            TEXT PRIMARY KEY NOT NULL,
    head_revision  BIGINT NOT NULL,
    last_write_us  BIGINT NOT NULL,
    created_us     BIGINT NOT NULL,
    memory_caps    TEXT NOT NULL DEFAULT '{}',
    -- Event-log compaction: events below this revision were deleted (0 = none ever were).
    events_from    BIGINT NOT NULL DEFAULT 0,
    -- The revision of the last write that changed the project's memory: the brief keeps
    -- its memory section while this is unchanged.
    memory_revision BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY NOT NULL,
    project            TEXT NOT NULL REFERENCES projects (key),
    agent              INTEGER NOT NULL,
    agent_session_id   TEXT NOT NULL,
    host               TEXT NOT NULL,
    user_name          TEXT NOT NULL,
    cwd                TEXT NOT NULL,
    branch             TEXT NOT NULL,
    goal               TEXT NOT NULL,
    status             INTEGER NOT NULL,
    lease_ttl_ms       BIGINT NOT NULL,
    last_seen_us       BIGINT NOT NULL,
    head_checkpoint_id TEXT,
    git_base           TEXT NOT NULL,
    git_head           TEXT NOT NULL,
    summary            TEXT NOT NULL,
    tool_count         BIGINT NOT NULL,
    resumed_from       TEXT,
    resumed_by         TEXT,
    metadata           TEXT NOT NULL,
    created_us         BIGINT NOT NULL,
    updated_us         BIGINT NOT NULL,
    start_revision     BIGINT NOT NULL,
    revision           BIGINT NOT NULL,
    written_us         BIGINT NOT NULL,
    author             BYTEA NOT NULL,
    head_revision      BIGINT NOT NULL,
    head_written_us    BIGINT NOT NULL,
    head_author        BYTEA NOT NULL
);
CREATE INDEX sessions_project_id ON sessions (project, id);
CREATE INDEX sessions_liveness ON sessions (status, last_seen_us);
-- The brief's session lookups, each an index range instead of a scan of the project's
-- sessions: by status and last change, other active sessions by last activity, the latest
-- completed session, and the caller's previous session on the same host and user.
CREATE INDEX sessions_project_status ON sessions (project, status, updated_us);
CREATE INDEX sessions_project_status_seen ON sessions (project, status, last_seen_us);
CREATE INDEX sessions_project_status_id ON sessions (project, status, id);
CREATE INDEX sessions_project_host_user ON sessions (project, host, user_name, id);

CREATE TABLE checkpoints (
    id                   TEXT PRIMARY KEY NOT NULL,
    session_id           TEXT NOT NULL REFERENCES sessions (id),
    project              TEXT NOT NULL,
    parent_id            TEXT,
    kind                 INTEGER NOT NULL,
    reason               TEXT NOT NULL,
    state                BYTEA NOT NULL,
    payload              BYTEA NOT NULL,
    payload_content_type TEXT NOT NULL,
    compression          TEXT NOT NULL,
    size_bytes           BIGINT NOT NULL,
    digest               TEXT NOT NULL,
    created_us           BIGINT NOT NULL,
    revision             BIGINT NOT NULL,
    author               BYTEA NOT NULL,
    -- The blobs a checkpoint refers to (encoded baton.v1.BlobRef list; empty = none).
    blobs                BYTEA NOT NULL DEFAULT '\x',
    -- A digest over the header and structured state, without the payload: lists and the
    -- brief verify what they return with it, never reading payloads. A row without one
    -- gets it at start-up (`jobs::backfill`), found through the partial index.
    state_digest         TEXT
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, revision);
CREATE INDEX checkpoints_state_digest_missing ON checkpoints (id) WHERE state_digest IS NULL;

CREATE TABLE memory (
    id          TEXT PRIMARY KEY NOT NULL,
    project     TEXT NOT NULL,
    category    TEXT NOT NULL,
    branch      TEXT NOT NULL,
    key         TEXT NOT NULL,
    record      TEXT NOT NULL,
    content     TEXT NOT NULL,
    rationale   TEXT NOT NULL,
    author      BYTEA NOT NULL,
    revision    BIGINT NOT NULL,
    seq         BIGINT NOT NULL,
    created_us  BIGINT NOT NULL,
    evicted     BOOLEAN NOT NULL
);
CREATE INDEX memory_record ON memory (project, record, revision, seq);
CREATE INDEX memory_category ON memory (project, category, branch);
-- The brief reads a project's newest live memory entries.
CREATE INDEX memory_project_revision ON memory (project, revision);

-- Last-write-wins metadata of memory records (current-state sets and notes).
CREATE TABLE records (
    project     TEXT NOT NULL,
    record      TEXT NOT NULL,
    revision    BIGINT NOT NULL,
    written_us  BIGINT NOT NULL,
    author      BYTEA NOT NULL,
    PRIMARY KEY (project, record)
);

CREATE TABLE events (
    project   TEXT NOT NULL,
    revision  BIGINT NOT NULL,
    kind      INTEGER NOT NULL,
    body      BYTEA NOT NULL,
    PRIMARY KEY (project, revision)
);

CREATE TABLE conflicts (
    id        TEXT PRIMARY KEY NOT NULL,
    project   TEXT NOT NULL,
    revision  BIGINT NOT NULL,
    body      BYTEA NOT NULL
);
CREATE INDEX conflicts_project_revision ON conflicts (project, revision);

-- Idempotency: one row per request_id per project, with the reply it got.
CREATE TABLE requests (
    project       TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    request_hash  BYTEA NOT NULL,
    reply         BYTEA NOT NULL,
    created_us    BIGINT NOT NULL,
    PRIMARY KEY (project, request_id)
);
CREATE INDEX requests_created ON requests (created_us);

-- Content-addressed chunks of large blobs (agent transcripts), shared by checkpoints.
CREATE TABLE chunks (
    project     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    data        BYTEA NOT NULL,
    size_bytes  BIGINT NOT NULL,
    created_us  BIGINT NOT NULL,
    PRIMARY KEY (project, digest)
);

-- Access tokens: only the sha256 of the secret is stored.
CREATE TABLE tokens (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    project       TEXT,
    secret_hash   TEXT NOT NULL UNIQUE,
    created_us    BIGINT NOT NULL,
    last_used_us  BIGINT,
    revoked_us    BIGINT
);

-- Full-text search (server/src/core/search): one document per memory entry, checkpoint and
-- session, written by the write that changes the record. Baton splits text into words
-- itself and sends them as a `tsvector` literal with their positions, so no parser,
-- dictionary or stemming of Postgres applies: the words are exactly the ones SQLite's index
-- holds.
CREATE TABLE search_docs (
    id BIGSERIAL PRIMARY KEY,
    project TEXT NOT NULL,
    kind SMALLINT NOT NULL,
    record_id TEXT NOT NULL,
    record TEXT NOT NULL,
    session_id TEXT NOT NULL,
    branch TEXT NOT NULL,
    author TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    body TEXT NOT NULL,
    words TSVECTOR NOT NULL,
    UNIQUE (project, kind, record_id)
);
-- A search's work is bounded by its own project: a search's `project = $2 AND words @@
-- query` is one scan of this index, which skips every other project's documents.
-- `btree_gin` (in Postgres's contrib, a trusted extension) lets a GIN index hold the
-- project key. A small pending list: a search reads the list whole, and a burst of writes
-- with the default 4 MB one made a rare term's search slow; without a list, every write
-- pays for its own words in the index (docs/performance.md).
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX search_docs_project_words ON search_docs USING GIN (project, words)
    WITH (fastupdate = on, gin_pending_list_limit = 256);

-- Projects whose records the server indexes again after start-up (`jobs::search`), a batch
-- at a time under the project's lock, each taken off this list when done; until then their
-- searches say the index is partial. A migration that changes how text is indexed lists the
-- projects here (SQL cannot split text as Baton does).
CREATE TABLE search_backfill (project TEXT PRIMARY KEY);

-- The time of a write, read once its project's lock is held: each statement of a VOLATILE
-- function reads the clock anew.
CREATE FUNCTION baton_now_us() RETURNS BIGINT LANGUAGE sql VOLATILE
AS $$ SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT) $$;

-- The rows a write adds or writes back, as the write function takes them
-- (`server/src/store/postgres/apply.rs`, which installs the function at start-up).
CREATE TYPE baton_entry AS (id TEXT, category TEXT, branch TEXT, key TEXT, record TEXT, content TEXT,
    rationale TEXT, author BYTEA, revision BIGINT, seq BIGINT, created_us BIGINT, evicted BOOLEAN);
CREATE TYPE baton_record_version AS (record TEXT, revision BIGINT, written_us BIGINT, author BYTEA);
CREATE TYPE baton_session AS (id TEXT, agent INTEGER, agent_session_id TEXT, host TEXT, user_name TEXT,
    cwd TEXT, branch TEXT, goal TEXT, status INTEGER, lease_ttl_ms BIGINT, last_seen_us BIGINT,
    head_checkpoint_id TEXT, git_base TEXT, git_head TEXT, summary TEXT, tool_count BIGINT,
    resumed_from TEXT, resumed_by TEXT, metadata TEXT, created_us BIGINT, updated_us BIGINT,
    revision BIGINT, written_us BIGINT, author BYTEA, head_revision BIGINT, head_written_us BIGINT,
    head_author BYTEA);
CREATE TYPE baton_event AS (revision BIGINT, kind INTEGER, body BYTEA);
CREATE TYPE baton_conflict AS (id TEXT, revision BIGINT, body BYTEA);
CREATE TYPE baton_checkpoint AS (id TEXT, session_id TEXT, parent_id TEXT, kind INTEGER, reason TEXT,
    state BYTEA, payload BYTEA, payload_content_type TEXT, compression TEXT, size_bytes BIGINT, digest TEXT,
    state_digest TEXT, created_us BIGINT, revision BIGINT, author BYTEA, blobs BYTEA);
-- A search document to add (or to replace, when its text or branch changed).
CREATE TYPE baton_search_doc AS (kind SMALLINT, record_id TEXT, record TEXT, session_id TEXT, branch TEXT,
    author TEXT, created_us BIGINT, revision BIGINT, body TEXT, words TEXT);
-- Any other change of the index: op 1 drops a document, 2 a memory record's documents,
-- 3 replaces a document's text (a purge's mask).
CREATE TYPE baton_search_edit AS (op SMALLINT, kind SMALLINT, record_id TEXT, record TEXT, body TEXT,
    words TEXT);
