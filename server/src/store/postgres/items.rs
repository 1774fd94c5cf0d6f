//! Item logs on Postgres: the statements of `model::ItemChange`, run one by one before the
//! write function (`write.rs`), and a list of keys as Postgres reads one (`ItemSql`: an
//! array).

use sqlx::{PgConnection, Postgres};

use super::write::Lanes;
use crate::store::items::{ItemSql, item_log_light_columns};
use crate::store::model::{ItemChange, ItemLog};

/// $1 project, then the row's columns in `ItemLog`'s order.
const PUT_LOG: &str = "INSERT INTO item_logs (project, key, items, bytes, last_seq, created_us, updated_us, \
     revision, author, summary, summary_revision, summary_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
     $11, $12) ON CONFLICT (project, key) DO UPDATE SET items = excluded.items, bytes = excluded.bytes, \
     last_seq = excluded.last_seq, updated_us = excluded.updated_us, revision = excluded.revision, \
     author = excluded.author, summary = excluded.summary, summary_revision = excluded.summary_revision, \
     summary_us = excluded.summary_us";
/// $1 project, $2 log key, then one array per column: seq, item key, content type, value,
/// revision, created_us.
const INSERT_ITEMS: &str = "INSERT INTO items (project, log_key, seq, item_key, content_type, value, revision, \
     created_us) SELECT $1, $2, i.* FROM unnest($3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::BYTEA[], $7::BIGINT[], \
     $8::BIGINT[]) AS i";
/// $1 project, $2 log key, $3 seq.
const REMOVE_ITEM: &str = "DELETE FROM items WHERE project = $1 AND log_key = $2 AND seq = $3";
/// $1 project, $2 log keys.
const DELETE_ITEMS: &str = "DELETE FROM items WHERE project = $1 AND log_key = ANY($2)";
const DELETE_LOGS: &str = "DELETE FROM item_logs WHERE project = $1 AND key = ANY($2)";
/// $1 project, $2 log key, $3 seq, $4 content type, $5 value.
const MASK_ITEM: &str =
    "UPDATE items SET content_type = $4, value = $5 WHERE project = $1 AND log_key = $2 AND seq = $3";

impl ItemSql for Lanes {
    const STORED_KEYS: &'static str =
        "SELECT item_key FROM items WHERE project = $1 AND log_key = $2 AND item_key = ANY($3)";
    const LOGS_IN: &'static str = concat!(
        "SELECT ",
        item_log_light_columns!(),
        " FROM item_logs WHERE project = $1 AND key = ANY($2) ORDER BY key"
    );
    type Keys = Vec<String>;

    fn keys(keys: &[String]) -> Vec<String> {
        keys.to_vec()
    }
}

/// Runs the statements of an item change.
pub(super) async fn run(
    conn: &mut PgConnection,
    project: &str,
    change: ItemChange,
) -> Result<(), sqlx::Error> {
    let query = |sql: &'static str| sqlx::query::<Postgres>(sql).bind(project.to_owned());
    let query = match change {
        ItemChange::PutLog(log) => put_log(query(PUT_LOG), *log),
        ItemChange::Insert(items) => {
            let Some(first) = items.first() else { return Ok(()) };
            let log_key = first.log_key.clone();
            let mut seqs = Vec::with_capacity(items.len());
            let mut keys = Vec::with_capacity(items.len());
            let mut types = Vec::with_capacity(items.len());
            let mut values = Vec::with_capacity(items.len());
            let mut revisions = Vec::with_capacity(items.len());
            let mut created = Vec::with_capacity(items.len());
            for i in items {
                seqs.push(i.seq);
                keys.push(i.item_key);
                types.push(i.content_type);
                values.push(i.value);
                revisions.push(i.revision);
                created.push(i.created_us);
            }
            query(INSERT_ITEMS)
                .bind(log_key)
                .bind(seqs)
                .bind(keys)
                .bind(types)
                .bind(values)
                .bind(revisions)
                .bind(created)
        }
        ItemChange::Remove { log_key, seq } => query(REMOVE_ITEM).bind(log_key).bind(seq),
        ItemChange::DeleteLogs { keys } => {
            query(DELETE_ITEMS).bind(keys.clone()).execute(&mut *conn).await?;
            query(DELETE_LOGS).bind(keys)
        }
        ItemChange::MaskItem(i) => {
            query(MASK_ITEM).bind(i.log_key).bind(i.seq).bind(i.content_type).bind(i.value)
        }
    };
    query.execute(conn).await?;
    Ok(())
}

fn put_log(
    query: sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments>,
    l: ItemLog,
) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(l.key)
        .bind(l.items)
        .bind(l.bytes)
        .bind(l.last_seq)
        .bind(l.created_us)
        .bind(l.updated_us)
        .bind(l.revision)
        .bind(l.author)
        .bind(l.summary)
        .bind(l.summary_revision)
        .bind(l.summary_us)
}
