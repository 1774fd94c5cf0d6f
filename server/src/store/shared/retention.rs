// Retention and event-log compaction: maintenance writes, each one transaction under the
// project lock with one event, like any other write.

use baton_proto::v1::{BlobRefs, CompactEventsResponse, Maintenance, ProjectPruned, Reparent};

use crate::core::retention::{self, Node};

impl Backend {
    /// Projects with checkpoints older than the cut-off: the only ones retention can change.
    pub(crate) async fn do_projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT project FROM checkpoints WHERE created_us < $1 ORDER BY project")
            .bind(cutoff_us)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(p,)| p).collect())
    }

    /// Applies the retention rules to one project (or, on a dry run, only plans). `None` when
    /// nothing would be removed.
    pub(crate) async fn do_prune(&self, project: String, cutoff_us: i64, keep_ancestors: usize, dry_run: bool, actor: Actor) -> Result<Option<ProjectPruned>> {
        if head_revision(&mut *self.pool.acquire().await?, &project).await? == 0 {
            return Err(Error::NotFound(format!("project: no project {project:?}")));
        }
        let ctx = WriteCtx { actor, ..WriteCtx::default() };
        let mut w = match self.begin(&project, &ctx).await? {
            Begun::Fresh(w) => w,
            Begun::Replay => return Err(Error::internal("maintenance write without request_id replayed")),
        };
        let rows: Vec<(String, Option<String>, i64)> =
            sqlx::query_as("SELECT id, parent_id, created_us FROM checkpoints WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        let nodes: HashMap<String, Node> = rows.into_iter().map(|(id, parent, created_us)| (id, Node { parent, created_us })).collect();
        let heads: Vec<(String,)> = sqlx::query_as("SELECT head_checkpoint_id FROM sessions WHERE project = $1 AND head_checkpoint_id IS NOT NULL")
            .bind(&project)
            .fetch_all(&mut *w.tx)
            .await?;
        let heads: Vec<String> = heads.into_iter().map(|(h,)| h).collect();

        // Old ancestors count only when their digest verifies: verify the ones the rules
        // ask about, and ask again until no new question comes up.
        let mut valid: HashMap<String, bool> = HashMap::new();
        let keep = loop {
            let mut unknown = Vec::new();
            let keep = retention::keep_set(&nodes, &heads, cutoff_us, keep_ancestors, |id| {
                valid.get(id).copied().unwrap_or_else(|| {
                    unknown.push(id.to_owned());
                    true
                })
            });
            if unknown.is_empty() {
                break keep;
            }
            for id in unknown {
                let row: CheckpointRow = sqlx::query_as("SELECT * FROM checkpoints WHERE id = $1").bind(&id).fetch_one(&mut *w.tx).await?;
                let ok = row.verified(false).is_ok();
                if !ok {
                    tracing::warn!(checkpoint = %id, "retention: checkpoint fails its digest; not kept as an ancestor");
                }
                valid.insert(id, ok);
            }
        };
        let plan = retention::plan(&nodes, &keep);
        if plan.remove.is_empty() {
            return Ok(None); // dropped: rolled back, no revision used
        }
        let reparented: Vec<Reparent> =
            plan.reparent.iter().map(|(id, parent)| Reparent { checkpoint_id: id.clone(), parent_id: parent.clone().unwrap_or_default() }).collect();
        let mut report = ProjectPruned { project: project.clone(), removed_checkpoints: plan.remove.clone(), reparented: reparented.clone(), removed_chunks: 0, revision: 0 };
        if dry_run {
            report.removed_chunks = unreferenced_chunks(&mut w.tx, &project, cutoff_us, &plan.remove).await?.len() as i64;
            return Ok(Some(report));
        }
        for id in &plan.remove {
            sqlx::query("DELETE FROM checkpoints WHERE id = $1").bind(id).execute(&mut *w.tx).await?;
        }
        for (id, parent) in &plan.reparent {
            sqlx::query("UPDATE checkpoints SET parent_id = $2 WHERE id = $1").bind(id).bind(parent).execute(&mut *w.tx).await?;
        }
        let chunks = unreferenced_chunks(&mut w.tx, &project, cutoff_us, &[]).await?;
        for digest in &chunks {
            sqlx::query("DELETE FROM chunks WHERE project = $1 AND digest = $2").bind(&project).bind(digest).execute(&mut *w.tx).await?;
        }
        report.removed_chunks = chunks.len() as i64;
        let event = w
            .emit(Event {
                kind: EventKind::CheckpointsPruned as i32,
                entity: "project".into(),
                entity_id: project.clone(),
                actor: Some(ctx.actor.clone()),
                value: Some(baton_proto::v1::event::Value::Maintenance(Maintenance {
                    removed_checkpoints: plan.remove,
                    reparented,
                    ..Default::default()
                })),
                ..Default::default()
            })
            .await?;
        report.revision = event.revision;
        w.finish(self, &ctx, &report).await?;
        Ok(Some(report))
    }

    /// Forgets idempotency replies older than `before_us` (clients stop retrying long before).
    pub(crate) async fn do_prune_requests(&self, before_us: i64) -> Result<u64> {
        let mut write = plain_write(self).await?;
        let removed = sqlx::query("DELETE FROM requests WHERE created_us < $1").bind(before_us).execute(&mut *write).await?.rows_affected();
        write.commit().await?;
        Ok(removed)
    }

    /// Deletes a project's events below `below`; listing or watching from under it is then
    /// OUT_OF_RANGE.
    pub(crate) async fn do_compact_events(&self, project: String, below: i64, actor: Actor) -> Result<CompactEventsResponse> {
        let head = head_revision(&mut *self.pool.acquire().await?, &project).await?;
        if head == 0 {
            return Err(Error::NotFound(format!("project: no project {project:?}")));
        }
        let ctx = WriteCtx { actor, ..WriteCtx::default() };
        let mut w = match self.begin(&project, &ctx).await? {
            Begun::Fresh(w) => w,
            Begun::Replay => return Err(Error::internal("maintenance write without request_id replayed")),
        };
        // The compaction's own event is at w.last; everything before it may go.
        if below < 1 || below > w.last {
            return Err(Error::Invalid(crate::core::validate::invalid(
                "below_revision",
                format!("{below} is out of range: use 1..={} (the project's head revision + 1)", w.last),
            )));
        }
        let (current,): (i64,) = sqlx::query_as("SELECT events_from FROM projects WHERE key = $1").bind(&project).fetch_one(&mut *w.tx).await?;
        if below <= current {
            return Err(Error::FailedPrecondition(format!(
                "events below revision {current} are already compacted; nothing to do below {below}"
            )));
        }
        let removed = sqlx::query("DELETE FROM events WHERE project = $1 AND revision < $2").bind(&project).bind(below).execute(&mut *w.tx).await?.rows_affected();
        sqlx::query("UPDATE projects SET events_from = $2 WHERE key = $1").bind(&project).bind(below).execute(&mut *w.tx).await?;
        let event = w
            .emit(Event {
                kind: EventKind::EventsCompacted as i32,
                entity: "project".into(),
                entity_id: project.clone(),
                actor: Some(ctx.actor.clone()),
                value: Some(baton_proto::v1::event::Value::Maintenance(Maintenance { oldest_kept_revision: below, ..Default::default() })),
                ..Default::default()
            })
            .await?;
        let reply = CompactEventsResponse { removed_events: removed as i64, oldest_kept_revision: below, revision: event.revision };
        w.finish(self, &ctx, &reply).await?;
        Ok(reply)
    }
}

/// Chunks of the project older than the cut-off that no checkpoint (other than those in
/// `ignoring`, about to go) references. Younger ones may belong to a checkpoint whose chunks
/// were uploaded but which is not created yet.
async fn unreferenced_chunks(conn: &mut Conn, project: &str, cutoff_us: i64, ignoring: &[String]) -> Result<Vec<String>> {
    let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT id, blobs FROM checkpoints WHERE project = $1 AND length(blobs) > 0")
        .bind(project)
        .fetch_all(&mut *conn)
        .await?;
    let mut referenced = HashSet::new();
    for (id, blobs) in rows {
        if ignoring.contains(&id) {
            continue;
        }
        let refs = BlobRefs::decode(blobs.as_slice()).map_err(|e| Error::internal(format!("checkpoint {id} blob refs do not decode: {e}")))?;
        referenced.extend(refs.blobs.into_iter().flat_map(|b| b.chunks));
    }
    let old: Vec<(String,)> = sqlx::query_as("SELECT digest FROM chunks WHERE project = $1 AND created_us < $2")
        .bind(project)
        .bind(cutoff_us)
        .fetch_all(&mut *conn)
        .await?;
    Ok(old.into_iter().map(|(d,)| d).filter(|d| !referenced.contains(d)).collect())
}
