-- Orchestrators' threads (ThreadService): a session found by the orchestrator's key and
-- checkpoint namespace, checkpoints under the orchestrator's own ordered key with a
-- metadata document (a JSON object; its "run_id" kept apart for DeleteThreadRuns), and
-- pending writes per checkpoint.
ALTER TABLE sessions ADD COLUMN thread_key TEXT;
ALTER TABLE sessions ADD COLUMN thread_ns TEXT;
CREATE UNIQUE INDEX sessions_thread ON sessions (project, thread_key, thread_ns) WHERE thread_key IS NOT NULL;

ALTER TABLE checkpoints ADD COLUMN ordered_key TEXT;
ALTER TABLE checkpoints ADD COLUMN metadata TEXT;
ALTER TABLE checkpoints ADD COLUMN run_id TEXT;
-- A namespace's checkpoints by key (unique), and a project's, newest first.
CREATE UNIQUE INDEX checkpoints_ordered_key ON checkpoints (session_id, ordered_key) WHERE ordered_key IS NOT NULL;
CREATE INDEX checkpoints_project_key ON checkpoints (project, ordered_key, id) WHERE ordered_key IS NOT NULL;
CREATE INDEX checkpoints_run ON checkpoints (project, run_id) WHERE run_id IS NOT NULL;

-- A task's write to a channel, pending on a checkpoint; gone with its checkpoint.
CREATE TABLE pending_writes (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    task_id       TEXT NOT NULL,
    idx           INTEGER NOT NULL,
    project       TEXT NOT NULL,
    channel       TEXT NOT NULL,
    task_path     TEXT NOT NULL,
    value_type    TEXT NOT NULL,
    value         BLOB NOT NULL,
    revision      INTEGER NOT NULL,
    PRIMARY KEY (checkpoint_id, task_id, idx)
);
CREATE INDEX pending_writes_project ON pending_writes (project);
