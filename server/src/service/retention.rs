//! Retention and event-log compaction: maintenance writes, each one write under the project
//! lock with one event, like any other. `core::retention` decides what a project keeps.

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{
    Actor, CompactEventsResponse, Event, EventKind, Maintenance as MaintenanceEvent, ProjectPruned, Reparent,
};
use futures::future::BoxFuture;

use super::write::{self, Write};
use crate::core::retention::{self, Node};
use crate::error::{Error, Result};
use crate::store::maintenance::{BlobsRow, MaintenanceTx};
use crate::store::model::{Change, Lock, Maintenance};
use crate::store::{Store, WriteCtx, WriteTx};

/// Runs a maintenance write on an existing project (NOT_FOUND otherwise: maintenance never
/// creates one); see `write::run`.
pub(crate) async fn run<S, R, F>(store: &S, project: &str, ctx: WriteCtx, memory: bool, body: F) -> Result<R>
where
    S: Store,
    R: Send + 'static,
    F: for<'c> FnOnce(&'c mut Write<S::Tx>, &'c WriteCtx) -> BoxFuture<'c, Result<R>> + Send + 'static,
{
    if crate::store::head_revision(store, project.to_owned()).await? == 0 {
        return Err(Error::NotFound(format!("project: no project {project:?}")));
    }
    let lock =
        Lock { project: project.to_owned(), request_id: None, memory, first_read: None, rewrites_log: true };
    write::run(store, lock, ctx, body).await?.done()
}

/// A maintenance event about the project.
pub(crate) fn event(kind: EventKind, project: &str, actor: &Actor, value: MaintenanceEvent) -> Event {
    let mut ev = write::event(kind, "project", project, actor);
    ev.value = Some(baton_proto::v1::event::Value::Maintenance(value));
    ev
}

/// Applies the retention rules to one project (or, on a dry run, only plans). `None` when
/// nothing would be removed.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn prune<S: Store>(
    store: &S,
    project: String,
    cutoff_us: i64,
    keep_ancestors: usize,
    dry_run: bool,
    actor: Actor,
) -> Result<Option<ProjectPruned>> {
    let ctx = WriteCtx { actor, ..WriteCtx::default() };
    let key = project.clone();
    run(store, &key, ctx, false, move |w, ctx| {
        Box::pin(async move {
            let nodes: HashMap<String, Node> = w
                .tx()
                .checkpoint_tree()
                .await?
                .into_iter()
                .map(|r| (r.id, Node { parent: r.parent_id, created_us: r.created_us }))
                .collect();
            let heads = w.tx().session_heads().await?;
            let keep = keep_set(w, &nodes, &heads, cutoff_us, keep_ancestors).await?;
            let plan = retention::plan(&nodes, &keep);
            if plan.remove.is_empty() {
                return Ok(None);
            }
            let reparented: Vec<Reparent> = plan
                .reparent
                .iter()
                .map(|(id, parent)| Reparent {
                    checkpoint_id: id.clone(),
                    parent_id: parent.clone().unwrap_or_default(),
                })
                .collect();
            let chunks = unreferenced_chunks(w, cutoff_us, &plan.remove).await?;
            let mut report = ProjectPruned {
                project: project.clone(),
                removed_checkpoints: plan.remove.clone(),
                reparented: reparented.clone(),
                removed_chunks: i64::try_from(chunks.len()).unwrap_or(i64::MAX),
                ..ProjectPruned::default()
            };
            if dry_run {
                return Ok(Some(report));
            }
            w.apply(Change::Maintenance(Maintenance::DeleteCheckpoints { ids: plan.remove.clone() }));
            for (checkpoint, parent) in plan.reparent {
                w.apply(Change::Maintenance(Maintenance::SetParent { checkpoint, parent }));
            }
            if !chunks.is_empty() {
                w.apply(Change::Maintenance(Maintenance::DeleteChunks { digests: chunks }));
            }
            let value =
                MaintenanceEvent { removed_checkpoints: plan.remove, reparented, ..Default::default() };
            report.revision =
                w.emit(event(EventKind::CheckpointsPruned, &project, &ctx.actor, value))?.revision;
            w.finish(ctx, &report)?;
            Ok(Some(report))
        })
    })
    .await
}

/// What the rules keep. Old ancestors count only when their digest verifies: the ones the
/// rules ask about are verified, and asked again until no new question comes up.
async fn keep_set<T: WriteTx>(
    w: &mut Write<T>,
    nodes: &HashMap<String, Node>,
    heads: &[String],
    cutoff_us: i64,
    keep_ancestors: usize,
) -> Result<HashSet<String>> {
    let mut valid: HashMap<String, bool> = HashMap::new();
    loop {
        let mut unknown = Vec::new();
        let keep = retention::keep_set(nodes, heads, cutoff_us, keep_ancestors, |id| {
            valid.get(id).copied().unwrap_or_else(|| {
                unknown.push(id.to_owned());
                true
            })
        });
        if unknown.is_empty() {
            return Ok(keep);
        }
        for id in unknown {
            let ok = w.tx().checkpoint(&id).await?.is_some_and(|row| row.verified(false).is_ok());
            if !ok {
                tracing::warn!(checkpoint = %id, "retention: checkpoint fails its digest; not kept as an ancestor");
            }
            valid.insert(id, ok);
        }
    }
}

/// Chunks older than the cut-off that no checkpoint but those `going` references. Younger
/// ones may belong to a checkpoint whose chunks were uploaded but which is not created yet.
async fn unreferenced_chunks<T: WriteTx + MaintenanceTx>(
    w: &mut Write<T>,
    cutoff_us: i64,
    going: &[String],
) -> Result<Vec<String>> {
    let mut referenced = HashSet::new();
    for BlobsRow { id, blobs } in w.tx().checkpoint_blobs().await? {
        if going.contains(&id) {
            continue;
        }
        let refs = crate::core::blobs::decode(&blobs)
            .map_err(|e| Error::internal(format!("checkpoint {id} blob refs do not decode: {e}")))?;
        referenced.extend(refs.into_iter().flat_map(|b| b.chunks));
    }
    let old = w.tx().chunks_before(cutoff_us).await?;
    Ok(old.into_iter().filter(|d| !referenced.contains(d)).collect())
}

/// Deletes a project's events below `below`; listing or watching from under it is then
/// OUT_OF_RANGE.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn compact<S: Store>(
    store: &S,
    project: String,
    below: i64,
    actor: Actor,
) -> Result<CompactEventsResponse> {
    let ctx = WriteCtx { actor, ..WriteCtx::default() };
    let key = project.clone();
    run(store, &key, ctx, false, move |w, ctx| {
        Box::pin(async move {
            // The compaction's own event takes the revision the lock gave: everything before it may go.
            let own = w.revision();
            if below < 1 || below > own {
                return Err(Error::Invalid(crate::core::validate::invalid(
                    "below_revision",
                    format!("{below} is out of range: use 1..={own} (the project's head revision + 1)"),
                )));
            }
            let current = w.tx().events_from().await?;
            if below <= current {
                return Err(Error::FailedPrecondition(format!(
                    "events below revision {current} are already compacted; nothing to do below {below}"
                )));
            }
            let removed = w.tx().events_below(below).await?;
            w.apply(Change::Maintenance(Maintenance::CompactEvents { below }));
            let value = MaintenanceEvent { oldest_kept_revision: below, ..Default::default() };
            let revision = w.emit(event(EventKind::EventsCompacted, &project, &ctx.actor, value))?.revision;
            let reply =
                CompactEventsResponse { removed_events: removed, oldest_kept_revision: below, revision };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    })
    .await
}
