// The change log (events, conflicts) and the data the brief is made of.

use baton_proto::v1::{ListConflictsResponse, ListEventsResponse, Session};

use std::sync::Arc;

use crate::store::{BriefData, BriefFor};

impl Backend {
    pub(crate) async fn do_events_after(&self, project: String, after: i64, limit: i64) -> Result<Vec<Event>> {
        let rows: Vec<(Vec<u8>,)> =
            sqlx::query_as("SELECT body FROM events WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3")
                .bind(&project)
                .bind(after)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
        let events: Vec<Event> = rows.iter().map(|(body,)| decode_event(body)).collect::<Result<_>>()?;
        // Revisions are gapless, so a first event past after + 1 means compaction removed
        // some (the latest compaction's own event is always there to show it).
        if events.first().is_some_and(|e| e.revision > after + 1) {
            let mut conn = self.pool.acquire().await?;
            check_not_compacted(&mut conn, &project, after).await?;
        }
        Ok(events)
    }

    pub(crate) async fn do_list_events(&self, project: String, after: i64, limit: i64, kinds: Vec<i32>) -> Result<ListEventsResponse> {
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &project).await?;
        check_not_compacted(&mut conn, &project, after).await?;
        let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT body FROM events WHERE project = ");
        sql.push_bind(project).push(" AND revision > ").push_bind(after);
        if !kinds.is_empty() {
            sql.push(" AND kind IN (");
            let mut list = sql.separated(", ");
            for k in kinds {
                list.push_bind(k);
            }
            sql.push(")");
        }
        sql.push(" ORDER BY revision LIMIT ").push_bind(limit);
        let rows: Vec<(Vec<u8>,)> = sql.build_query_as().fetch_all(&mut *conn).await?;
        let events = rows.iter().map(|(body,)| decode_event(body)).collect::<Result<_>>()?;
        Ok(ListEventsResponse { events, as_of_revision })
    }

    pub(crate) async fn do_list_conflicts(&self, project: String, after: i64, limit: i64) -> Result<ListConflictsResponse> {
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &project).await?;
        let rows: Vec<(Vec<u8>,)> =
            sqlx::query_as("SELECT body FROM conflicts WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3")
                .bind(&project)
                .bind(after)
                .bind(limit)
                .fetch_all(&mut *conn)
                .await?;
        let conflicts = rows.iter().map(|(body,)| decode_conflict(body)).collect::<Result<_>>()?;
        Ok(ListConflictsResponse { conflicts, as_of_revision })
    }

    pub(crate) async fn do_brief_data(&self, q: BriefFor) -> Result<BriefData> {
        const UNFINISHED_LIMIT: i64 = 10;
        const ACTIVE_LIMIT: i64 = 20;
        const CONFLICT_LIMIT: i64 = 50;
        let project = &q.project;
        // The head first: everything read after it is at least as new as `as_of_revision`
        // (and the memory section at least as new as `memory_revision`, its cache key).
        // With it, the branch of the session being resumed, whose memory the brief shows
        // when no branch is asked for: a cached memory section then needs no query at all.
        let (as_of_revision, memory_revision, now_us, resumed_branch): (Option<i64>, Option<i64>, i64, Option<String>) =
            sqlx::query_as(concat!(
                "SELECT (SELECT head_revision FROM projects WHERE key = $1), (SELECT memory_revision FROM projects WHERE key = $1), ",
                now_us!(),
                ", (SELECT branch FROM sessions WHERE id = $2)"
            ))
            .bind(project)
            .bind(q.resuming.as_deref())
            .fetch_one(&self.pool)
            .await?;
        let as_of_revision = as_of_revision.unwrap_or(0);
        // Left out of the lists: the caller, and the session it is taking over.
        let caller = q.session_id.map(|s| s.to_string()).unwrap_or_default();
        let left_out = [caller.as_str(), q.resuming.as_deref().unwrap_or_default()];
        // Then four independent chains of reads, each on its own connection: every statement
        // is a hand-off (SQLite's connection thread, a Postgres round trip), and waiting on
        // them side by side instead of in a row is most of a brief's latency.
        let (unfinished, memory, active, (previous, conflict_rows)) = tokio::try_join!(
            self.brief_unfinished(project, left_out, UNFINISHED_LIMIT),
            self.brief_memory(&q, memory_revision, resumed_branch),
            async {
                let mut conn = self.pool.acquire().await?;
                newest_sessions(&mut conn, project, [SessionStatus::Active, SessionStatus::Initializing], left_out, Recency::Seen, ACTIVE_LIMIT).await
            },
            self.brief_history(&q, &caller, CONFLICT_LIMIT),
        )?;

        Ok(BriefData {
            as_of_revision,
            now_us,
            unfinished,
            memory,
            active: active.iter().map(SessionRow::to_proto).collect(),
            conflicts: conflict_rows.iter().map(|(b,)| decode_conflict(b)).collect::<Result<_>>()?,
            previous: previous.map(|p| p.to_proto()),
        })
    }
}

impl Backend {
    /// The brief's unfinished sessions (crashed or idle, newest first) with the state of
    /// their head checkpoints (read in one query; a corrupt one gives no state).
    async fn brief_unfinished(&self, project: &str, left_out: [&str; 2], limit: i64) -> Result<Vec<(Session, Option<CheckpointState>)>> {
        let mut conn = self.pool.acquire().await?;
        let rows = newest_sessions(&mut conn, project, [SessionStatus::Crashed, SessionStatus::Idle], left_out, Recency::Updated, limit).await?;
        let heads: Vec<String> = rows.iter().filter_map(|r| r.head_checkpoint_id.clone()).collect();
        let mut head_rows: HashMap<String, CheckpointRow> = HashMap::new();
        if !heads.is_empty() {
            let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT * FROM checkpoints WHERE id IN (");
            let mut list = sql.separated(", ");
            for id in heads {
                list.push_bind(id);
            }
            sql.push(")");
            let found: Vec<CheckpointRow> = sql.build_query_as().fetch_all(&mut *conn).await?;
            head_rows = found.into_iter().map(|r| (r.id.clone(), r)).collect();
        }
        Ok(rows
            .into_iter()
            .map(|row| {
                let state = row
                    .head_checkpoint_id
                    .as_ref()
                    .and_then(|head| head_rows.remove(head))
                    .and_then(|c| c.verified(false).ok())
                    .and_then(|c| c.state);
                (row.to_proto(), state)
            })
            .collect())
    }

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

    /// The caller's previous session (the one it resumes or resumed, else the latest other
    /// session of the same user and host, any agent, else the project's latest completed
    /// other session) and the conflicts since it started.
    async fn brief_history(&self, q: &BriefFor, caller: &str, limit: i64) -> Result<(Option<SessionRow>, Vec<(Vec<u8>,)>)> {
        let project = q.project.as_str();
        let mut conn = self.pool.acquire().await?;
        let me = match (&q.resuming, &q.session_id) {
            (Some(_), _) | (None, None) => None,
            (None, Some(id)) => session_row(&mut conn, &id.to_string()).await?,
        };
        let previous: Option<SessionRow> = match (&q.resuming, &me) {
            (Some(resumed), _) => session_row(&mut conn, resumed).await?,
            (None, Some(me)) if me.resumed_from.is_some() => session_row(&mut conn, me.resumed_from.as_deref().unwrap_or_default()).await?,
            (None, Some(me)) => {
                sqlx::query_as(
                    "SELECT * FROM sessions WHERE project = $1 AND id < $2 AND host = $3 AND user_name = $4 ORDER BY id DESC LIMIT 1",
                )
                .bind(project)
                .bind(&me.id)
                .bind(&me.host)
                .bind(&me.user_name)
                .fetch_optional(&mut *conn)
                .await?
            }
            (None, None) => None,
        };
        let previous = match previous {
            Some(p) => Some(p),
            None => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT * FROM sessions WHERE project = $1 AND id <> $2 AND status = {} ORDER BY id DESC LIMIT 1",
                status_literal(SessionStatus::Completed)
            )))
            .bind(project)
            .bind(caller)
            .fetch_optional(&mut *conn)
            .await?,
        };
        let since = previous.as_ref().map_or(0, |p| p.start_revision);
        let conflicts: Vec<(Vec<u8>,)> = sqlx::query_as(
            "SELECT body FROM conflicts WHERE project = $1 AND revision > $2 ORDER BY revision DESC LIMIT $3",
        )
        .bind(project)
        .bind(since)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
        Ok((previous, conflicts))
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

#[derive(Clone, Copy)]
enum Recency {
    Updated,
    Seen,
}

/// The `limit` most recent sessions of a project in either status, other than `left_out`:
/// one indexed query per status (`project, status, <recency>`), merged, so the cost does not
/// grow with the number of sessions (an `IN` over two statuses made the databases sort them
/// all: 12–22 ms at 10,000 active sessions).
async fn newest_sessions(
    conn: &mut Conn,
    project: &str,
    statuses: [SessionStatus; 2],
    left_out: [&str; 2],
    by: Recency,
    limit: i64,
) -> Result<Vec<SessionRow>> {
    // One index range per status (an IN over both would sort every session of the
    // project), both in one statement. The statuses are literals, not bound: see
    // `status_literal`.
    let column = match by {
        Recency::Updated => "updated_us",
        Recency::Seen => "last_seen_us",
    };
    let [a, b] = statuses.map(|status| {
        format!(
            "SELECT * FROM (SELECT * FROM sessions WHERE project = $1 AND status = {} AND id <> $2 AND id <> $3 \
             ORDER BY {column} DESC LIMIT $4) s{}",
            status_literal(status),
            status as i32
        )
    });
    let mut rows: Vec<SessionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!("{a} UNION ALL {b}")))
        .bind(project)
        .bind(left_out[0])
        .bind(left_out[1])
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    let key = |r: &SessionRow| match by {
        Recency::Updated => r.updated_us,
        Recency::Seen => r.last_seen_us,
    };
    rows.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| b.id.cmp(&a.id)));
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    Ok(rows)
}
