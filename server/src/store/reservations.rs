//! Reservations' reads and renewals (`ReservationService`), implemented once for both
//! backends (each statement one text, `$n`): those of a write on its transaction
//! (`ReservationTx`), the others on the pool (`ReservationReads`). Their changes
//! (`model::ReservationChange`) are each backend's statements (`sqlite::reservations`,
//! `postgres::reservations`).

use std::future::Future;

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use super::engine::{Engine, List};
use super::model::ReservationSettingsRow;
use super::writer::{Backend, Tx};
use crate::core::reservation::Row;
use crate::error::Result;

/// A reservation's columns, in `Row`'s order.
macro_rules! reservation_columns {
    () => {
        "id, session_id, request, kind, target, branch, reason, status, holder, created_us, created_revision, \
         granted_us, expires_us, ended_us, ended_by, revision"
    };
}
pub(crate) use reservation_columns;

/// A project's held and waiting rows (those whose time ran out too: a write ends them). $1
/// project.
const LIVE: &str =
    concat!("SELECT ", reservation_columns!(), " FROM reservations WHERE project = $1 AND status IN (1, 2)");
/// $1 project.
const SETTINGS: &str =
    "SELECT ttl_seconds, enforcement, auto_reserve, revision FROM reservation_settings WHERE project = $1";
/// A project's live rows, counted. $1 project, $2 now.
const LIVE_COUNT: &str = "SELECT CAST(count(*) AS BIGINT) FROM reservations WHERE project = $1 AND status IN (1, 2) \
     AND expires_us > $2";
/// Projects with rows whose time ran out. $1 now.
const LAPSED_PROJECTS: &str =
    "SELECT DISTINCT project FROM reservations WHERE status IN (1, 2) AND expires_us <= $1 LIMIT 500";
/// Ended rows older than $1.
const PRUNE_ENDED: &str = "DELETE FROM reservations WHERE status > 2 AND ended_us < $1";
/// Whether there are any. $1 cut-off.
const ANY_ENDED: &str =
    "SELECT CAST(1 AS BIGINT) FROM reservations WHERE status > 2 AND ended_us < $1 LIMIT 1";

/// What a write of reservations reads (`ReservationTx::relevant_reservations`).
#[derive(Debug, Clone, Default)]
pub struct Focus {
    /// The write's time: rows whose time ran out by then are read (to be ended).
    pub now_us: i64,
    /// The session the write is for: its live rows are read.
    pub session_id: String,
    /// What it asks for: the live rows that overlap are read (`core::reservation::Target`).
    pub paths: Vec<String>,
    pub tasks: Vec<String>,
}

/// The rows a write reads, and how many live rows of the project it left unread.
#[derive(Debug, Default)]
pub struct Relevant {
    pub rows: Vec<Row>,
    pub unread_live: usize,
}

/// Appends ` OR` the conditions of a row overlapping one of `paths` or `tasks` (the path
/// itself, the directories holding it, what it holds; the task itself), values bound.
fn push_overlapping<DB: Database>(q: &mut sqlx::QueryBuilder<DB>, paths: &[String], tasks: &[String])
where
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    for task in tasks {
        q.push(" OR (kind = 'task' AND target = ").push_bind(task.clone()).push(")");
    }
    for path in paths {
        let mut prefix = String::new();
        for part in path.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            q.push(" OR (kind = 'path' AND target = ").push_bind(prefix.clone()).push(")");
        }
        let inside = format!("{path}/");
        // Postgres's substr takes an integer: the length is cast (a bound value is a bigint).
        q.push(" OR (kind = 'path' AND substr(target, 1, CAST(");
        q.push_bind(i64::try_from(inside.chars().count()).unwrap_or(i64::MAX));
        q.push(" AS INTEGER)) = ").push_bind(inside).push(")");
    }
}

/// A write's reads of reservations.
pub trait ReservationTx: Send {
    /// The live rows a write may change or be refused by: those of `focus`'s session, those
    /// overlapping its paths and tasks, those whose time ran out; and every live row while
    /// anyone waits (the queue is handed on in order). The project's other live rows are
    /// only counted (for the cap).
    ///
    /// A performance device for baton-bench's row "a reservation's grant, 1,000 live in the
    /// project" (docs/performance.md): reading every live row of a project at its cap costs
    /// a grant most of its time on SQLite.
    fn relevant_reservations(&mut self, focus: &Focus) -> impl Future<Output = Result<Relevant>> + Send;
    /// The project's settings row, if it has one.
    fn reservation_settings(&mut self)
    -> impl Future<Output = Result<Option<ReservationSettingsRow>>> + Send;
}

impl<B, DB> ReservationTx for Tx<B>
where
    B: Backend<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> Row: FromRow<'r, DB::Row>,
    for<'r> ReservationSettingsRow: FromRow<'r, DB::Row>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    async fn relevant_reservations(&mut self, focus: &Focus) -> Result<Relevant> {
        let live: (i64,) = sqlx::query_as(LIVE_COUNT)
            .bind(self.project.clone())
            .bind(focus.now_us)
            .fetch_one(self.conn())
            .await?;
        let mut q = sqlx::QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE project = "
        ));
        q.push_bind(self.project.clone()).push(" AND status IN (1, 2) AND (expires_us <= ");
        q.push_bind(focus.now_us).push(" OR status = 1 OR session_id = ").push_bind(focus.session_id.clone());
        q.push(" OR EXISTS (SELECT 1 FROM reservations w WHERE w.project = ").push_bind(self.project.clone());
        q.push(" AND w.status = 1 AND w.expires_us > ").push_bind(focus.now_us).push(")");
        push_overlapping(&mut q, &focus.paths, &focus.tasks);
        q.push(")");
        let rows: Vec<Row> = q.build_query_as().fetch_all(self.conn()).await?;
        let read_live = rows.iter().filter(|r| r.live_at(focus.now_us)).count();
        let unread_live = usize::try_from(live.0).unwrap_or(0).saturating_sub(read_live);
        Ok(Relevant { rows, unread_live })
    }

    async fn reservation_settings(&mut self) -> Result<Option<ReservationSettingsRow>> {
        Ok(sqlx::query_as(SETTINGS).bind(self.project.clone()).fetch_optional(self.conn()).await?)
    }
}

/// The reads of `ReservationService` on the pool, and its renewals.
pub trait ReservationReads {
    /// A project's held and waiting rows (those that ran out too).
    fn live_reservations(&self, project: String) -> impl Future<Output = Result<Vec<Row>>> + Send;
    /// A project's held and waiting rows overlapping these paths and tasks (those that ran
    /// out too). The same device as `ReservationTx::relevant_reservations`, for the pre-tool
    /// hook's check (hook-bench's PreToolUse row).
    fn overlapping_reservations(
        &self,
        project: String,
        paths: Vec<String>,
        tasks: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Row>>> + Send;
    /// A project's rows among these ids, in any status.
    fn reservations_by_id(
        &self,
        project: String,
        ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Row>>> + Send;
    /// A project's settings row, if it has one.
    fn reservation_settings(
        &self,
        project: String,
    ) -> impl Future<Output = Result<Option<ReservationSettingsRow>>> + Send;
    /// Renews a session's held rows whose time has not run out, to the database's now plus
    /// `ttl_us`, after any write of the project that holds its lock (so never between a
    /// write's read and its changes); returns them. Not a write: no revision, no event.
    fn renew_reservations(
        &self,
        project: String,
        session_id: String,
        ttl_us: i64,
    ) -> impl Future<Output = Result<Vec<Row>>> + Send;
    /// Projects with held or waiting rows whose time ran out by `now_us`, at most 500.
    fn projects_with_lapsed_reservations(
        &self,
        now_us: i64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Removes rows that ended before `before_us`; how many.
    fn prune_ended_reservations(&self, before_us: i64) -> impl Future<Output = Result<u64>> + Send;
}

impl<E, DB> ReservationReads for E
where
    E: Engine<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> Row: FromRow<'r, DB::Row>,
    for<'r> ReservationSettingsRow: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    async fn live_reservations(&self, project: String) -> Result<Vec<Row>> {
        Ok(sqlx::query_as(LIVE).bind(project).fetch_all(self.pool()).await?)
    }

    async fn overlapping_reservations(
        &self,
        project: String,
        paths: Vec<String>,
        tasks: Vec<String>,
    ) -> Result<Vec<Row>> {
        let mut q = sqlx::QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE project = "
        ));
        q.push_bind(project).push(" AND status IN (1, 2) AND (1 = 0");
        push_overlapping(&mut q, &paths, &tasks);
        q.push(")");
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn reservations_by_id(&self, project: String, ids: Vec<String>) -> Result<Vec<Row>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = sqlx::QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE project = "
        ));
        query.push_bind(project).push(" AND id");
        E::push_in(&mut query, List::Text(ids));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn reservation_settings(&self, project: String) -> Result<Option<ReservationSettingsRow>> {
        Ok(sqlx::query_as(SETTINGS).bind(project).fetch_optional(self.pool()).await?)
    }

    async fn renew_reservations(&self, project: String, session_id: String, ttl_us: i64) -> Result<Vec<Row>> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                // Waits for a write of the project in progress: its reads decided with the
                // times it saw, so a renewal lands before its lock or after its commit.
                sqlx::query(E::SHARE_PROJECT).bind(project.clone()).execute(&mut *conn).await?;
                let query = sqlx::query_as(E::RENEW_RESERVATIONS).bind(project).bind(session_id).bind(ttl_us);
                Ok(query.fetch_all(&mut *conn).await?)
            })
        }))
        .await
    }

    async fn projects_with_lapsed_reservations(&self, now_us: i64) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(LAPSED_PROJECTS).bind(now_us).fetch_all(self.pool()).await?)
    }

    async fn prune_ended_reservations(&self, before_us: i64) -> Result<u64> {
        // A read first: the delete is a write (on SQLite, the writer's turn), rarely needed.
        let any: Option<(i64,)> =
            sqlx::query_as(ANY_ENDED).bind(before_us).fetch_optional(self.pool()).await?;
        if any.is_none() {
            return Ok(0);
        }
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(PRUNE_ENDED).bind(before_us).execute(&mut *conn).await?;
                Ok(E::rows_affected(&done))
            })
        }))
        .await
    }
}
