//! PopItem: the log's newest item removed in one write under the project's lock, so two
//! callers never get the same one. Its event names the item (without its value).

use baton_proto::v1::{ItemsOp, PopItemResponse};

use super::{change, item_message, items_event, lock, log_message};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::error::{Error, Result};
use crate::service::write;
use crate::store::items::ItemTx;
use crate::store::model::{Change, ItemChange};
use crate::store::rows::encode_actor;
use crate::store::{Store, WriteCtx};

/// PopItem.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn pop<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    key: String,
) -> Result<PopItemResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let log = w.tx().item_log(&key).await?;
            let (Some(mut row), Some(item)) = (log.clone(), w.tx().newest_item(&key).await?) else {
                return Ok(PopItemResponse { item: None, log: log.as_ref().map(log_message), result: None });
            };
            let revision = w.revision();
            row.items -= 1;
            row.bytes -= i64::try_from(item.value.len()).unwrap_or(i64::MAX);
            row.updated_us = w.now_us;
            row.revision = revision;
            row.author = encode_actor(&ctx.actor);
            if row.items < 0 || row.bytes < 0 {
                return Err(Error::internal(format!("item log {key:?} counts fell below zero")));
            }
            w.apply(Change::Items(ItemChange::Remove { log_key: key.clone(), seq: item.seq }));
            w.apply(Change::Items(ItemChange::PutLog(Box::new(row.clone()))));
            let mut shown = item.clone();
            shown.value = Vec::new();
            let mut ev_change = change(&key, ItemsOp::Pop);
            ev_change.items = vec![item_message(shown)];
            let revision = w.emit(items_event(ctx, &key, ev_change))?.revision;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = PopItemResponse {
                item: Some(item_message(item)),
                log: Some(log_message(&row)),
                result: Some(result),
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
