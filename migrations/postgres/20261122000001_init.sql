-- Baton schema, Postgres. Times are µs since the Unix epoch; actors, events and conflicts are
-- stored as encoded baton.v1 protobuf messages.

CREATE TABLE projects (
    key            TEXT PRIMARY KEY NOT NULL,
    head_revision  BIGINT NOT NULL,
    last_write_us  BIGINT NOT NULL,
    created_us     BIGINT NOT NULL,
    memory_caps    TEXT NOT NULL DEFAULT '{}'
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
    author               BYTEA NOT NULL
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, revision);

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
