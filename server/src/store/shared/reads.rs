// The change log (events, conflicts) and the data the brief is made of.

use baton_proto::v1::{ListConflictsResponse, ListEventsResponse};

use std::sync::Arc;

use crate::core::brief::{self, PreviousBy};
use crate::store::rows::{CheckpointRow, SessionRow};
use crate::store::{BriefData, BriefFor};

impl Backend {
    pub(crate) async fn do_events_after(&self, project: String, after: i64, limit: i64, budget: usize) -> Result<(Vec<Event>, bool)> {
        let mut conn = self.pool.acquire().await?;
        let (bodies, more) = log_page(&mut conn, Log::Events, &project, after, limit, budget, &[]).await?;
        let events: Vec<Event> = bodies.iter().map(|(_, body)| decode_event(body)).collect::<Result<_>>()?;
        // Revisions are gapless, so a first event past after + 1 means compaction removed
        // some (the latest compaction's own event is always there to show it).
        if events.first().is_some_and(|e| e.revision > after + 1) {
            check_not_compacted(&mut conn, &project, after).await?;
        }
        Ok((events, more))
    }

    pub(crate) async fn do_list_events(&self, project: String, after: i64, limit: i64, kinds: Vec<i32>) -> Result<ListEventsResponse> {
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &project).await?;
        check_not_compacted(&mut conn, &project, after).await?;
        let (bodies, more) = log_page(&mut conn, Log::Events, &project, after, limit, crate::core::page::REPLY_BUDGET, &kinds).await?;
        let next_page_token = next_log_token(&bodies, more);
        let events = bodies.iter().map(|(_, body)| decode_event(body)).collect::<Result<_>>()?;
        Ok(ListEventsResponse { events, as_of_revision, next_page_token })
    }

    pub(crate) async fn do_list_conflicts(&self, project: String, after: i64, limit: i64) -> Result<ListConflictsResponse> {
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &project).await?;
        let (bodies, more) = log_page(&mut conn, Log::Conflicts, &project, after, limit, crate::core::page::REPLY_BUDGET, &[]).await?;
        let next_page_token = next_log_token(&bodies, more);
        let conflicts = bodies.iter().map(|(_, body)| decode_conflict(body)).collect::<Result<_>>()?;
        Ok(ListConflictsResponse { conflicts, as_of_revision, next_page_token })
    }

    pub(crate) async fn do_brief_data(&self, q: BriefFor) -> Result<BriefData> {
        // Absent ids are bound as '' (no session has it), never NULL: Postgres plans a
        // statement for a NULL on its own (the subqueries it makes empty cost nothing),
        // estimates that cheaper than the plan it keeps, and so planned these statements
        // again at every brief (about 0.3 ms each).
        let project = q.project.clone();
        let resuming = q.resuming.clone().unwrap_or_default();
        // Left out of the lists: the caller, and the session it is taking over.
        let caller = q.session_id.map(|s| s.to_string()).unwrap_or_default();
        let left_out = vec![project.clone(), caller.clone(), resuming.clone()];
        // Whose previous session (`previous_session`): the resumed one, else the caller's.
        let me = if q.resuming.is_some() { String::new() } else { caller.clone() };
        let history = vec![project.clone(), caller, me, resuming.clone()];
        let read = |sql: &'static String, binds: &Vec<String>| Read { sql, binds: binds.clone() };
        // The head first: everything read after it is at least as new as `as_of_revision`
        // (and the memory section at least as new as `memory_revision`, its cache key).
        let reads = vec![
            read(&BRIEF_STATEMENTS[0], &vec![project, resuming]),
            read(&BRIEF_STATEMENTS[1], &left_out),
            read(&BRIEF_STATEMENTS[2], &left_out),
            read(&BRIEF_STATEMENTS[3], &left_out),
            read(&BRIEF_STATEMENTS[4], &history),
            read(&BRIEF_STATEMENTS[5], &history),
            read(&BRIEF_STATEMENTS[6], &history),
        ];
        let mut rows = self.read_together(reads).await?.into_iter();
        let mut next = || rows.next().unwrap_or_default();
        let [head, unfinished, heads, active, previous, conflicts, previous_heads] = std::array::from_fn(|_| next());
        let (as_of_revision, memory_revision, now_us, resumed_branch): (Option<i64>, Option<i64>, i64, Option<String>) =
            match head.first() {
                Some(row) => sqlx::FromRow::from_row(row)?,
                None => return Err(Error::internal("the brief's head read returned no row")),
            };
        let memory = self.brief_memory(&q, memory_revision, resumed_branch).await?;
        let unfinished = rows_as::<SessionRow>(&unfinished)?;
        let mut heads: HashMap<String, CheckpointRow> =
            rows_as::<CheckpointRow>(&heads)?.into_iter().map(|r| (r.id.clone(), r)).collect();
        // The head checkpoints were read by a statement of their own: a checkpoint written
        // between the two reads moved a session's head, and the one its row names is read now.
        let missing: Vec<&str> =
            unfinished.iter().filter_map(|r| r.head_checkpoint_id.as_deref()).filter(|id| !heads.contains_key(*id)).collect();
        if !missing.is_empty() {
            let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT ");
            sql.push(crate::store::rows::CHECKPOINT_LIGHT).push(" FROM checkpoints WHERE id IN (");
            let mut list = sql.separated(", ");
            for id in missing {
                list.push_bind(id.to_owned());
            }
            sql.push(")");
            let found: Vec<CheckpointRow> = sql.build_query_as().fetch_all(&self.pool).await?;
            heads.extend(found.into_iter().map(|r| (r.id.clone(), r)));
        }
        let unfinished = unfinished
            .into_iter()
            .map(|row| {
                // A corrupt head checkpoint gives no state (verified by its state digest: the
                // payload, maybe megabytes, is neither read nor hashed).
                let state = row
                    .head_checkpoint_id
                    .as_ref()
                    .and_then(|head| heads.remove(head))
                    .and_then(|c| c.verified_state().ok())
                    .and_then(|c| c.state);
                (row.to_proto(), state)
            })
            .collect();
        // The previous session: the candidate the rule of `core::brief::previous` prefers;
        // the conflicts were read since the earliest candidate's start, and are cut to those
        // since the one chosen.
        let candidates = previous
            .iter()
            .map(|row| -> Result<_> {
                let pick: i64 = sqlx::Row::try_get(row, "pick")?;
                let start: i64 = sqlx::Row::try_get(row, "start_revision")?;
                let session = <SessionRow as sqlx::FromRow<Row>>::from_row(row)?;
                Ok(PreviousBy::from_pick(pick).map(|by| (by, (start, session))))
            })
            .filter_map(Result::transpose)
            .collect::<Result<Vec<_>>>()?;
        let chosen = brief::previous(candidates);
        let since = chosen.as_ref().map_or(0, |(_, (start, _))| *start);
        let mut conflicts: Vec<Conflict> =
            rows_as::<(Vec<u8>,)>(&conflicts)?.iter().map(|(b,)| decode_conflict(b)).collect::<Result<_>>()?;
        conflicts.retain(|c| c.revision > since);
        let previous_state = chosen.as_ref().and_then(|(_, (_, s))| s.head_checkpoint_id.clone()).and_then(|head| {
            rows_as::<CheckpointRow>(&previous_heads)
                .ok()?
                .into_iter()
                .find(|c| c.id == head)
                .and_then(|c| c.verified_state().ok())
                .and_then(|c| c.state)
        });
        Ok(BriefData {
            as_of_revision: as_of_revision.unwrap_or(0),
            now_us,
            unfinished,
            memory,
            active: rows_as::<SessionRow>(&active)?.iter().map(SessionRow::to_proto).collect(),
            conflicts,
            previous_by: chosen.as_ref().map(|(by, _)| *by),
            previous: chosen.map(|(_, (_, s))| s.to_proto()),
            previous_state,
        })
    }
}

/// A statement and its parameters ($1, $2, … in order), for `read_together`.
struct Read {
    sql: &'static str,
    binds: Vec<String>,
}

type Row = <Db as sqlx::Database>::Row;

fn rows_as<T>(rows: &[Row]) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, Row>,
{
    Ok(rows.iter().map(T::from_row).collect::<Result<_, sqlx::Error>>()?)
}

/// What the brief reads, each list one statement (what a list depends on is a subquery of
/// it), in the order `do_brief_data` reads them:
/// - the head ($1 project, $2 the session being resumed), with the branch of the session
///   being resumed, whose memory the brief shows when no branch is asked for (a cached
///   memory section then needs no query at all);
/// - the unfinished sessions, their head checkpoints and the active sessions ($1 project,
///   $2 and $3 left out);
/// - the candidates for the previous session, the conflicts since the earliest of them
///   started, and their head checkpoints (see `previous_candidates`).
static BRIEF_STATEMENTS: std::sync::LazyLock<[String; 7]> = std::sync::LazyLock::new(|| {
    const UNFINISHED_LIMIT: i64 = 10;
    const ACTIVE_LIMIT: i64 = 20;
    const CONFLICT_LIMIT: i64 = 50;
    let unfinished = newest_sessions([SessionStatus::Crashed, SessionStatus::Idle], Recency::Updated, UNFINISHED_LIMIT);
    let previous = previous_candidates();
    [
        concat!(
            "SELECT (SELECT head_revision FROM projects WHERE key = $1), (SELECT memory_revision FROM projects WHERE key = $1), ",
            now_us!(),
            ", (SELECT branch FROM sessions WHERE id = $2 AND project = $1)"
        )
        .to_owned(),
        unfinished.clone(),
        format!(
            "SELECT {} FROM checkpoints WHERE id IN (SELECT head_checkpoint_id FROM ({unfinished}) u)",
            crate::store::rows::CHECKPOINT_LIGHT
        ),
        newest_sessions([SessionStatus::Active, SessionStatus::Initializing], Recency::Seen, ACTIVE_LIMIT),
        previous.clone(),
        format!(
            "SELECT body FROM conflicts WHERE project = $1 AND revision > \
             COALESCE((SELECT MIN(start_revision) FROM ({previous}) p), 0) ORDER BY revision DESC LIMIT {CONFLICT_LIMIT}"
        ),
        format!(
            "SELECT {} FROM checkpoints WHERE id IN (SELECT head_checkpoint_id FROM ({previous}) p)",
            crate::store::rows::CHECKPOINT_LIGHT
        ),
    ]
});

/// The candidates for the brief's previous session ($1 project, $2 the caller, $3 the
/// caller again unless it is resuming, $4 the session it resumes), at most one of each kind
/// of `core::brief::PreviousBy`, tagged `pick`: the session being resumed; the one the
/// caller resumed; the latest earlier session of the caller's user on any host (of the
/// caller's host when it has no user name); the project's latest completed session other
/// than the caller. Every candidate is of the project: ids of another project count as ids
/// that do not exist. Each is an indexed read of one row. The caller's own row is read by
/// scalar subqueries, not joined: as a join, Postgres's generic plan walked every session of
/// the project by id (1.2 ms at 2,000 sessions) even when the caller had none to match.
fn previous_candidates() -> String {
    let pick = |n: PreviousBy| n as i64;
    format!(
        "SELECT CAST({resuming} AS BIGINT) AS pick, s.* FROM sessions s WHERE s.id = $4 AND s.project = $1 \
         UNION ALL SELECT CAST({resumed_from} AS BIGINT) AS pick, r.* FROM sessions r \
           WHERE r.id = (SELECT resumed_from FROM sessions WHERE id = $3 AND project = $1) AND r.project = $1 \
         UNION ALL SELECT CAST({same_user} AS BIGINT) AS pick, u.* FROM (SELECT * FROM sessions WHERE project = $1 AND id < $3 \
           AND user_name = (SELECT user_name FROM sessions WHERE id = $3 AND project = $1) \
           AND (user_name <> '' OR host = (SELECT host FROM sessions WHERE id = $3 AND project = $1)) \
           ORDER BY id DESC LIMIT 1) u \
         UNION ALL SELECT CAST({completed} AS BIGINT) AS pick, c.* FROM (SELECT * FROM sessions WHERE project = $1 AND id <> $2 \
           AND status = {status} ORDER BY id DESC LIMIT 1) c",
        resuming = pick(PreviousBy::Resuming),
        resumed_from = pick(PreviousBy::ResumedFrom),
        same_user = pick(PreviousBy::SameUser),
        completed = pick(PreviousBy::LatestCompleted),
        status = status_literal(SessionStatus::Completed)
    )
}

impl Backend {
    /// The brief's memory section: the newest live entries, project-wide and of the branch
    /// (when resuming with no branch given, the resumed session's), from the cache while the
    /// project's memory is unchanged.
    async fn brief_memory(&self, q: &BriefFor, memory_revision: Option<i64>, resumed_branch: Option<String>) -> Result<Arc<Vec<MemoryEntry>>> {
        const MEMORY_LIMIT: i64 = 500;
        let branch = match (&q.resuming, q.branch.is_empty()) {
            (Some(_), true) => resumed_branch.unwrap_or_default(),
            _ => q.branch.clone(),
        };
        if let Some(entries) = memory_revision.and_then(|m| self.memory_cache.get(&q.project, &branch, m)) {
            return Ok(entries);
        }
        let rows: Vec<MemoryRow> = sqlx::query_as(concat!(
            "SELECT m.*, r.revision AS record_revision FROM memory m LEFT JOIN records r ON r.project = m.project AND r.record = m.record",
            " WHERE m.project = $1 AND m.evicted = FALSE AND (m.branch = '' OR m.branch = $2) ORDER BY m.revision DESC, m.seq LIMIT $3"
        ))
        .bind(&q.project)
        .bind(&branch)
        .bind(MEMORY_LIMIT)
        .fetch_all(&self.pool)
        .await?;
        let entries = Arc::new(rows.iter().map(MemoryRow::to_proto).collect::<Vec<_>>());
        if let Some(m) = memory_revision {
            self.memory_cache.put(&q.project, &branch, m, entries.clone());
        }
        Ok(entries)
    }
}

/// The two logs, each a table of encoded messages by project and revision.
#[derive(Clone, Copy)]
enum Log {
    Events,
    Conflicts,
}

/// One page of a log after `after`, as (revision, body): up to `limit` rows and `budget`
/// bytes of bodies (an only row may be larger), and whether rows follow it. The sizes are
/// read first (neither database reads a value to give its length), so bodies past the page
/// are never read. A revision's rows (conflicts may share one) stay in one page.
async fn log_page(
    conn: &mut Conn,
    log: Log,
    project: &str,
    after: i64,
    limit: i64,
    budget: usize,
    kinds: &[i32],
) -> Result<(Vec<(i64, Vec<u8>)>, bool)> {
    let table = match log {
        Log::Events => "events",
        Log::Conflicts => "conflicts",
    };
    let filter = |sql: &mut sqlx::QueryBuilder<Db>| {
        sql.push(" FROM ").push(table).push(" WHERE project = ").push_bind(project.to_owned()).push(" AND revision > ").push_bind(after);
        if !kinds.is_empty() {
            sql.push(" AND kind IN (");
            let mut list = sql.separated(", ");
            for k in kinds {
                list.push_bind(*k);
            }
            sql.push(")");
        }
    };
    let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT revision, CAST(length(body) AS BIGINT)");
    filter(&mut sql);
    sql.push(" ORDER BY revision LIMIT ").push_bind(limit.saturating_add(1));
    let sizes: Vec<(i64, i64)> = sql.build_query_as().fetch_all(&mut *conn).await?;
    let mut page = crate::core::page::Budget::with_bytes(limit, budget);
    let taken = sizes.iter().take_while(|(_, size)| page.take(usize::try_from(*size).unwrap_or(usize::MAX))).count();
    let Some(&(last, _)) = taken.checked_sub(1).and_then(|i| sizes.get(i)) else {
        return Ok((Vec::new(), false));
    };
    let more = sizes[taken..].iter().any(|(revision, _)| *revision > last);
    let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT revision, body");
    filter(&mut sql);
    sql.push(" AND revision <= ").push_bind(last).push(" ORDER BY revision");
    let bodies: Vec<(i64, Vec<u8>)> = sql.build_query_as().fetch_all(&mut *conn).await?;
    Ok((bodies, more))
}

/// The token of the page after these rows, when there is one: the last revision.
fn next_log_token(rows: &[(i64, Vec<u8>)], more: bool) -> String {
    match rows.last() {
        Some((revision, _)) if more => crate::core::page::token(revision),
        _ => String::new(),
    }
}

/// OUT_OF_RANGE when events after `after` were compacted away.
async fn check_not_compacted(conn: &mut Conn, project: &str, after: i64) -> Result<()> {
    let from: Option<(i64,)> = sqlx::query_as("SELECT events_from FROM projects WHERE key = $1").bind(project).fetch_optional(&mut *conn).await?;
    match from {
        Some((from,)) if from > 0 && after + 1 < from => Err(Error::OutOfRange(format!(
            "events of project {project:?} before revision {from} were compacted; the oldest kept is {from}: re-read the \
             state (replies carry as_of_revision) and list or watch from there"
        ))),
        _ => Ok(()),
    }
}

/// A session status as an SQL literal, for queries whose plans depend on it. Bound, it
/// is a parameter, and once Postgres plans a prepared statement generically it estimates
/// any status as common as the most common one: at 10,000 active sessions the brief's
/// search for a completed one walked every session of the project by id (1.5 ms) instead
/// of the empty (project, status) index range.
fn status_literal(status: SessionStatus) -> String {
    (status as i32).to_string()
}

#[derive(Clone, Copy)]
enum Recency {
    Updated,
    Seen,
}

/// The `limit` most recent sessions of a project in either status, other than two ($1
/// project, $2 and $3 left out), newest first: one index range per status
/// (`project, status, <recency>`), merged, so the cost does not grow with the number of
/// sessions (an `IN` over two statuses made the databases sort them all: 12–22 ms at
/// 10,000 active sessions). The statuses are literals, not bound: see `status_literal`.
fn newest_sessions(statuses: [SessionStatus; 2], by: Recency, limit: i64) -> String {
    let column = match by {
        Recency::Updated => "updated_us",
        Recency::Seen => "last_seen_us",
    };
    let [a, b] = statuses.map(|status| {
        format!(
            "SELECT * FROM (SELECT * FROM sessions WHERE project = $1 AND status = {} AND id <> $2 AND id <> $3 \
             ORDER BY {column} DESC LIMIT {limit}) s{}",
            status_literal(status),
            status as i32
        )
    });
    format!("SELECT * FROM ({a} UNION ALL {b}) newest ORDER BY {column} DESC, id DESC LIMIT {limit}")
}
