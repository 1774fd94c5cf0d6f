//! Item logs on SQLite: the statements of `model::ItemChange`, sent with the write's other
//! changes (values bound in the order their `?` appear), and a list of keys as SQLite reads
//! one (`ItemSql`: a JSON array).

use super::write::{Lanes, Statements};
use crate::store::items::{ItemSql, item_log_light_columns};
use crate::store::model::{ItemChange, ItemLog};

/// Binds: project, then the row's columns in `ItemLog`'s order.
const PUT_LOG: &str = "INSERT INTO item_logs (project, key, items, bytes, last_seq, created_us, updated_us, \
     revision, author, summary, summary_revision, summary_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
     ON CONFLICT (project, key) DO UPDATE SET items = excluded.items, bytes = excluded.bytes, \
     last_seq = excluded.last_seq, updated_us = excluded.updated_us, revision = excluded.revision, \
     author = excluded.author, summary = excluded.summary, summary_revision = excluded.summary_revision, \
     summary_us = excluded.summary_us";
/// Binds: project, log key, seq, item key, content type, value, revision, created_us.
const INSERT_ITEM: &str = "INSERT INTO items (project, log_key, seq, item_key, content_type, value, revision, \
     created_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
/// Binds: project, log key, seq.
const REMOVE_ITEM: &str = "DELETE FROM items WHERE project = ? AND log_key = ? AND seq = ?";
/// Binds: project, log key.
const DELETE_ITEMS: &str = "DELETE FROM items WHERE project = ? AND log_key = ?";
const DELETE_LOG: &str = "DELETE FROM item_logs WHERE project = ? AND key = ?";
/// Binds: content type, value, project, log key, seq.
const MASK_ITEM: &str =
    "UPDATE items SET content_type = ?, value = ? WHERE project = ? AND log_key = ? AND seq = ?";

impl ItemSql for Lanes {
    const STORED_KEYS: &'static str = "SELECT item_key FROM items WHERE project = $1 AND log_key = $2 \
         AND item_key IN (SELECT value FROM json_each($3))";
    const LOGS_IN: &'static str = concat!(
        "SELECT ",
        item_log_light_columns!(),
        " FROM item_logs WHERE project = $1 AND key IN (SELECT value FROM json_each($2)) ORDER BY key"
    );
    type Keys = String;

    fn keys(keys: &[String]) -> String {
        // A list of strings always serializes.
        serde_json::to_string(keys).unwrap_or_default()
    }
}

/// The statements of an item change.
pub(super) fn push(query: &mut Statements, project: &str, change: &ItemChange) {
    match change {
        ItemChange::PutLog(log) => push_log(query, project, log),
        ItemChange::Insert(items) => {
            for i in items {
                query.push(INSERT_ITEM).bind(project).bind(i.log_key.as_str()).bind(i.seq);
                query.bind(i.item_key.as_deref()).bind(i.content_type.as_str()).bind(i.value.as_slice());
                query.bind(i.revision).bind(i.created_us);
            }
        }
        ItemChange::Remove { log_key, seq } => {
            query.push(REMOVE_ITEM).bind(project).bind(log_key.as_str()).bind(*seq);
        }
        ItemChange::DeleteLogs { keys } => {
            for key in keys {
                query.push(DELETE_ITEMS).bind(project).bind(key.as_str());
                query.push(DELETE_LOG).bind(project).bind(key.as_str());
            }
        }
        ItemChange::MaskItem(i) => {
            query.push(MASK_ITEM).bind(i.content_type.as_str()).bind(i.value.as_slice()).bind(project);
            query.bind(i.log_key.as_str()).bind(i.seq);
        }
    }
}

fn push_log(query: &mut Statements, project: &str, l: &ItemLog) {
    query.push(PUT_LOG).bind(project).bind(l.key.as_str()).bind(l.items).bind(l.bytes).bind(l.last_seq);
    query.bind(l.created_us).bind(l.updated_us).bind(l.revision).bind(l.author.as_slice());
    query.bind(l.summary.as_deref()).bind(l.summary_revision).bind(l.summary_us);
}
