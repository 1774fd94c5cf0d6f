//! Import of item logs (`service::import`): a log the target lacks is made from its line,
//! then its items past the target's newest seq are added under their own seqs (ids kept,
//! revisions renumbered), each with its ITEMS_CHANGED event. The archive was checked first
//! (`archive::plan`): a log's line comes before its items, which come in seq order.

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{Actor, ItemsOp};

use super::{change, item_message, items_event};
use crate::error::{Error, Result};
use crate::service::write::Write;
use crate::store::items::ItemTx;
use crate::store::model::{Change, Item, ItemChange, ItemLog};
use crate::store::transfer::{ItemLine, ItemLogLine};
use crate::store::{WriteCtx, WriteTx};

/// The item logs an import batch has touched: their rows as they will be written, and
/// the item keys each holds (stored or imported).
#[derive(Default)]
pub(crate) struct Imports {
    logs: HashMap<String, (ItemLog, bool)>,
    keys: HashMap<String, HashSet<String>>,
}

impl Imports {
    /// A log's line: made unless the target has it (then it is an import run again).
    /// Whether it was imported (with an event).
    pub(crate) async fn log<T: WriteTx + ItemTx>(
        &mut self,
        w: &mut Write<T>,
        line: ItemLogLine,
    ) -> Result<bool> {
        if self.logs.contains_key(&line.key) || w.tx().item_log(&line.key).await?.is_some() {
            return Ok(false);
        }
        let revision = w.revision();
        let row = ItemLog {
            key: line.key.clone(),
            items: 0,
            bytes: 0,
            last_seq: 0,
            created_us: line.created_us,
            updated_us: line.updated_us,
            revision,
            author: line.author,
            summary: line.summary.clone(),
            summary_revision: if line.summary.is_some() { revision } else { 0 },
            summary_us: line.summary_us,
        };
        self.logs.insert(line.key.clone(), (row, true));
        self.keys.insert(line.key.clone(), HashSet::new());
        let mut ev_change = change(&line.key, ItemsOp::Append);
        ev_change.summary_json = line.summary;
        w.emit(items_event(&importer(), &line.key, ev_change))?;
        Ok(true)
    }

    /// An item, unless its log holds its seq or its key already.
    pub(crate) async fn item<T: WriteTx + ItemTx>(
        &mut self,
        w: &mut Write<T>,
        line: ItemLine,
    ) -> Result<bool> {
        if !self.logs.contains_key(&line.log_key) {
            let row = w.tx().item_log(&line.log_key).await?.ok_or_else(|| {
                Error::internal(format!("import: item {} of log {:?} has no log", line.seq, line.log_key))
            })?;
            self.logs.insert(line.log_key.clone(), (row, false));
        }
        let Some((row, touched)) = self.logs.get_mut(&line.log_key) else { return Ok(false) };
        if line.seq <= row.last_seq {
            return Ok(false);
        }
        if let Some(key) = &line.item_key {
            let keys = self.keys.entry(line.log_key.clone()).or_default();
            let stored = w.tx().stored_item_keys(&line.log_key, std::slice::from_ref(key)).await?;
            if !stored.is_empty() || !keys.insert(key.clone()) {
                return Ok(false);
            }
        }
        let revision = w.revision();
        row.items += 1;
        row.bytes += i64::try_from(line.value.len()).unwrap_or(i64::MAX);
        row.last_seq = line.seq;
        row.revision = revision;
        *touched = true;
        let item = Item {
            log_key: line.log_key,
            seq: line.seq,
            item_key: line.item_key,
            content_type: line.content_type,
            value: line.value,
            revision,
            created_us: line.created_us,
        };
        let mut ev_change = change(&item.log_key, ItemsOp::Append);
        ev_change.items = vec![item_message(item.clone())];
        let key = item.log_key.clone();
        w.apply(Change::Items(ItemChange::Insert(vec![item])));
        w.emit(items_event(&importer(), &key, ev_change))?;
        Ok(true)
    }

    /// Writes the rows of the logs the batch changed.
    pub(crate) fn finish<T: WriteTx>(self, w: &mut Write<T>) {
        for (row, touched) in self.logs.into_values() {
            if touched {
                w.apply(Change::Items(ItemChange::PutLog(Box::new(row))));
            }
        }
    }
}

fn importer() -> WriteCtx {
    WriteCtx {
        actor: Actor { token: "baton-server import".into(), ..Actor::default() },
        ..WriteCtx::default()
    }
}
