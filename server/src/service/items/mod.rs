//! ItemLogService: ordered logs of opaque items under the caller's key, what agent
//! frameworks keep a conversation in. Every change is a write of the project like any other
//! (`write::run`): a revision, an ITEMS_CHANGED event carrying what changed, idempotency by
//! request id. `core::items` holds the rules; `store::items` the reads.

mod append;
mod delete;
mod expire;
mod import;
mod pop;
mod read;

pub use append::{Append, NewItem, append};
pub use delete::delete;
pub use expire::{Expired, expire};
pub(crate) use import::Imports;
pub use pop::pop;
pub use read::{Listed, Reading, list, read};

use baton_proto::v1::{Event, EventKind, Item as ItemMessage, ItemLog as LogMessage, ItemsChange, ItemsOp};

use super::write::event;
use crate::core::time::ts;
use crate::store::WriteCtx;
use crate::store::model::{Item, ItemLog, Lock};
use crate::store::rows::decode_actor;

/// The lock of an item write: the project's, nothing read first.
fn lock(project: &str, ctx: &WriteCtx) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: None,
        rewrites_log: false,
    }
}

/// A log as replies show it (its summary only when the row was read with it).
pub(crate) fn log_message(row: &ItemLog) -> LogMessage {
    LogMessage {
        key: row.key.clone(),
        items: row.items,
        bytes: row.bytes,
        last_seq: row.last_seq,
        created_at: Some(ts(row.created_us)),
        updated_at: Some(ts(row.updated_us)),
        revision: row.revision,
        author: Some(decode_actor(&row.author)),
        summary_json: row.summary.clone().unwrap_or_default(),
        summary_revision: row.summary_revision,
    }
}

/// An item as replies show it.
pub(crate) fn item_message(row: Item) -> ItemMessage {
    ItemMessage {
        seq: row.seq,
        key: row.item_key.unwrap_or_default(),
        content_type: row.content_type,
        value: row.value,
        revision: row.revision,
        created_at: Some(ts(row.created_us)),
    }
}

/// The event of an item write.
fn items_event(ctx: &WriteCtx, key: &str, change: ItemsChange) -> Event {
    let mut ev = event(EventKind::ItemsChanged, "item_log", key, &ctx.actor);
    ev.value = Some(baton_proto::v1::event::Value::Items(change));
    ev
}

fn change(key: &str, op: ItemsOp) -> ItemsChange {
    ItemsChange { key: key.to_owned(), op: op as i32, ..Default::default() }
}
