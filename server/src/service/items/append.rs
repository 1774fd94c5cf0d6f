//! AppendItems: items appended in order under new seqs, those whose key the log holds
//! already (or that came earlier in the request) skipped; the summary, when sent, replaced
//! by the LWW rules (`lww::decide`, on the summary's own revision). One write, one event;
//! none when nothing is new (every item's key stored, the summary as stored).

use std::collections::HashSet;

use baton_proto::v1::{AppendItemsResponse, ItemsOp, RecordValue, record_value};

use super::{change, item_message, items_event, lock, log_message};
use crate::core::conflict::{self, Contested};
use crate::core::items::fresh;
use crate::core::lww::{self, Decision, RecordVersion};
use crate::error::Result;
use crate::service::write::{self, Write};
use crate::store::items::ItemTx;
use crate::store::model::{Change, Item, ItemChange, ItemLog};
use crate::store::rows::encode_actor;
use crate::store::{Store, WriteCtx, WriteTx};

/// An item to append, validated (`core::items::item_labels`).
#[derive(Debug, Clone)]
pub struct NewItem {
    pub key: Option<String>,
    pub content_type: String,
    pub value: Vec<u8>,
}

/// An append, validated.
#[derive(Debug, Clone)]
pub struct Append {
    pub project: String,
    pub key: String,
    pub items: Vec<NewItem>,
    /// The new summary ("" clears it), when sent.
    pub summary: Option<String>,
}

/// AppendItems.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn append<S: Store>(store: &S, ctx: WriteCtx, new: Append) -> Result<AppendItemsResponse> {
    let lock = lock(&new.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let log = w.tx().item_log(&new.key).await?;
            let keys: Vec<Option<String>> = new.items.iter().map(|i| i.key.clone()).collect();
            let named: Vec<String> = keys.iter().flatten().cloned().collect();
            let stored: HashSet<String> =
                w.tx().stored_item_keys(&new.key, &named).await?.into_iter().collect();
            let fresh = fresh(&stored, &keys);
            let summary = match &new.summary {
                Some(text) => Some(summary_decision(w, ctx, log.as_ref(), &new.key, text)?),
                None => None,
            };
            // A retry of an append that landed: nothing new, and the summary it sends is the
            // one stored (as it read it).
            let same_summary = matches!(
                (&summary, &new.summary),
                (Some((Decision::Applied, _)), Some(text))
                    if log.as_ref().and_then(|l| l.summary.as_deref()).unwrap_or_default() == text.as_str()
            );
            if !fresh.contains(&true) && (summary.is_none() || same_summary) {
                let seqs = vec![0; new.items.len()];
                return Ok(AppendItemsResponse { log: log.as_ref().map(log_message), seqs, result: None });
            }
            let revision = w.revision();
            let mut row = log.unwrap_or_else(|| empty_log(&new.key, w.now_us));
            let mut seqs = Vec::with_capacity(new.items.len());
            let mut added = Vec::new();
            for (item, fresh) in new.items.into_iter().zip(fresh) {
                if !fresh {
                    seqs.push(0);
                    continue;
                }
                row.last_seq += 1;
                row.items += 1;
                row.bytes += i64::try_from(item.value.len()).unwrap_or(i64::MAX);
                seqs.push(row.last_seq);
                added.push(Item {
                    log_key: new.key.clone(),
                    seq: row.last_seq,
                    item_key: item.key,
                    content_type: item.content_type,
                    value: item.value,
                    revision,
                    created_us: w.now_us,
                });
            }
            row.updated_us = w.now_us;
            row.revision = revision;
            row.author = encode_actor(&ctx.actor);
            let mut ev_change = change(&new.key, ItemsOp::Append);
            let (decision, conflict) = summary.map_or((Decision::Applied, None), |(d, c)| (d, c));
            if let Some(text) = new.summary.filter(|_| decision.applies()) {
                row.summary = (!text.is_empty()).then(|| text.clone());
                row.summary_revision = revision;
                row.summary_us = ctx.written_us(w.now_us);
                ev_change.summary_json = Some(text);
            }
            w.apply(Change::Items(ItemChange::PutLog(Box::new(row.clone()))));
            ev_change.items = added.iter().cloned().map(item_message).collect();
            if !added.is_empty() {
                w.apply(Change::Items(ItemChange::Insert(added)));
            }
            let mut ev = items_event(ctx, &new.key, ev_change);
            ev.conflict = conflict;
            let conflict = w.emit(ev)?.conflict;
            let result = conflict::result(revision, decision, conflict, ctx.writer());
            let reply = AppendItemsResponse { log: Some(log_message(&row)), seqs, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// A log's row before its first append.
fn empty_log(key: &str, now_us: i64) -> ItemLog {
    ItemLog {
        key: key.to_owned(),
        items: 0,
        bytes: 0,
        last_seq: 0,
        created_us: now_us,
        updated_us: now_us,
        revision: 0,
        author: Vec::new(),
        summary: None,
        summary_revision: 0,
        summary_us: 0,
    }
}

/// How the summary's LWW rules judge the new one, with the conflict when it is not simply
/// applied; `ABORTED` (nothing stored) when the caller asked to be refused.
fn summary_decision<T: WriteTx>(
    w: &Write<T>,
    ctx: &WriteCtx,
    log: Option<&ItemLog>,
    key: &str,
    text: &str,
) -> Result<(Decision, Option<baton_proto::v1::Conflict>)> {
    let current = log.filter(|l| l.summary_revision > 0);
    let version = current.map(|l| RecordVersion { revision: l.summary_revision, written_us: l.summary_us });
    let decision = lww::decide(version, ctx.intent(w.now_us));
    if decision == Decision::Applied {
        return Ok((decision, None));
    }
    let value = |s: &str| RecordValue { value: Some(record_value::Value::SummaryJson(s.to_owned())) };
    let contested = Contested {
        record: format!("items/{key}/summary"),
        current: version.zip(current.map(|l| crate::store::rows::decode_actor(&l.author))),
        current_value: current.map(|l| value(l.summary.as_deref().unwrap_or_default())),
        written_value: Some(value(text)),
        detail: match current {
            Some(l) => format!(
                "the summary was set at revision {} since the one this write read",
                l.summary_revision
            ),
            None => "the summary this write read is gone".to_owned(),
        },
    };
    let conflict = conflict::conflict(decision, ctx.writer(), contested);
    if decision == Decision::Rejected {
        return Err(w.rejected(conflict));
    }
    Ok((decision, Some(conflict)))
}
