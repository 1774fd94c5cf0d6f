-- Baton's schema on SQLite. Times are µs since the Unix epoch; actors, events and
-- conflicts are stored as encoded baton.v1 protobuf messages. A database made before this
-- baseline (by a development build) is adopted at start-up (`server/src/store/schema.rs`).

-- One row per project: its revision counter and what every write reads with its lock.
CREATE TABLE projects (
    key            TEXT PRIMARY KEY NOT NULL,
    head_revision  INTEGER NOT NULL,
    last_write_us  INTEGER NOT NULL,
    created_us     INTEGER NOT NULL,
    memory_caps    TEXT NOT NULL DEFAULT '{}',
    -- Event-log compaction: events below this revision were deleted (0 = none ever were).
    events_from    BIGINT NOT NULL DEFAULT 0,
    -- The revision of the last write that changed the project's memory: the brief keeps
    -- its memory section while this is unchanged.
    memory_revision INTEGER NOT NULL DEFAULT 0
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
    lease_ttl_ms       INTEGER NOT NULL,
    last_seen_us       INTEGER NOT NULL,
    head_checkpoint_id TEXT,
    git_base           TEXT NOT NULL,
    git_head           TEXT NOT NULL,
    summary            TEXT NOT NULL,
    tool_count         INTEGER NOT NULL,
    resumed_from       TEXT,
    resumed_by         TEXT,
    metadata           TEXT NOT NULL,
    created_us         INTEGER NOT NULL,
    updated_us         INTEGER NOT NULL,
    start_revision     INTEGER NOT NULL,
    revision           INTEGER NOT NULL,
    written_us         INTEGER NOT NULL,
    author             BLOB NOT NULL,
    head_revision      INTEGER NOT NULL,
    head_written_us    INTEGER NOT NULL,
    head_author        BLOB NOT NULL
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
    state                BLOB NOT NULL,
    payload              BLOB NOT NULL,
    payload_content_type TEXT NOT NULL,
    compression          TEXT NOT NULL,
    size_bytes           INTEGER NOT NULL,
    digest               TEXT NOT NULL,
    created_us           INTEGER NOT NULL,
    revision             INTEGER NOT NULL,
    author               BLOB NOT NULL,
    -- The blobs a checkpoint refers to (encoded baton.v1.BlobRef list; empty = none).
    blobs                BLOB NOT NULL DEFAULT x'',
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
    author      BLOB NOT NULL,
    revision    INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    created_us  INTEGER NOT NULL,
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
    revision    INTEGER NOT NULL,
    written_us  INTEGER NOT NULL,
    author      BLOB NOT NULL,
    PRIMARY KEY (project, record)
);

CREATE TABLE events (
    project   TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    kind      INTEGER NOT NULL,
    body      BLOB NOT NULL,
    PRIMARY KEY (project, revision)
);

CREATE TABLE conflicts (
    id        TEXT PRIMARY KEY NOT NULL,
    project   TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    body      BLOB NOT NULL
);
CREATE INDEX conflicts_project_revision ON conflicts (project, revision);

-- Idempotency: one row per request_id per project, with the reply it got.
CREATE TABLE requests (
    project       TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    request_hash  BLOB NOT NULL,
    reply         BLOB NOT NULL,
    created_us    INTEGER NOT NULL,
    PRIMARY KEY (project, request_id)
);
CREATE INDEX requests_created ON requests (created_us);

-- Content-addressed chunks of large blobs (agent transcripts), shared by checkpoints.
CREATE TABLE chunks (
    project     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    data        BLOB NOT NULL,
    size_bytes  INTEGER NOT NULL,
    created_us  INTEGER NOT NULL,
    PRIMARY KEY (project, digest)
);

-- Access tokens: only the sha256 of the secret is stored.
CREATE TABLE tokens (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    project       TEXT,
    secret_hash   TEXT NOT NULL UNIQUE,
    created_us    INTEGER NOT NULL,
    last_used_us  INTEGER,
    revoked_us    INTEGER
);

-- Full-text search (server/src/core/search): one document per memory entry, checkpoint and
-- session, written in the transaction of the write that changes the record. Baton splits
-- text into words itself: FTS5 indexes them with its `ascii` tokenizer, which splits at
-- spaces and ASCII punctuation only, so the words are exactly Baton's, each behind its
-- project's prefix (`core::search::project_prefix`), so a search reads its own project's
-- lists of documents only. The FTS5 table takes its text from `search_docs` (external
-- content), kept in step by the triggers.
CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    kind INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    record TEXT NOT NULL,
    session_id TEXT NOT NULL,
    branch TEXT NOT NULL,
    author TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    body TEXT NOT NULL,
    words TEXT NOT NULL,
    UNIQUE (project, kind, record_id)
);

CREATE VIRTUAL TABLE search_fts USING fts5(words, content = 'search_docs', content_rowid = 'id',
    tokenize = 'ascii');

CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, words) VALUES (new.id, new.words);
END;
CREATE TRIGGER search_docs_dropped AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words) VALUES ('delete', old.id, old.words);
END;
CREATE TRIGGER search_docs_changed AFTER UPDATE OF words ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words) VALUES ('delete', old.id, old.words);
    INSERT INTO search_fts (rowid, words) VALUES (new.id, new.words);
END;

-- Projects whose records the server indexes again after start-up (`jobs::search`), a batch
-- at a time under the project's lock, each taken off this list when done; until then their
-- searches say the index is partial. A migration that changes how text is indexed lists the
-- projects here (SQL cannot split text as Baton does).
CREATE TABLE search_backfill (project TEXT PRIMARY KEY);
