-- Orchestrators' threads (ThreadService): a session found by the orchestrator's key and
-- checkpoint namespace, checkpoints under the orchestrator's own ordered key with a
-- metadata document (a JSON object as text; its "run_id" kept apart for
-- DeleteThreadRuns), and pending writes per checkpoint.
ALTER TABLE sessions ADD COLUMN thread_key TEXT;
ALTER TABLE sessions ADD COLUMN thread_ns TEXT;
CREATE UNIQUE INDEX sessions_thread ON sessions (project, thread_key, thread_ns) WHERE thread_key IS NOT NULL;

-- Compared by its bytes (uuid v6 text sorts by time), whatever the database's collation.
ALTER TABLE checkpoints ADD COLUMN ordered_key TEXT COLLATE "C";
ALTER TABLE checkpoints ADD COLUMN metadata TEXT;
ALTER TABLE checkpoints ADD COLUMN run_id TEXT;
-- A namespace's checkpoints by key (unique; byte order), and a project's, newest first.
CREATE UNIQUE INDEX checkpoints_ordered_key ON checkpoints (session_id, ordered_key) WHERE ordered_key IS NOT NULL;
CREATE INDEX checkpoints_project_key ON checkpoints (project, ordered_key, id) WHERE ordered_key IS NOT NULL;
CREATE INDEX checkpoints_run ON checkpoints (project, run_id) WHERE run_id IS NOT NULL;

-- A task's write to a channel, pending on a checkpoint; gone with its checkpoint. Read in
-- (task_path, task_id, idx) order by their bytes, the order LangGraph replays them in.
CREATE TABLE pending_writes (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    task_id       TEXT COLLATE "C" NOT NULL,
    idx           INTEGER NOT NULL,
    project       TEXT NOT NULL,
    channel       TEXT NOT NULL,
    task_path     TEXT COLLATE "C" NOT NULL,
    value_type    TEXT NOT NULL,
    value         BYTEA NOT NULL,
    revision      BIGINT NOT NULL,
    PRIMARY KEY (checkpoint_id, task_id, idx)
);
CREATE INDEX pending_writes_project ON pending_writes (project);

-- The write function takes sessions with their thread, and pending writes. The old type
-- goes, and with it the write functions of the servers before this one, which took it.
DROP TYPE baton_session CASCADE;
CREATE TYPE baton_session AS (id TEXT, agent INTEGER, agent_session_id TEXT, host TEXT, user_name TEXT,
    cwd TEXT, branch TEXT, goal TEXT, status INTEGER, lease_ttl_ms BIGINT, last_seen_us BIGINT,
    head_checkpoint_id TEXT, git_base TEXT, git_head TEXT, summary TEXT, tool_count BIGINT,
    resumed_from TEXT, resumed_by TEXT, metadata TEXT, created_us BIGINT, updated_us BIGINT,
    revision BIGINT, written_us BIGINT, author BYTEA, head_revision BIGINT, head_written_us BIGINT,
    head_author BYTEA, thread_key TEXT, thread_ns TEXT);
CREATE TYPE baton_pending_write AS (checkpoint_id TEXT, task_id TEXT, idx INTEGER, channel TEXT,
    task_path TEXT, value_type TEXT, value BYTEA, revision BIGINT);
