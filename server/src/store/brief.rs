//! What the brief reads (`service::brief`): seven statements, the same on both backends
//! but for the database clock, each list one statement (what a list depends on is a
//! subquery of it). Every statement takes the same four values, by number: $1 the project,
//! $2 the caller's session, $3 the caller's session unless it is resuming, $4 the session it
//! resumes ('' for none: see `BriefKeys`).
//!
//! The statuses are written into the text: bound, Postgres's generic plan would estimate
//! every status as common as the most common one (at 10,000 active sessions the search for
//! a completed one walked every session of the project by id instead of the empty index
//! range). They are Baton's constants, not values.

use baton_proto::v1::SessionStatus;

use sqlx::FromRow as _;

use super::model::{Checkpoint, Session};
use super::rows::{checkpoint_light_columns, session_columns};
use crate::core::brief::PreviousBy;

/// The ids a brief reads by. Absent ones are '' (no session has it), never NULL: Postgres
/// plans a statement for a NULL on its own (the subqueries it makes empty cost nothing),
/// estimates that cheaper than the plan it keeps, and so planned these statements again at
/// every brief.
#[derive(Debug, Clone, Default)]
pub struct BriefKeys {
    pub project: String,
    /// The caller's session, left out of the lists.
    pub caller: String,
    /// Whose previous session is looked for: the caller's, unless it is resuming.
    pub me: String,
    /// The session being resumed, left out of the lists (it is no longer unfinished).
    pub resuming: String,
}

impl BriefKeys {
    /// The values of $1 … $4.
    pub fn values(&self) -> [&str; 4] {
        [&self.project, &self.caller, &self.me, &self.resuming]
    }
}

/// The brief's head row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BriefHead {
    pub head_revision: Option<i64>,
    /// The memory section's cache key (`MemoryCache`).
    pub memory_revision: Option<i64>,
    pub now_us: i64,
    /// The branch of the session being resumed.
    pub branch: Option<String>,
}

/// A candidate for the previous session, with why (`PreviousBy`) and its start revision.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PreviousRow {
    pub pick: i64,
    pub start_revision: i64,
    #[sqlx(flatten)]
    pub session: Session,
}

/// What the statements read, in their order.
#[derive(Debug, Clone, Default)]
pub struct BriefRows {
    pub head: Option<BriefHead>,
    pub unfinished: Vec<Session>,
    /// The unfinished sessions' head checkpoints, without payloads.
    pub heads: Vec<Checkpoint>,
    pub active: Vec<Session>,
    pub previous: Vec<PreviousRow>,
    /// Encoded conflicts since the earliest candidate started, newest first.
    pub conflicts: Vec<Vec<u8>>,
    /// The candidates' head checkpoints, without payloads.
    pub previous_heads: Vec<Checkpoint>,
}

const UNFINISHED_LIMIT: i64 = 10;
const ACTIVE_LIMIT: i64 = 20;
const CONFLICT_LIMIT: i64 = 50;

const CHECKPOINT_LIGHT: &str = checkpoint_light_columns!();

/// A session's columns (its start revision among them), each of `alias`.
fn sessions(alias: &str) -> String {
    let columns: Vec<String> =
        session_columns!().split(',').map(|c| format!("{alias}.{}", c.trim())).collect();
    columns.join(", ")
}

/// The seven statements, `now_us` the backend's clock expression (µs since the epoch).
pub fn statements(now_us: &str) -> [String; 7] {
    let unfinished = newest([SessionStatus::Crashed, SessionStatus::Idle], "updated_us", UNFINISHED_LIMIT);
    let previous = previous_candidates();
    [
        format!(
            "SELECT (SELECT head_revision FROM projects WHERE key = $1) AS head_revision, \
             (SELECT memory_revision FROM projects WHERE key = $1) AS memory_revision, {now_us} AS now_us, \
             (SELECT branch FROM sessions WHERE id = $4 AND project = $1) AS branch"
        ),
        unfinished.clone(),
        format!(
            "SELECT {CHECKPOINT_LIGHT} FROM checkpoints WHERE id IN (SELECT head_checkpoint_id FROM ({unfinished}) u) \
             AND project = $1"
        ),
        newest([SessionStatus::Active, SessionStatus::Initializing], "last_seen_us", ACTIVE_LIMIT),
        previous.clone(),
        format!(
            "SELECT body FROM conflicts WHERE project = $1 AND revision > \
             COALESCE((SELECT MIN(start_revision) FROM ({previous}) p), 0) ORDER BY revision DESC LIMIT {CONFLICT_LIMIT}"
        ),
        format!(
            "SELECT {CHECKPOINT_LIGHT} FROM checkpoints WHERE id IN (SELECT head_checkpoint_id FROM ({previous}) p) \
             AND project = $1"
        ),
    ]
}

/// The `limit` most recent sessions of the project in either status but the caller's and
/// the resumed one, newest first: one index range per status (`project, status, <column>`),
/// merged, so the cost does not grow with the number of sessions (an `IN` over two statuses
/// made the databases sort them all).
fn newest(statuses: [SessionStatus; 2], column: &str, limit: i64) -> String {
    let all = sessions("s");
    let [a, b] = statuses.map(|status| {
        format!(
            "SELECT * FROM (SELECT {all} FROM sessions s WHERE s.project = $1 AND s.status = {} AND s.id <> $2 \
             AND s.id <> $4 ORDER BY s.{column} DESC LIMIT {limit}) s{}",
            status as i32, status as i32
        )
    });
    format!("SELECT * FROM ({a} UNION ALL {b}) newest ORDER BY {column} DESC, id DESC LIMIT {limit}")
}

/// A successor `baton resume` made that no conversation took up (no agent conversation, no
/// work of its own): it stands for the session it resumed.
const UNTAKEN: &str = "(x.resumed_from IS NOT NULL AND x.agent_session_id = '' AND x.tool_count = 0 \
     AND x.head_checkpoint_id IS NULL)";

/// How many of the user's latest sessions are looked at for one that did work (a user who
/// runs many agents at once has many running): a bound on the brief's read.
const USER_RECENT: i64 = 64;

/// A session that did work: tool calls, a checkpoint, a summary, or commits.
const WORKED: &str = "(x.tool_count > 0 OR x.head_checkpoint_id IS NOT NULL OR x.summary <> '' \
     OR (x.git_head <> '' AND x.git_head <> x.git_base))";

/// The candidates for the brief's previous session, at most one of each kind of
/// `PreviousBy`, tagged `pick`: the session being resumed; the one the caller resumed; the
/// latest earlier session of the caller's user on any host (of the caller's host when it
/// has no user name) that did work and is not still running, among the user's
/// `USER_RECENT` latest, an untaken successor standing for the session it resumed; the
/// project's latest completed session other than the caller. Every candidate is of the
/// project: ids of another project count as ids that do not exist. Each is an indexed read
/// of one row, the user's a bounded range. The caller's own row is read by scalar
/// subqueries, not joined: as a join, Postgres's generic plan walked every session of the
/// project by id even when the caller had none to match (docs/performance.md).
fn previous_candidates() -> String {
    let pick = |by: PreviousBy| by as i64;
    let (s, r, u, c) = (sessions("s"), sessions("r"), sessions("u"), sessions("c"));
    format!(
        "SELECT CAST({resuming} AS BIGINT) AS pick, {s} FROM sessions s WHERE s.id = $4 AND s.project = $1 \
         UNION ALL SELECT CAST({resumed_from} AS BIGINT) AS pick, {r} FROM sessions r \
           WHERE r.id = (SELECT resumed_from FROM sessions WHERE id = $3 AND project = $1) AND r.project = $1 \
         UNION ALL SELECT CAST({same_user} AS BIGINT) AS pick, {u} FROM sessions u WHERE u.project = $1 AND u.id = \
           (SELECT CASE WHEN {untaken} THEN x.resumed_from ELSE x.id END FROM (SELECT id, resumed_from, \
           agent_session_id, tool_count, head_checkpoint_id, status, summary, git_head, git_base FROM sessions \
           WHERE project = $1 AND id < $3 AND user_name = (SELECT user_name FROM sessions WHERE id = $3 AND project = $1) \
           AND (user_name <> '' OR host = (SELECT host FROM sessions WHERE id = $3 AND project = $1)) \
           ORDER BY id DESC LIMIT {recent}) x \
           WHERE {untaken} OR (x.status NOT IN ({active}, {initializing}) AND {worked}) ORDER BY x.id DESC LIMIT 1) \
         UNION ALL SELECT CAST({completed} AS BIGINT) AS pick, {c} FROM (SELECT * FROM sessions WHERE project = $1 \
           AND id <> $2 AND status = {status} ORDER BY id DESC LIMIT 1) c",
        resuming = pick(PreviousBy::Resuming),
        resumed_from = pick(PreviousBy::ResumedFrom),
        same_user = pick(PreviousBy::SameUser),
        completed = pick(PreviousBy::LatestCompleted),
        status = SessionStatus::Completed as i32,
        active = SessionStatus::Active as i32,
        initializing = SessionStatus::Initializing as i32,
        untaken = UNTAKEN,
        worked = WORKED,
        recent = USER_RECENT,
    )
}

/// The statements' rows, decoded (`statements` gives one list per statement, in order).
pub fn decode<R: sqlx::Row>(statements: Vec<Vec<R>>) -> Result<BriefRows, sqlx::Error>
where
    for<'r> BriefHead: sqlx::FromRow<'r, R>,
    for<'r> Session: sqlx::FromRow<'r, R>,
    for<'r> Checkpoint: sqlx::FromRow<'r, R>,
    for<'r> PreviousRow: sqlx::FromRow<'r, R>,
    for<'r> (Vec<u8>,): sqlx::FromRow<'r, R>,
{
    fn all<T: for<'r> sqlx::FromRow<'r, R>, R: sqlx::Row>(rows: &[R]) -> Result<Vec<T>, sqlx::Error> {
        rows.iter().map(T::from_row).collect()
    }
    let mut statements = statements.into_iter();
    let mut next = || statements.next().unwrap_or_default();
    let [head, unfinished, heads, active, previous, conflicts, previous_heads] =
        std::array::from_fn(|_| next());
    Ok(BriefRows {
        head: head.first().map(BriefHead::from_row).transpose()?,
        unfinished: all(&unfinished)?,
        heads: all(&heads)?,
        active: all(&active)?,
        previous: all(&previous)?,
        conflicts: all::<(Vec<u8>,), R>(&conflicts)?.into_iter().map(|(body,)| body).collect(),
        previous_heads: all(&previous_heads)?,
    })
}
