//! DeleteItemLogs: logs by key and under prefixes, with all their items, in one write (at
//! most `MAX_DELETED_LOGS`: the reply says when a prefix holds more).

use std::collections::BTreeMap;

use baton_proto::v1::{DeleteItemLogsResponse, ItemsOp};

use super::{change, items_event, lock};
use crate::core::conflict;
use crate::core::items::MAX_DELETED_LOGS;
use crate::core::lww::Decision;
use crate::error::Result;
use crate::service::write;
use crate::store::items::ItemTx;
use crate::store::model::{Change, ItemChange};
use crate::store::{Store, WriteCtx};

/// DeleteItemLogs; `keys` and `prefixes` validated.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn delete<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    keys: Vec<String>,
    prefixes: Vec<String>,
) -> Result<DeleteItemLogsResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            // Key → its items, in key order.
            let mut found: BTreeMap<String, i64> =
                w.tx().item_logs_in(&keys).await?.into_iter().map(|l| (l.key, l.items)).collect();
            let mut more = false;
            for prefix in &prefixes {
                let limit = i64::try_from(MAX_DELETED_LOGS + 1).unwrap_or(i64::MAX);
                let under = w.tx().item_logs_from(prefix, limit).await?;
                let under: Vec<_> =
                    under.into_iter().take_while(|l| l.key.starts_with(prefix.as_str())).collect();
                more |= under.len() > MAX_DELETED_LOGS;
                found.extend(under.into_iter().map(|l| (l.key, l.items)));
            }
            if found.len() > MAX_DELETED_LOGS {
                more = true;
                found = found.into_iter().take(MAX_DELETED_LOGS).collect();
            }
            if found.is_empty() {
                return Ok(DeleteItemLogsResponse { more, ..Default::default() });
            }
            let deleted: Vec<String> = found.keys().cloned().collect();
            let deleted_items = found.values().sum();
            w.revision();
            w.apply(Change::Items(ItemChange::DeleteLogs { keys: deleted.clone() }));
            let mut ev_change = change("", ItemsOp::Delete);
            ev_change.deleted_keys.clone_from(&deleted);
            let revision = w.emit(items_event(ctx, "", ev_change))?.revision;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = DeleteItemLogsResponse { deleted, deleted_items, result: Some(result), more };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
