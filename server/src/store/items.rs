//! Item logs' reads (`ItemLogService`): those of a write, on its transaction (`ItemTx`),
//! and those of a read, on the pool (`ItemReads`), implemented once for both backends (each
//! statement one text, `$n`). Their changes are each backend's statements
//! (`sqlite::items`, `postgres::items`).

use std::future::Future;

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use super::engine::Engine;
use super::model::{Item, ItemLog};
use super::writer::{Backend, Tx};
use crate::error::Result;

/// An item log's columns, in `ItemLog`'s order.
macro_rules! item_log_columns {
    () => {
        "key, items, bytes, last_seq, created_us, updated_us, revision, author, summary, summary_revision, \
         summary_us"
    };
}
/// The same without the summary (read as NULL).
macro_rules! item_log_light_columns {
    () => {
        "key, items, bytes, last_seq, created_us, updated_us, revision, author, NULL AS summary, \
         summary_revision, summary_us"
    };
}
pub(crate) use item_log_light_columns;
macro_rules! item_columns {
    () => {
        "log_key, seq, item_key, content_type, value, revision, created_us"
    };
}

/// $1 project, $2 key.
const ITEM_LOG: &str =
    concat!("SELECT ", item_log_columns!(), " FROM item_logs WHERE project = $1 AND key = $2");
/// $1 project, $2 key.
const NEWEST_ITEM: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE project = $1 AND log_key = $2 ORDER BY seq DESC LIMIT 1"
);
/// $1 project, $2 the first key, $3 how many.
const LOGS_FROM: &str = concat!(
    "SELECT ",
    item_log_light_columns!(),
    " FROM item_logs WHERE project = $1 AND key >= $2 ORDER BY key LIMIT $3"
);
const LOGS_AFTER: &str = concat!(
    "SELECT ",
    item_log_light_columns!(),
    " FROM item_logs WHERE project = $1 AND key > $2 ORDER BY key LIMIT $3"
);
const SUMMARIZED_LOGS_FROM: &str = concat!(
    "SELECT ",
    item_log_columns!(),
    " FROM item_logs WHERE project = $1 AND key >= $2 ORDER BY key LIMIT $3"
);
const SUMMARIZED_LOGS_AFTER: &str = concat!(
    "SELECT ",
    item_log_columns!(),
    " FROM item_logs WHERE project = $1 AND key > $2 ORDER BY key LIMIT $3"
);
/// $1 project, $2 cut-off, $3 how many.
const IDLE_LOGS: &str = concat!(
    "SELECT ",
    item_log_light_columns!(),
    " FROM item_logs WHERE project = $1 AND updated_us < $2 ORDER BY key LIMIT $3"
);
/// Every log of a project with its summary. $1 project.
const ALL_LOGS: &str =
    concat!("SELECT ", item_log_columns!(), " FROM item_logs WHERE project = $1 ORDER BY key");
/// A project's items after a (log key, seq). $1 project, $2 log key, $3 seq, $4 how many.
const ITEMS_AFTER: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE project = $1 AND (log_key > $2 OR (log_key = $2 AND seq > $3)) ORDER BY log_key, seq LIMIT $4"
);
/// $1 cut-off.
const PROJECTS_WITH_IDLE_LOGS: &str =
    "SELECT DISTINCT project FROM item_logs WHERE updated_us < $1 ORDER BY project";
/// $1 project, $2 key, $3 through seq, $4 how many newer to skip.
const NTH_NEWEST_SEQ: &str = "SELECT seq FROM items WHERE project = $1 AND log_key = $2 AND seq <= $3 \
     ORDER BY seq DESC LIMIT 1 OFFSET $4";
/// $1 project, $2 key, $3 after seq, $4 through seq, $5 how many.
const ITEM_SIZES: &str = "SELECT seq, CAST(length(value) AS BIGINT) FROM items WHERE project = $1 AND log_key = $2 \
     AND seq > $3 AND seq <= $4 ORDER BY seq LIMIT $5";
const ITEMS: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE project = $1 AND log_key = $2 AND seq > $3 AND seq <= $4 ORDER BY seq"
);

/// What a backend words its own way: a statement over a list of keys (bound as one value).
pub trait ItemSql {
    /// The item keys of a log that are among a list. $1 project, $2 log key, $3 the keys.
    const STORED_KEYS: &'static str;
    /// The logs among a list of keys, without summaries, by key. $1 project, $2 the keys.
    const LOGS_IN: &'static str;
    /// The keys, bound as the statements take them.
    type Keys: Send;
    fn keys(keys: &[String]) -> Self::Keys;
}

/// A write's reads of item logs.
pub trait ItemTx: Send {
    /// A log's row, with its summary.
    fn item_log(&mut self, key: &str) -> impl Future<Output = Result<Option<ItemLog>>> + Send;
    /// Which of `keys` are the keys of items in the log.
    fn stored_item_keys(
        &mut self,
        log_key: &str,
        keys: &[String],
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// A log's newest item.
    fn newest_item(&mut self, log_key: &str) -> impl Future<Output = Result<Option<Item>>> + Send;
    /// The logs among `keys` (without summaries), by key.
    fn item_logs_in(&mut self, keys: &[String]) -> impl Future<Output = Result<Vec<ItemLog>>> + Send;
    /// Up to `limit` logs (without summaries) from the first whose key is at least `from`,
    /// by key.
    fn item_logs_from(&mut self, from: &str, limit: i64)
    -> impl Future<Output = Result<Vec<ItemLog>>> + Send;
    /// Up to `limit` logs (without summaries) last changed before `cutoff_us`, by key.
    fn idle_item_logs(
        &mut self,
        cutoff_us: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<ItemLog>>> + Send;
    /// Every log of the project, with its summary, by key.
    fn all_item_logs(&mut self) -> impl Future<Output = Result<Vec<ItemLog>>> + Send;
    /// Up to `limit` of the project's items after (log key, seq), in that order.
    fn items_after(
        &mut self,
        log_key: &str,
        seq: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Item>>> + Send;
}

impl<B, DB> ItemTx for Tx<B>
where
    B: Backend<Db = DB> + ItemSql,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> B::Keys: Encode<'q, DB> + Type<DB>,
    for<'r> ItemLog: FromRow<'r, DB::Row>,
    for<'r> Item: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    async fn item_log(&mut self, key: &str) -> Result<Option<ItemLog>> {
        let query = sqlx::query_as(ITEM_LOG).bind(self.project.clone()).bind(key.to_owned());
        Ok(query.fetch_optional(self.conn()).await?)
    }

    async fn stored_item_keys(&mut self, log_key: &str, keys: &[String]) -> Result<Vec<String>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let query = sqlx::query_scalar(B::STORED_KEYS).bind(self.project.clone()).bind(log_key.to_owned());
        Ok(query.bind(B::keys(keys)).fetch_all(self.conn()).await?)
    }

    async fn newest_item(&mut self, log_key: &str) -> Result<Option<Item>> {
        let query = sqlx::query_as(NEWEST_ITEM).bind(self.project.clone()).bind(log_key.to_owned());
        Ok(query.fetch_optional(self.conn()).await?)
    }

    async fn item_logs_in(&mut self, keys: &[String]) -> Result<Vec<ItemLog>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let query = sqlx::query_as(B::LOGS_IN).bind(self.project.clone()).bind(B::keys(keys));
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn item_logs_from(&mut self, from: &str, limit: i64) -> Result<Vec<ItemLog>> {
        let query = sqlx::query_as(LOGS_FROM).bind(self.project.clone()).bind(from.to_owned()).bind(limit);
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn idle_item_logs(&mut self, cutoff_us: i64, limit: i64) -> Result<Vec<ItemLog>> {
        let query = sqlx::query_as(IDLE_LOGS).bind(self.project.clone()).bind(cutoff_us).bind(limit);
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn all_item_logs(&mut self) -> Result<Vec<ItemLog>> {
        Ok(sqlx::query_as(ALL_LOGS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn items_after(&mut self, log_key: &str, seq: i64, limit: i64) -> Result<Vec<Item>> {
        let query = sqlx::query_as(ITEMS_AFTER).bind(self.project.clone()).bind(log_key.to_owned()).bind(seq);
        Ok(query.bind(limit).fetch_all(self.conn()).await?)
    }
}

/// Where a listing of logs starts.
#[derive(Debug, Clone)]
pub enum From {
    /// At the first key that is at least this.
    AtLeast(String),
    /// After this key.
    After(String),
}

/// The reads of `ItemLogService`, on the pool.
pub trait ItemReads {
    /// A log's row, with its summary.
    fn item_log(&self, project: String, key: String) -> impl Future<Output = Result<Option<ItemLog>>> + Send;
    /// The seq of the `n`-th newest item at or below `through` (n ≥ 1).
    fn nth_newest_seq(
        &self,
        project: String,
        key: String,
        through: i64,
        n: i64,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
    /// (seq, value bytes) of up to `limit` items in (after, through], by seq.
    fn item_sizes(
        &self,
        project: String,
        key: String,
        range: (i64, i64),
        limit: i64,
    ) -> impl Future<Output = Result<Vec<(i64, i64)>>> + Send;
    /// The items in (after, through], by seq.
    fn items(
        &self,
        project: String,
        key: String,
        range: (i64, i64),
    ) -> impl Future<Output = Result<Vec<Item>>> + Send;
    /// Up to `limit` logs by key from `from`, with their summaries if asked.
    fn item_logs(
        &self,
        project: String,
        from: From,
        limit: i64,
        summaries: bool,
    ) -> impl Future<Output = Result<Vec<ItemLog>>> + Send;
    /// The projects with item logs last changed before `cutoff_us`.
    fn projects_with_idle_item_logs(
        &self,
        cutoff_us: i64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
}

impl<E, DB> ItemReads for E
where
    E: Engine<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> ItemLog: FromRow<'r, DB::Row>,
    for<'r> Item: FromRow<'r, DB::Row>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (i64, i64): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    async fn item_log(&self, project: String, key: String) -> Result<Option<ItemLog>> {
        Ok(sqlx::query_as(ITEM_LOG).bind(project).bind(key).fetch_optional(self.pool()).await?)
    }

    async fn nth_newest_seq(
        &self,
        project: String,
        key: String,
        through: i64,
        n: i64,
    ) -> Result<Option<i64>> {
        let query = sqlx::query_scalar(NTH_NEWEST_SEQ).bind(project).bind(key).bind(through);
        Ok(query.bind(n.saturating_sub(1)).fetch_optional(self.pool()).await?)
    }

    async fn item_sizes(
        &self,
        project: String,
        key: String,
        (after, through): (i64, i64),
        limit: i64,
    ) -> Result<Vec<(i64, i64)>> {
        let query = sqlx::query_as(ITEM_SIZES).bind(project).bind(key).bind(after).bind(through);
        Ok(query.bind(limit).fetch_all(self.pool()).await?)
    }

    async fn items(&self, project: String, key: String, (after, through): (i64, i64)) -> Result<Vec<Item>> {
        let query = sqlx::query_as(ITEMS).bind(project).bind(key).bind(after).bind(through);
        Ok(query.fetch_all(self.pool()).await?)
    }

    async fn item_logs(
        &self,
        project: String,
        from: From,
        limit: i64,
        summaries: bool,
    ) -> Result<Vec<ItemLog>> {
        let (text, key) = match (from, summaries) {
            (From::AtLeast(key), false) => (LOGS_FROM, key),
            (From::After(key), false) => (LOGS_AFTER, key),
            (From::AtLeast(key), true) => (SUMMARIZED_LOGS_FROM, key),
            (From::After(key), true) => (SUMMARIZED_LOGS_AFTER, key),
        };
        Ok(sqlx::query_as(text).bind(project).bind(key).bind(limit).fetch_all(self.pool()).await?)
    }

    async fn projects_with_idle_item_logs(&self, cutoff_us: i64) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(PROJECTS_WITH_IDLE_LOGS).bind(cutoff_us).fetch_all(self.pool()).await?)
    }
}
