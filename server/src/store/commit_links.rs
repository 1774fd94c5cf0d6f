//! Commit links' reads (`CommitService`), implemented once for both backends (each
//! statement one text, `$n`): those of a write on its transaction (`CommitTx`), the others on
//! the pool (`CommitReads`). Their changes (`model::CommitChange`) are each backend's
//! statements (`sqlite::commit_links`, `postgres::commit_links`).

use std::future::Future;

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, QueryBuilder, Type};

use super::engine::{Engine, List};
use super::model::Session;
use super::rows::session_columns;
use super::writer::{Backend, Tx};
use crate::core::commit::Link;
use crate::error::Result;

/// A link's columns, in `Link`'s order.
macro_rules! link_columns {
    () => {
        "commit_id, session_id, checkpoint_id, patch_id, made_by, seen_by, ambiguous, branch, subject, \
         committed_us, files, prompt, task, lines, lines_truncated, created_us, revision, author"
    };
}

/// A fingerprint's match: (fingerprint, commit, session).
pub type LineMatch = (String, String, String);

/// Where a page of links starts: after this (committed_us, commit, session), newest first.
pub type After = (i64, String, String);

/// A checkpoint's place in its session: (id, session, created_us).
pub type Moment = (String, String, i64);

/// A write's reads of commit links.
pub trait CommitTx: Send {
    /// The project's links of these commits (at most `core::commit::MAX_LINKS`).
    fn commit_links(&mut self, commits: &[String]) -> impl Future<Output = Result<Vec<Link>>> + Send;
    /// A page of the project's links after (commit, session), in that order (a purge reads
    /// them all).
    fn commit_links_after(
        &mut self,
        after: (String, String),
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Link>>> + Send;
    /// The project's links recorded before `before_us`, at most `limit`, as (commit, session).
    fn old_commit_links(
        &mut self,
        before_us: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<(String, String)>>> + Send;
}

/// $1 project, $2 before, $3 limit.
const OLD_LINKS: &str = "SELECT commit_id, session_id FROM commit_links WHERE project = $1 AND created_us < $2 \
     ORDER BY created_us LIMIT $3";
/// Projects with links recorded before $1, at most 500.
const OLD_LINK_PROJECTS: &str = "SELECT DISTINCT project FROM commit_links WHERE created_us < $1 LIMIT 500";

/// $1 project, $2 after (commit), $3 after (session), $4 limit.
const LINKS_AFTER: &str = concat!(
    "SELECT ",
    link_columns!(),
    " FROM commit_links WHERE project = $1 AND (commit_id > $2 OR (commit_id = $2 AND session_id > $3)) \
     ORDER BY commit_id, session_id LIMIT $4"
);

impl<B, DB> CommitTx for Tx<B>
where
    B: Backend<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> Link: FromRow<'r, DB::Row>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
{
    async fn old_commit_links(&mut self, before_us: i64, limit: i64) -> Result<Vec<(String, String)>> {
        let query = sqlx::query_as(OLD_LINKS).bind(self.project.clone()).bind(before_us).bind(limit);
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn commit_links_after(&mut self, after: (String, String), limit: i64) -> Result<Vec<Link>> {
        let query = sqlx::query_as(LINKS_AFTER).bind(self.project.clone()).bind(after.0).bind(after.1);
        Ok(query.bind(limit).fetch_all(self.conn()).await?)
    }

    async fn commit_links(&mut self, commits: &[String]) -> Result<Vec<Link>> {
        if commits.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            link_columns!(),
            " FROM commit_links WHERE project = "
        ));
        q.push_bind(self.project.clone()).push(" AND commit_id IN (");
        let mut list = q.separated(", ");
        for commit in commits {
            list.push_bind(commit.clone());
        }
        q.push(")");
        Ok(q.build_query_as().fetch_all(self.conn()).await?)
    }
}

/// The reads of `CommitService` on the pool.
pub trait CommitReads {
    /// A project's links of these commits or these patch ids, at most `limit`.
    fn links_of(
        &self,
        project: String,
        commits: Vec<String>,
        patch_ids: Vec<String>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Link>>> + Send;
    /// Which links added these line fingerprints, at most `limit` matches.
    fn line_matches(
        &self,
        project: String,
        fingerprints: Vec<String>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<LineMatch>>> + Send;
    /// A page of a project's links (a session's, when given), newest commit first.
    fn list_links(
        &self,
        project: String,
        session: Option<String>,
        after: Option<After>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Link>>> + Send;
    /// A project's sessions among these ids.
    fn sessions_in(
        &self,
        project: String,
        ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Session>>> + Send;
    /// Projects with links recorded before `before_us`, at most 500.
    fn projects_with_old_commit_links(
        &self,
        before_us: i64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// The checkpoints of these sessions, as moments, oldest first.
    fn session_moments(
        &self,
        project: String,
        sessions: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Moment>>> + Send;
}

impl<E, DB> CommitReads for E
where
    E: Engine<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> Link: FromRow<'r, DB::Row>,
    for<'r> Session: FromRow<'r, DB::Row>,
    for<'r> (String, String, String): FromRow<'r, DB::Row>,
    for<'r> (String, String, i64): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    async fn projects_with_old_commit_links(&self, before_us: i64) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(OLD_LINK_PROJECTS).bind(before_us).fetch_all(self.pool()).await?)
    }

    async fn links_of(
        &self,
        project: String,
        commits: Vec<String>,
        patch_ids: Vec<String>,
        limit: i64,
    ) -> Result<Vec<Link>> {
        if commits.is_empty() && patch_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            link_columns!(),
            " FROM commit_links WHERE project = "
        ));
        q.push_bind(project).push(" AND (1 = 0");
        if !commits.is_empty() {
            q.push(" OR commit_id");
            E::push_in(&mut q, List::Text(commits));
        }
        if !patch_ids.is_empty() {
            q.push(" OR (patch_id <> '' AND patch_id");
            E::push_in(&mut q, List::Text(patch_ids));
            q.push(")");
        }
        q.push(") ORDER BY committed_us DESC, commit_id DESC, session_id LIMIT ").push_bind(limit);
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn line_matches(
        &self,
        project: String,
        fingerprints: Vec<String>,
        limit: i64,
    ) -> Result<Vec<LineMatch>> {
        if fingerprints.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(
            "SELECT fingerprint, commit_id, session_id FROM commit_lines WHERE project = ",
        );
        q.push_bind(project).push(" AND fingerprint");
        E::push_in(&mut q, List::Text(fingerprints));
        q.push(" LIMIT ").push_bind(limit);
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn list_links(
        &self,
        project: String,
        session: Option<String>,
        after: Option<After>,
        limit: i64,
    ) -> Result<Vec<Link>> {
        let mut q = QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            link_columns!(),
            " FROM commit_links WHERE project = "
        ));
        q.push_bind(project);
        if let Some(session) = session {
            q.push(" AND session_id = ").push_bind(session);
        }
        if let Some((at, commit, session)) = after {
            q.push(" AND (committed_us < ").push_bind(at);
            q.push(" OR (committed_us = ").push_bind(at).push(" AND (commit_id < ").push_bind(commit.clone());
            q.push(" OR (commit_id = ").push_bind(commit).push(" AND session_id > ").push_bind(session);
            q.push("))))");
        }
        q.push(" ORDER BY committed_us DESC, commit_id DESC, session_id LIMIT ").push_bind(limit);
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn sessions_in(&self, project: String, ids: Vec<String>) -> Result<Vec<Session>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions WHERE project = "
        ));
        q.push_bind(project).push(" AND id");
        E::push_in(&mut q, List::Text(ids));
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }

    async fn session_moments(&self, project: String, sessions: Vec<String>) -> Result<Vec<Moment>> {
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        let mut q =
            QueryBuilder::<DB>::new("SELECT id, session_id, created_us FROM checkpoints WHERE project = ");
        q.push_bind(project).push(" AND session_id");
        E::push_in(&mut q, List::Text(sessions));
        q.push(" ORDER BY created_us, id");
        Ok(q.build_query_as().fetch_all(self.pool()).await?)
    }
}
