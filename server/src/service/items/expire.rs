//! Retention of item logs: a project's logs not changed since the cut-off (`--item-log-days`)
//! deleted with their items, in writes of at most `MAX_DELETED_LOGS` each with its
//! ITEMS_CHANGED event, by the retention job, `baton-server prune` or AdminService.Prune.

use baton_proto::v1::{Actor, ItemsOp};

use super::{change, items_event};
use crate::core::items::MAX_DELETED_LOGS;
use crate::error::Result;
use crate::service::retention::run;
use crate::store::items::ItemTx;
use crate::store::model::{Change, ItemChange};
use crate::store::{Store, WriteCtx};

/// What an expiry removed (or, on a dry run, would), and the revision of its last write.
#[derive(Debug, Clone, Default)]
pub struct Expired {
    pub keys: Vec<String>,
    pub revision: i64,
}

/// Deletes the project's item logs last changed before `cutoff_us`.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn expire<S: Store>(
    store: &S,
    project: String,
    cutoff_us: i64,
    dry_run: bool,
    actor: Actor,
) -> Result<Expired> {
    let mut out = Expired::default();
    loop {
        let ctx = WriteCtx { actor: actor.clone(), ..WriteCtx::default() };
        let limit = i64::try_from(MAX_DELETED_LOGS).unwrap_or(i64::MAX);
        let done = run(store, &project, ctx, false, move |w, ctx| {
            Box::pin(async move {
                let idle = w.tx().idle_item_logs(cutoff_us, limit).await?;
                let keys: Vec<String> = idle.into_iter().map(|l| l.key).collect();
                if dry_run || keys.is_empty() {
                    return Ok((keys, 0));
                }
                w.revision();
                w.apply(Change::Items(ItemChange::DeleteLogs { keys: keys.clone() }));
                let mut ev_change = change("", ItemsOp::Delete);
                ev_change.deleted_keys.clone_from(&keys);
                let revision = w.emit(items_event(ctx, "", ev_change))?.revision;
                w.finish(ctx, &baton_proto::v1::DeleteItemLogsResponse::default())?;
                Ok((keys, revision))
            })
        })
        .await?;
        let (keys, revision) = done;
        let full = keys.len() == MAX_DELETED_LOGS;
        out.keys.extend(keys);
        out.revision = out.revision.max(revision);
        if !full || dry_run {
            return Ok(out);
        }
    }
}
