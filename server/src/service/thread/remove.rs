//! DeleteThreads, DeleteThreadRuns and PruneThreads: a caller allowed to write the project
//! removes checkpoints (with their pending writes) and, for whole threads, their sessions.
//! One write and one CHECKPOINTS_DELETED event each; survivors whose parent goes point at
//! their nearest kept ancestor (`core::retention::plan`), as retention's do, and a head that
//! goes moves to its nearest kept ancestor.

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{
    DeleteThreadRunsResponse, DeleteThreadsResponse, EventKind, Maintenance as MaintenanceEvent,
    PruneThreadsResponse, Reparent, WriteResult,
};

use super::lock;
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::retention::{self, Node};
use crate::core::thread::pruned;
use crate::error::Result;
use crate::service::write::{self, Write, event};
use crate::store::model::{Change, Maintenance, Session};
use crate::store::threads::ThreadTx;
use crate::store::{Store, WriteCtx, WriteTx};

/// What a removal changed.
#[derive(Default)]
struct Removed {
    sessions: Vec<String>,
    checkpoints: Vec<String>,
    reparented: Vec<Reparent>,
}

impl Removed {
    fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.checkpoints.is_empty()
    }

    fn count(&self) -> (i64, i64) {
        let n = |v: &Vec<String>| i64::try_from(v.len()).unwrap_or(i64::MAX);
        (n(&self.sessions), n(&self.checkpoints))
    }
}

/// Removes whole sessions (every checkpoint of each).
async fn remove_sessions<T: WriteTx + ThreadTx>(
    w: &mut Write<T>,
    sessions: &[Session],
    removed: &mut Removed,
) -> Result<()> {
    for s in sessions {
        let ids: Vec<String> =
            w.tx().session_checkpoints(&s.id, false).await?.into_iter().map(|c| c.id).collect();
        if !ids.is_empty() {
            w.apply(Change::Maintenance(Maintenance::DeleteCheckpoints { ids: ids.clone() }));
        }
        removed.checkpoints.extend(ids);
        removed.sessions.push(s.id.clone());
    }
    if !sessions.is_empty() {
        let ids = sessions.iter().map(|s| s.id.clone()).collect();
        w.apply(Change::Maintenance(Maintenance::DeleteSessions { ids }));
    }
    Ok(())
}

/// Removes the checkpoints of one session that `remove` picks from its (id, key) pairs.
async fn remove_checkpoints<T: WriteTx + ThreadTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    mut session: Session,
    remove: impl FnOnce(&[(String, String, Option<String>)]) -> Vec<String>,
    removed: &mut Removed,
) -> Result<()> {
    let rows = w.tx().session_checkpoints(&session.id, false).await?;
    let nodes: HashMap<String, Node> = rows
        .iter()
        .map(|c| (c.id.clone(), Node { parent: c.parent_id.clone(), created_us: c.created_us }))
        .collect();
    let keyed: Vec<(String, String, Option<String>)> = rows
        .iter()
        .map(|c| (c.ordered_key.clone().unwrap_or_default(), c.id.clone(), c.run_id.clone()))
        .collect();
    let gone: HashSet<String> = remove(&keyed).into_iter().collect();
    if gone.is_empty() {
        return Ok(());
    }
    let keep: HashSet<String> = nodes.keys().filter(|id| !gone.contains(*id)).cloned().collect();
    let plan = retention::plan(&nodes, &keep);
    w.apply(Change::Maintenance(Maintenance::DeleteCheckpoints { ids: plan.remove.clone() }));
    for (checkpoint, parent) in &plan.reparent {
        let (checkpoint, parent) = (checkpoint.clone(), parent.clone());
        removed.reparented.push(Reparent {
            checkpoint_id: checkpoint.clone(),
            parent_id: parent.clone().unwrap_or_default(),
        });
        w.apply(Change::Maintenance(Maintenance::SetParent { checkpoint, parent }));
    }
    if let Some(head) = session.head_checkpoint_id.clone().filter(|h| gone.contains(h)) {
        let to = retention::ancestors(&nodes, &head).into_iter().find(|a| keep.contains(a));
        let revision = w.revision();
        crate::service::checkpoint::set_head(&mut session, to, revision, ctx, w.now_us);
        w.apply(Change::PutSession(Box::new(session)));
    }
    removed.checkpoints.extend(plan.remove);
    Ok(())
}

/// Emits the removal's event and finishes the write; its result, or `None` when nothing
/// was removed (then nothing is written).
fn finish<T: WriteTx, R: prost::Message>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    removed: Removed,
    reply: impl FnOnce(Option<WriteResult>, (i64, i64)) -> R,
) -> Result<R> {
    let counts = removed.count();
    if removed.is_empty() {
        return Ok(reply(None, counts));
    }
    let value = MaintenanceEvent {
        removed_checkpoints: removed.checkpoints,
        reparented: removed.reparented,
        removed_sessions: removed.sessions,
        ..Default::default()
    };
    let project = w.project.clone();
    let mut ev = event(EventKind::CheckpointsDeleted, "project", &project, &ctx.actor);
    ev.value = Some(baton_proto::v1::event::Value::Maintenance(value));
    let revision = w.emit(ev)?.revision;
    let out = reply(Some(conflict::result(revision, Decision::Applied, None, ctx.writer())), counts);
    w.finish(ctx, &out)?;
    Ok(out)
}

/// DeleteThreads.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn delete_threads<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    threads: Vec<String>,
) -> Result<DeleteThreadsResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut removed = Removed::default();
            for thread in &threads {
                let sessions = w.tx().thread_sessions(thread).await?;
                remove_sessions(w, &sessions, &mut removed).await?;
            }
            finish(w, ctx, removed, |result, (sessions, checkpoints)| DeleteThreadsResponse {
                removed_sessions: sessions,
                removed_checkpoints: checkpoints,
                result,
            })
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// DeleteThreadRuns.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn delete_runs<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    runs: Vec<String>,
) -> Result<DeleteThreadRunsResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut sessions = Vec::new();
            for run in &runs {
                sessions.extend(w.tx().run_sessions(run).await?);
            }
            sessions.sort();
            sessions.dedup();
            let runs: HashSet<String> = runs.into_iter().collect();
            let mut removed = Removed::default();
            for id in sessions {
                let Some(session) = w.session(&id).await? else { continue };
                let pick = |keyed: &[(String, String, Option<String>)]| {
                    keyed
                        .iter()
                        .filter(|(_, _, run)| run.as_ref().is_some_and(|r| runs.contains(r)))
                        .map(|(_, id, _)| id.clone())
                        .collect()
                };
                remove_checkpoints(w, ctx, session, pick, &mut removed).await?;
            }
            finish(w, ctx, removed, |result, (_, checkpoints)| DeleteThreadRunsResponse {
                removed_checkpoints: checkpoints,
                result,
            })
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// PruneThreads: each namespace keeps its `keep` greatest keys; `keep` 0 deletes the
/// threads.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn prune<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    threads: Vec<String>,
    keep: usize,
) -> Result<PruneThreadsResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut removed = Removed::default();
            for thread in &threads {
                let sessions = w.tx().thread_sessions(thread).await?;
                if keep == 0 {
                    remove_sessions(w, &sessions, &mut removed).await?;
                    continue;
                }
                for session in sessions {
                    let pick = |keyed: &[(String, String, Option<String>)]| {
                        pruned(keyed.iter().map(|(key, id, _)| (key.as_str(), id.as_str())), keep)
                    };
                    remove_checkpoints(w, ctx, session, pick, &mut removed).await?;
                }
            }
            finish(w, ctx, removed, |result, (sessions, checkpoints)| PruneThreadsResponse {
                removed_checkpoints: checkpoints,
                removed_sessions: sessions,
                result,
            })
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
