//! The statements both backends run as written (`engine.rs`): reads outside a write and the
//! writes that take no project lock. Values are `$n` (SQLite reads `$n` as the n-th value
//! too), every one bound; a list is added by `Engine::push_in`.

use crate::store::rows::{checkpoint_columns, checkpoint_light_columns, entry_columns, session_columns};

/// A session of any project. $1 id.
pub const SESSION_BY_ID: &str = concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = $1");

/// The sessions of a project a list selects: the project is bound after it, then the
/// list's filters (`QueryBuilder`).
pub const LIST_SESSIONS: &str = concat!("SELECT ", session_columns!(), " FROM sessions WHERE project = ");

/// A checkpoint of any project, with its payload or without. $1 id.
pub const CHECKPOINT_BY_ID: &str =
    concat!("SELECT ", checkpoint_columns!(), " FROM checkpoints WHERE id = $1");
pub const CHECKPOINT_LIGHT_BY_ID: &str =
    concat!("SELECT ", checkpoint_light_columns!(), " FROM checkpoints WHERE id = $1");

/// Checkpoints of a project without their payloads: the project is bound after it, then
/// the ids' list.
pub const CHECKPOINTS_LIGHT: &str =
    concat!("SELECT ", checkpoint_light_columns!(), " FROM checkpoints WHERE project = ");

/// A session's checkpoints as tree nodes, with their states' stored sizes (Postgres reads
/// no value to give its length), in creation order. $1 session id.
pub const CHECKPOINT_NODES: &str = "SELECT id, parent_id, CAST(length(state) AS BIGINT) AS state_bytes \
     FROM checkpoints WHERE session_id = $1 ORDER BY revision";

/// $1 project, $2 record.
pub const RECORD_REVISION: &str = "SELECT revision FROM records WHERE project = $1 AND record = $2";

/// The memory entries of a project a list selects: the project is bound after it, then
/// the list's filters (`QueryBuilder`).
pub const LIST_MEMORY: &str = concat!(entry_columns!(), " WHERE m.project = ");

/// A project's newest live memory entries, project-wide and of a branch. $1 project, $2
/// branch, $3 limit.
pub const NEWEST_MEMORY: &str = concat!(
    entry_columns!(),
    " WHERE m.project = $1 AND m.evicted = FALSE AND (m.branch = '' OR m.branch = $2) \
     ORDER BY m.revision DESC, m.seq LIMIT $3"
);

/// A log's revisions and body sizes after a revision (Postgres reads no value to give its
/// length): the project is bound after the text, then the revision, then the kinds' list
/// if any, then the limit.
pub const EVENT_SIZES: &str =
    "SELECT revision, CAST(length(body) AS BIGINT) AS bytes FROM events WHERE project = ";
pub const CONFLICT_SIZES: &str =
    "SELECT revision, CAST(length(body) AS BIGINT) AS bytes FROM conflicts WHERE project = ";
/// A log's rows after a revision: the project is bound after the text, then the revisions,
/// then the kinds' list if any.
pub const EVENT_ROWS: &str = "SELECT revision, body FROM events WHERE project = ";
pub const CONFLICT_ROWS: &str = "SELECT revision, body FROM conflicts WHERE project = ";

/// A project's chunks: the project is bound after the text, then the digests' list.
pub const CHUNKS: &str = "SELECT digest, size_bytes FROM chunks WHERE project = ";
pub const CHUNKS_WITH_DATA: &str = "SELECT digest, size_bytes, data FROM chunks WHERE project = ";
/// $1 project, $2 digest, $3 data, $4 size, $5 created_us.
pub const PUT_CHUNK: &str = "INSERT INTO chunks (project, digest, data, size_bytes, created_us) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, digest) DO NOTHING";
/// $1 caps, $2 project.
pub const SET_CAPS_IF_NONE: &str =
    "UPDATE projects SET memory_caps = $1 WHERE key = $2 AND memory_caps = '{}'";

/// Tokens, oldest first, or one by a column's value ($1).
pub const TOKENS: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens ORDER BY created_us";
pub const TOKEN_BY_NAME: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE name = $1";
pub const TOKEN_BY_HASH: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE secret_hash = $1";
/// $1 id, $2 name, $3 role, $4 project, $5 hash, $6 created_us.
pub const INSERT_TOKEN: &str = "INSERT INTO tokens (id, name, role, project, secret_hash, created_us) \
     VALUES ($1, $2, $3, $4, $5, $6)";
/// $1 time, $2 name.
pub const REVOKE_TOKEN: &str = "UPDATE tokens SET revoked_us = $1 WHERE name = $2 AND revoked_us IS NULL";
/// $1 time, $2 id.
pub const TOUCH_TOKEN: &str = "UPDATE tokens SET last_used_us = $1 WHERE id = $2";

/// A web session that has not expired (`model::WebSessionRow`). $1 secret hash, $2 now.
pub const WEB_SESSION: &str =
    "SELECT token_hash, created_us, expires_us FROM web_sessions WHERE secret_hash = $1 AND expires_us > $2";
/// $1 secret hash, $2 token hash, $3 created, $4 expires.
pub const INSERT_WEB_SESSION: &str =
    "INSERT INTO web_sessions (secret_hash, token_hash, created_us, expires_us) VALUES ($1, $2, $3, $4)";
/// $1 secret hash.
pub const DELETE_WEB_SESSION: &str = "DELETE FROM web_sessions WHERE secret_hash = $1";
/// $1 now.
pub const EXPIRE_WEB_SESSIONS: &str = "DELETE FROM web_sessions WHERE expires_us <= $1";

/// Projects (`model::ProjectRow`), all by key or, with `WHERE key` and a list after it,
/// some.
pub const PROJECTS: &str = "SELECT key, head_revision, events_from, memory_caps, \
     EXISTS (SELECT 1 FROM search_backfill b WHERE b.project = p.key) AS indexing FROM projects p";
/// The project of a row of any project. $1 id.
pub const SESSION_PROJECT: &str = "SELECT project FROM sessions WHERE id = $1";
pub const CHECKPOINT_PROJECT: &str = "SELECT project FROM checkpoints WHERE id = $1";
pub const ENTRY_PROJECT: &str = "SELECT project FROM memory WHERE id = $1";

/// A project's counts (`model::ProjectCounts`). $1 project.
pub const PROJECT_HEAD: &str = "SELECT head_revision, events_from FROM projects WHERE key = $1";
pub const PROJECT_STATUSES: &str =
    "SELECT status, COUNT(*) AS count FROM sessions WHERE project = $1 GROUP BY status";
pub const PROJECT_CHECKPOINTS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM checkpoints WHERE project = $1";
pub const PROJECT_CHUNKS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM chunks WHERE project = $1";
pub const PROJECT_ITEMS: &str = "SELECT COUNT(*), CAST(COALESCE(SUM(items), 0) AS BIGINT), \
     CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM item_logs WHERE project = $1";
pub const PROJECT_MEMORY: &str = "SELECT COUNT(*) FROM memory WHERE project = $1";
pub const PROJECT_EVENTS: &str = "SELECT COUNT(*) FROM events WHERE project = $1";
/// Sessions per status, all projects.
pub const SESSION_COUNTS: &str = "SELECT status, COUNT(*) AS count FROM sessions GROUP BY status";

/// $1 cut-off (µs).
pub const PROJECTS_WITH_OLD_CHECKPOINTS: &str =
    "SELECT DISTINCT project FROM checkpoints WHERE created_us < $1 ORDER BY project";
/// $1 cut-off (µs).
pub const PRUNE_REQUESTS: &str = "DELETE FROM requests WHERE created_us < $1";

/// $1 after (id).
pub const UNSTAMPED: &str =
    "SELECT id FROM checkpoints WHERE state_digest IS NULL AND id > $1 ORDER BY id LIMIT 100";
/// $1 digest, $2 id.
pub const STAMP: &str = "UPDATE checkpoints SET state_digest = $1 WHERE id = $2 AND state_digest IS NULL";

/// A project's thread checkpoints with their parents' keys, with payloads or without: the
/// project is bound after it, then the list's filters (`QueryBuilder`).
pub const THREAD_CHECKPOINTS: &str = concat!(
    "SELECT ",
    checkpoint_columns!(),
    ", (SELECT p.ordered_key FROM checkpoints p WHERE p.id = checkpoints.parent_id) AS parent_key, \
     (SELECT s.thread_key FROM sessions s WHERE s.id = checkpoints.session_id) AS thread_key, \
     (SELECT s.thread_ns FROM sessions s WHERE s.id = checkpoints.session_id) AS thread_ns \
     FROM checkpoints WHERE project = "
);
pub const THREAD_CHECKPOINTS_LIGHT: &str = concat!(
    "SELECT ",
    checkpoint_light_columns!(),
    ", (SELECT p.ordered_key FROM checkpoints p WHERE p.id = checkpoints.parent_id) AS parent_key, \
     (SELECT s.thread_key FROM sessions s WHERE s.id = checkpoints.session_id) AS thread_key, \
     (SELECT s.thread_ns FROM sessions s WHERE s.id = checkpoints.session_id) AS thread_ns \
     FROM checkpoints WHERE project = "
);

/// Pending writes: the project is bound after it, then the checkpoints' list.
pub const PENDING_WRITES: &str = "SELECT checkpoint_id, task_id, idx, channel, task_path, value_type, value, \
     revision FROM pending_writes WHERE project = ";

/// The bytes of pending writes per checkpoint: the project is bound after it, then the
/// checkpoints' list.
pub const PENDING_WRITE_SIZES: &str =
    "SELECT checkpoint_id, CAST(SUM(length(value)) AS BIGINT) FROM pending_writes WHERE project = ";
