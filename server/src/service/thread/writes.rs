//! PutThreadWrites: a task's pending writes on a checkpoint, keyed by (task_id, index): the
//! first write of a key is kept, the special channels' (negative indexes) replaced
//! (`core::thread::writes_to_store`). Only what changes is written, under one revision.

use std::collections::HashSet;

use baton_proto::v1::{EventKind, PutThreadWritesResponse, ThreadWrites};

use super::{ThreadName, find, lock, write_ref};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::status;
use crate::core::thread::{WriteKey, writes_to_store};
use crate::error::{Error, Result};
use crate::service::write::{self, event};
use crate::store::model::{Change, PendingWrite};
use crate::store::threads::ThreadTx;
use crate::store::{Store, WriteCtx};

/// PutThreadWrites; `writes` validated, their revision and checkpoint not yet set.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn put_writes<S: Store>(
    store: &S,
    ctx: WriteCtx,
    name: ThreadName,
    key: String,
    writes: Vec<PendingWrite>,
    max_bytes: usize,
) -> Result<PutThreadWritesResponse> {
    let lock = lock(&name.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let session = find(w, &name)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no {}; put a checkpoint first", name.describe())))?;
            status::check_open(&session.id, session.status(), session.resumed_by.as_deref())?;
            let checkpoint = w.tx().keyed_checkpoint(&session.id, &key).await?.ok_or_else(|| {
                Error::NotFound(format!("key: no checkpoint {key:?} in {}", name.describe()))
            })?;
            let rows = w.tx().checkpoint_writes(&checkpoint.id).await?;
            let stored: HashSet<WriteKey> = rows.iter().map(|s| (s.task_id.clone(), s.idx)).collect();
            let keyed: Vec<(WriteKey, PendingWrite)> =
                writes.into_iter().map(|p| ((p.task_id.clone(), p.idx), p)).collect();
            let mut new = writes_to_store(&stored, &keyed);
            if new.is_empty() {
                return Ok(PutThreadWritesResponse { stored: 0, result: None });
            }
            // A checkpoint's writes are read with it: together they stay within what one
            // checkpoint may hold.
            let replaced: HashSet<WriteKey> = new.iter().map(|p| (p.task_id.clone(), p.idx)).collect();
            let kept: usize = rows
                .iter()
                .filter(|s| !replaced.contains(&(s.task_id.clone(), s.idx)))
                .map(|s| s.value.len())
                .sum();
            let total = kept + new.iter().map(|p| p.value.len()).sum::<usize>();
            if total > max_bytes {
                return Err(Error::ResourceExhausted(format!(
                    "writes: checkpoint {key:?} would hold {total} bytes of pending writes, over this server's \
                     checkpoint limit of {max_bytes} bytes (--max-checkpoint-bytes)"
                )));
            }
            let revision = w.revision();
            for p in &mut new {
                p.checkpoint_id.clone_from(&checkpoint.id);
                p.revision = revision;
            }
            let count = i32::try_from(new.len()).unwrap_or(i32::MAX);
            let mut ev = event(EventKind::ThreadWrites, "checkpoint", &checkpoint.id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::ThreadWrites(ThreadWrites {
                session_id: session.id.clone(),
                checkpoint_id: checkpoint.id.clone(),
                key: key.clone(),
                writes: new.iter().map(write_ref).collect(),
            }));
            w.apply(Change::PutWrites(new));
            let revision = w.emit(ev)?.revision;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = PutThreadWritesResponse { stored: count, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
