// Project memory: current-state sets (REPLACE_SET), history (APPEND), keyed notes (UPSERT).

use baton_proto::v1::{
    DeleteMemoryRequest, DeleteMemoryResponse, ListMemoryRequest, ListMemoryResponse, MemoryEntry,
    MemoryItem, MemoryOp, MemorySet, PutMemoryRequest, PutMemoryResponse, SetMemoryCapsRequest,
    SetMemoryCapsResponse, delete_memory_request,
};

use crate::core::memory::{self as rules, Semantics};
use crate::core::set_item::{self, SetItemError, SetItemOp};
use crate::store::parse_caps;
use crate::store::rows::{MemoryRow, RecordStateRow};

const MEMORY_SELECT: &str = "SELECT m.*, r.revision AS record_revision FROM memory m \
     LEFT JOIN records r ON r.project = m.project AND r.record = m.record";

/// A memory record's LWW version (NULL columns if never written) and its live entries in
/// order (NULL entry columns if none), one row per entry; $1 project, $2 record.
const RECORD_STATE: &str = "SELECT r.revision AS record_revision, r.written_us AS record_written_us, \
     r.author AS record_author, m.id, m.category, m.branch, m.key, m.content, m.rationale, m.author, \
     m.revision, m.created_us FROM (SELECT 1 AS one) k \
     LEFT JOIN records r ON r.project = $1 AND r.record = $2 \
     LEFT JOIN memory m ON m.project = $1 AND m.record = $2 AND m.evicted = FALSE \
     ORDER BY m.revision, m.seq";

/// Where a memory write lands.
struct Target<'a> {
    category: &'a str,
    branch: &'a str,
    key: &'a str,
}

impl Target<'_> {
    fn record(&self) -> String {
        rules::record_name(self.category, self.branch, self.key)
    }
}

impl Write {
    /// The project's memory caps, as the lock read them.
    fn caps(&self) -> HashMap<String, i32> {
        parse_caps(&self.caps_json)
    }

    async fn record_entries(&mut self, record: &str, include_evicted: bool) -> Result<Vec<MemoryEntry>> {
        let rows: Vec<MemoryRow> = sqlx::query_as(concat!(
            "SELECT m.*, r.revision AS record_revision FROM memory m LEFT JOIN records r ON r.project = m.project AND r.record = m.record",
            " WHERE m.project = $1 AND m.record = $2 AND (m.evicted = FALSE OR $3) ORDER BY m.revision, m.seq"
        ))
        .bind(&self.project)
        .bind(record)
        .bind(include_evicted)
        .fetch_all(&mut *self.tx)
        .await?;
        Ok(rows.iter().map(MemoryRow::to_proto).collect())
    }

    /// A record's LWW version and its live entries, in one query (or none: read with the lock).
    async fn record_state(&mut self, record: &str) -> Result<(Option<(RecordVersion, Actor)>, Vec<MemoryEntry>)> {
        let rows = match self.prefetched.take() {
            Some(Prefetched::Record(read, rows)) if read == record => rows,
            _ => self.read_record_state(record).await?,
        };
        let version = rows.first().and_then(RecordStateRow::version);
        let entries = rows.into_iter().filter_map(|row| row.entry(&self.project)).collect();
        Ok((version, entries))
    }

    async fn read_record_state(&mut self, record: &str) -> Result<Vec<RecordStateRow>> {
        Ok(sqlx::query_as(RECORD_STATE)
        .bind(&self.project)
        .bind(record)
        .fetch_all(&mut *self.tx)
        .await?)
    }

    /// Applies a record write (sent with the write's log by `finish`): drops `delete_ids`
    /// (None = every entry), inserts `items` and sets the record's version. Returns the
    /// entries created. Nothing in the write may read the record after this.
    async fn apply_record(
        &mut self,
        t: &Target<'_>,
        record: &str,
        items: &[MemoryItem],
        delete_ids: Option<&[String]>,
        ctx: &WriteCtx,
    ) -> Result<Vec<MemoryEntry>> {
        let revision = self.revision();
        let written_us = ctx.written_us(self.now_us);
        let author = encode_actor(&ctx.actor);
        // Deferred: it goes out with the write's log in `finish` (one statement for both).
        let apply = &mut self.deferred;
        match delete_ids {
            None => {
                apply.statement().push("DELETE FROM memory WHERE project = ").push_bind(self.project.clone()).push(" AND record = ").push_bind(record.to_owned());
            }
            Some([]) => {}
            Some(ids) => {
                let sql = apply.statement();
                sql.push("DELETE FROM memory WHERE id IN (");
                let mut list = sql.separated(", ");
                for id in ids {
                    list.push_bind(id.clone());
                }
                sql.push(")");
            }
        }
        let created: Vec<MemoryEntry> = items
            .iter()
            .map(|item| MemoryEntry {
                id: uuid::Uuid::now_v7().to_string(),
                project: self.project.clone(),
                category: t.category.to_owned(),
                branch: t.branch.to_owned(),
                key: t.key.to_owned(),
                content: item.content.clone(),
                rationale: item.rationale.clone(),
                author: Some(ctx.actor.clone()),
                revision,
                record_revision: revision,
                created_at: Some(ts(written_us)),
                evicted: false,
            })
            .collect();
        if !created.is_empty() {
            fail::fail_point!("memory.insert", |_| Err(injected("memory.insert")));
            apply
                .statement()
                .push("INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, revision, seq, created_us, evicted) ")
                .push_values(created.iter().enumerate(), |mut row, (seq, e)| {
                    row.push_bind(e.id.clone())
                        .push_bind(self.project.clone())
                        .push_bind(e.category.clone())
                        .push_bind(e.branch.clone())
                        .push_bind(e.key.clone())
                        .push_bind(record.to_owned())
                        .push_bind(e.content.clone())
                        .push_bind(e.rationale.clone())
                        .push_bind(author.clone())
                        .push_bind(revision)
                        .push_bind(i64::try_from(seq).unwrap_or(i64::MAX))
                        .push_bind(written_us)
                        .push_bind(false);
                });
        }
        apply
            .statement()
            .push("INSERT INTO records (project, record, revision, written_us, author) VALUES (")
            .push_bind(self.project.clone())
            .push(", ")
            .push_bind(record.to_owned())
            .push(", ")
            .push_bind(revision)
            .push(", ")
            .push_bind(written_us)
            .push(", ")
            .push_bind(author)
            .push(
                ") ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision, \
                 written_us = excluded.written_us, author = excluded.author",
            );
        Ok(created)
    }

    async fn insert_entries(&mut self, t: &Target<'_>, items: &[MemoryItem], ctx: &WriteCtx) -> Result<Vec<String>> {
        let revision = self.revision();
        let author = encode_actor(&ctx.actor);
        let record = t.record();
        let mut ids = Vec::with_capacity(items.len());
        for (seq, item) in items.iter().enumerate() {
            fail::fail_point!("memory.insert", |_| Err(injected("memory.insert")));
            let id = uuid::Uuid::now_v7().to_string();
            sqlx::query(
                "INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, revision, seq, created_us, evicted) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, FALSE)",
            )
            .bind(&id)
            .bind(&self.project)
            .bind(t.category)
            .bind(t.branch)
            .bind(t.key)
            .bind(&record)
            .bind(&item.content)
            .bind(&item.rationale)
            .bind(&author)
            .bind(revision)
            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
            .bind(ctx.written_us(self.now_us))
            .execute(&mut *self.tx)
            .await?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// A last-write-wins write of a whole record (a set or a note): `items` is its new
    /// content, `delete_ids` the entries it drops (None = all of them).
    async fn write_record(
        &mut self,
        t: &Target<'_>,
        ctx: &WriteCtx,
        op: MemoryOp,
        items: &[MemoryItem],
        delete_ids: Option<&[String]>,
    ) -> Result<(Vec<MemoryEntry>, WriteResult)> {
        let record = t.record();
        let (current, before) = self.record_state(&record).await?;
        let decision = lww::decide(current.as_ref().map(|(v, _)| *v), ctx.intent(self.now_us));
        let as_value = |entries: Vec<MemoryEntry>| -> RecordValue {
            if t.category == rules::NOTE {
                RecordValue { value: entries.into_iter().next().map(record_value::Value::Note) }
            } else {
                RecordValue {
                    value: Some(record_value::Value::MemorySet(MemorySet {
                        category: t.category.to_owned(),
                        branch: t.branch.to_owned(),
                        revision: current.as_ref().map_or(0, |(v, _)| v.revision),
                        entries,
                    })),
                }
            }
        };
        let written: Vec<MemoryEntry> = items
            .iter()
            .map(|i| MemoryEntry {
                category: t.category.to_owned(),
                branch: t.branch.to_owned(),
                key: t.key.to_owned(),
                content: i.content.clone(),
                rationale: i.rationale.clone(),
                author: Some(ctx.actor.clone()),
                ..Default::default()
            })
            .collect();
        let conflict = decision.is_conflict().then(|| {
            make_conflict(record.clone(), decision, ctx, current.clone(), Some(as_value(before.clone())), Some(as_value(written)), String::new())
        });
        if let (Decision::Rejected, Some(conflict)) = (decision, &conflict) {
            return Err(self.rejected(conflict.clone()));
        }
        let revision = self.revision();
        let mut created = Vec::new();
        let mut deleted_ids = Vec::new();
        let entries = if decision.applies() {
            created = self.apply_record(t, &record, items, delete_ids, ctx).await?;
            // What the record holds now: the entries kept (under the new record version),
            // then those just created, in the order a read gives them.
            let mut after: Vec<MemoryEntry> = match delete_ids {
                None => Vec::new(),
                Some(ids) => before
                    .iter()
                    .filter(|e| !ids.contains(&e.id))
                    .cloned()
                    .map(|mut e| {
                        e.record_revision = revision;
                        e
                    })
                    .collect(),
            };
            deleted_ids = delete_ids.map_or_else(|| before.iter().map(|e| e.id.clone()).collect(), <[String]>::to_vec);
            after.extend(created.iter().cloned());
            after
        } else {
            before
        };
        let conflict = self.emit_memory(t, op, entries, vec![], deleted_ids, conflict, ctx).await?.conflict;
        Ok((created, write_result(revision, decision, conflict, ctx)))
    }

    /// An item operation on a current-state set (ADD_ITEM, REMOVE_ITEM): applied to the set
    /// as it is (`core::set_item`), never STALE. Returns the entries created, those removed,
    /// and the result.
    async fn write_items(
        &mut self,
        t: &Target<'_>,
        ctx: &WriteCtx,
        op: MemoryOp,
        items: &[MemoryItem],
        cap: i32,
    ) -> Result<(Vec<MemoryEntry>, Vec<MemoryEntry>, WriteResult)> {
        let record = t.record();
        let (current, before) = self.record_state(&record).await?;
        let decision = set_item::decide(current.as_ref().map_or(0, |(v, _)| v.revision), ctx.intent(self.now_us));
        let which = if op == MemoryOp::AddItem { SetItemOp::Add } else { SetItemOp::Remove };
        let held: Vec<(String, String)> = before.iter().map(|e| (e.id.clone(), e.content.clone())).collect();
        let change = set_item::change(which, &record, &held, items, cap).map_err(|e| match e {
            SetItemError::OverCap { .. } => Error::FailedPrecondition(e.to_string()),
            SetItemError::Empty(_) => Error::InvalidArgument(e.to_string()),
        })?;
        let as_set = |entries: Vec<MemoryEntry>| RecordValue {
            value: Some(record_value::Value::MemorySet(MemorySet {
                category: t.category.to_owned(),
                branch: t.branch.to_owned(),
                revision: current.as_ref().map_or(0, |(v, _)| v.revision),
                entries,
            })),
        };
        let (removed, kept): (Vec<MemoryEntry>, Vec<MemoryEntry>) =
            before.iter().cloned().partition(|e| change.remove.contains(&e.id));
        let mut wanted = kept.clone();
        wanted.extend(change.add.iter().map(|i| MemoryEntry {
            category: t.category.to_owned(),
            branch: t.branch.to_owned(),
            content: i.content.clone(),
            rationale: i.rationale.clone(),
            author: Some(ctx.actor.clone()),
            ..Default::default()
        }));
        let conflict = decision.is_conflict().then(|| {
            make_conflict(record.clone(), decision, ctx, current.clone(), Some(as_set(before.clone())), Some(as_set(wanted)), String::new())
        });
        if let (Decision::Rejected, Some(conflict)) = (decision, &conflict) {
            return Err(self.rejected(conflict.clone()));
        }
        let revision = self.revision();
        let created = self.apply_record(t, &record, &change.add, Some(&change.remove), ctx).await?;
        let mut after: Vec<MemoryEntry> = kept
            .into_iter()
            .map(|mut e| {
                e.record_revision = revision;
                e
            })
            .collect();
        after.extend(created.iter().cloned());
        let conflict = self.emit_memory(t, op, after, vec![], change.remove, conflict, ctx).await?.conflict;
        Ok((created, removed, write_result(revision, decision, conflict, ctx)))
    }

    #[allow(clippy::too_many_arguments)]
    async fn emit_memory(
        &mut self,
        t: &Target<'_>,
        op: MemoryOp,
        entries: Vec<MemoryEntry>,
        evicted_ids: Vec<String>,
        deleted_ids: Vec<String>,
        conflict: Option<Conflict>,
        ctx: &WriteCtx,
    ) -> Result<Event> {
        let mut ev = event(EventKind::MemoryChanged, "memory", &t.record(), &ctx.actor);
        ev.value = Some(baton_proto::v1::event::Value::Memory(MemoryChange {
            category: t.category.to_owned(),
            branch: t.branch.to_owned(),
            key: t.key.to_owned(),
            op: op as i32,
            entries,
            evicted_ids,
            deleted_ids,
        }));
        ev.conflict = conflict;
        self.emit(ev).await
    }

    /// History: append, then evict the oldest beyond the cap. Never a conflict.
    async fn append(&mut self, t: &Target<'_>, ctx: &WriteCtx, items: &[MemoryItem], cap: i32) -> Result<PutMemoryResponse> {
        let record = t.record();
        let live_before = self.record_entries(&record, false).await?;
        let revision = self.revision();
        let ids = self.insert_entries(t, items, ctx).await?;
        let live = self.record_entries(&record, false).await?;
        let evict = rules::evictions(live_before.len(), items.len(), cap);
        let evicted: Vec<MemoryEntry> = live.iter().take(evict).cloned().map(|mut e| { e.evicted = true; e }).collect();
        for e in &evicted {
            sqlx::query("UPDATE memory SET evicted = TRUE WHERE id = $1").bind(&e.id).execute(&mut *self.tx).await?;
        }
        let entries: Vec<MemoryEntry> = live
            .into_iter()
            .filter(|e| ids.contains(&e.id))
            .map(|mut e| {
                e.evicted = evicted.iter().any(|x| x.id == e.id);
                e
            })
            .collect();
        self.emit_memory(t, MemoryOp::Append, entries.clone(), evicted.iter().map(|e| e.id.clone()).collect(), vec![], None, ctx).await?;
        Ok(PutMemoryResponse { entries, evicted, result: Some(write_result(revision, Decision::Applied, None, ctx)), removed: vec![] })
    }
}

impl Backend {
    pub(crate) async fn do_put_memory(&self, ctx: WriteCtx, req: PutMemoryRequest) -> Result<PutMemoryResponse> {
        // A set or a note is written last-write-wins against its record's current state.
        let record = (rules::semantics(&req.category)? != Semantics::History)
            .then(|| rules::record_name(&req.category, &req.branch, &req.key));
        let mut w = match self.begin_memory_record(&req.project, &ctx, record.as_deref()).await? {
            Begun::Replay(bytes) => return replayed(&bytes, |r: &mut PutMemoryResponse| r.result.as_mut()),
            Begun::Fresh(w) => w,
        };
        let caps = rules::effective_caps(&w.caps());
        let cap = caps.get(&req.category).copied().unwrap_or(0);
        let semantics = rules::check_put(&req.category, MemoryOp::try_from(req.op).unwrap_or_default(), &req.key, req.items.len(), cap)?;
        let t = Target { category: &req.category, branch: &req.branch, key: &req.key };
        let op = MemoryOp::try_from(req.op).unwrap_or_default();
        let reply = match semantics {
            Semantics::History => w.append(&t, &ctx, &req.items, cap).await?,
            Semantics::CurrentSet if matches!(op, MemoryOp::AddItem | MemoryOp::RemoveItem) => {
                let (entries, removed, result) = w.write_items(&t, &ctx, op, &req.items, cap).await?;
                PutMemoryResponse { entries, evicted: vec![], result: Some(result), removed }
            }
            Semantics::CurrentSet | Semantics::Keyed => {
                let op = if semantics == Semantics::Keyed { MemoryOp::Upsert } else { MemoryOp::ReplaceSet };
                let (entries, result) = w.write_record(&t, &ctx, op, &req.items, None).await?;
                PutMemoryResponse { entries, evicted: vec![], result: Some(result), removed: vec![] }
            }
        };
        w.finish(self, &ctx, &reply).await?;
        Ok(reply)
    }

    pub(crate) async fn do_delete_memory(&self, ctx: WriteCtx, req: DeleteMemoryRequest) -> Result<DeleteMemoryResponse> {
        // Deleting from a set or a note is an LWW write of its record.
        let record = match &req.target {
            Some(delete_memory_request::Target::Record(r)) if rules::semantics(&r.category)? != Semantics::History => {
                Some(rules::record_name(&r.category, &r.branch, &r.key))
            }
            _ => None,
        };
        let mut w = match self.begin_memory_record(&req.project, &ctx, record.as_deref()).await? {
            Begun::Replay(bytes) => return replayed(&bytes, |r: &mut DeleteMemoryResponse| r.result.as_mut()),
            Begun::Fresh(w) => w,
        };
        let (category, branch, key, only) = match &req.target {
            Some(delete_memory_request::Target::EntryId(id)) => {
                let row: Option<MemoryRow> = sqlx::query_as(concat!(
                    "SELECT m.*, r.revision AS record_revision FROM memory m LEFT JOIN records r ON r.project = m.project AND r.record = m.record",
                    " WHERE m.id = $1 AND m.project = $2"
                ))
                .bind(id)
                .bind(&req.project)
                .fetch_optional(&mut *w.tx)
                .await?;
                let row = row.ok_or_else(|| Error::NotFound(format!("entry_id: no memory entry {id} in project {:?}", req.project)))?;
                (row.category, row.branch, row.key, Some(id.clone()))
            }
            Some(delete_memory_request::Target::Record(r)) => (r.category.clone(), r.branch.clone(), r.key.clone(), None),
            None => return Err(Error::InvalidArgument("target: give an entry_id or a record".into())),
        };
        let semantics = rules::semantics(&category)?;
        let t = Target { category: &category, branch: &branch, key: &key };
        let (deleted_ids, result) = match (semantics, only) {
            (Semantics::History, only) => {
                // History has no record to conflict on: deleting is plain.
                let record = t.record();
                let ids: Vec<String> = match only {
                    Some(id) => vec![id],
                    None => w.record_entries(&record, true).await?.into_iter().map(|e| e.id).collect(),
                };
                let revision = w.revision();
                for id in &ids {
                    sqlx::query("DELETE FROM memory WHERE id = $1").bind(id).execute(&mut *w.tx).await?;
                }
                w.emit_memory(&t, MemoryOp::Append, vec![], vec![], ids.clone(), None, &ctx).await?;
                (ids, write_result(revision, Decision::Applied, None, &ctx))
            }
            (_, only) => {
                let record = t.record();
                let (version, before) = w.record_state(&record).await?;
                if before.is_empty() && version.is_none() {
                    return Err(Error::NotFound(format!("record: {record} does not exist in project {:?}", req.project)));
                }
                let (keep, drop): (Vec<MemoryEntry>, Vec<MemoryEntry>) = match &only {
                    Some(id) => before.into_iter().partition(|e| &e.id != id),
                    None => (vec![], before),
                };
                let drop_ids: Vec<String> = drop.iter().map(|e| e.id.clone()).collect();
                let op = if semantics == Semantics::Keyed { MemoryOp::Upsert } else { MemoryOp::ReplaceSet };
                let _ = keep;
                let (_, result) = w.write_record(&t, &ctx, op, &[], Some(&drop_ids)).await?;
                let deleted = if result.outcome == WriteOutcome::Stale as i32 { vec![] } else { drop_ids };
                (deleted, result)
            }
        };
        let reply = DeleteMemoryResponse { deleted_ids, result: Some(result) };
        w.finish(self, &ctx, &reply).await?;
        Ok(reply)
    }

    pub(crate) async fn do_set_memory_caps(&self, ctx: WriteCtx, req: SetMemoryCapsRequest) -> Result<SetMemoryCapsResponse> {
        let mut w = match self.begin_memory(&req.project, &ctx).await? {
            Begun::Replay(bytes) => return replayed(&bytes, |r: &mut SetMemoryCapsResponse| r.result.as_mut()),
            Begun::Fresh(w) => w,
        };
        let mut caps = w.caps();
        caps.extend(req.caps.clone());
        let json = serde_json::to_string(&caps).map_err(Error::internal)?;
        let revision = w.revision();
        sqlx::query("UPDATE projects SET memory_caps = $2 WHERE key = $1").bind(&w.project).bind(json).execute(&mut *w.tx).await?;
        let effective: HashMap<String, i32> = rules::effective_caps(&caps).into_iter().collect();
        let mut ev = event(EventKind::ProjectSettingsChanged, "project", &req.project, &ctx.actor);
        ev.value = Some(baton_proto::v1::event::Value::Settings(baton_proto::v1::ProjectSettings { memory_caps: effective.clone() }));
        w.emit(ev).await?;
        let reply = SetMemoryCapsResponse { caps: effective, result: Some(write_result(revision, Decision::Applied, None, &ctx)) };
        w.finish(self, &ctx, &reply).await?;
        Ok(reply)
    }

    /// One page of a project's memory in the list's order, after `after` (the position a
    /// page token holds), read row by row until the page is full.
    pub(crate) async fn do_list_memory(&self, req: ListMemoryRequest, page_size: i64, after: Option<crate::store::MemoryPosition>) -> Result<ListMemoryResponse> {
        use futures::TryStreamExt as _;
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &req.project).await?;
        let caps_json: Option<(String,)> =
            sqlx::query_as("SELECT memory_caps FROM projects WHERE key = $1").bind(&req.project).fetch_optional(&mut *conn).await?;
        let caps = rules::effective_caps(&caps_json.map(|(j,)| parse_caps(&j)).unwrap_or_default()).into_iter().collect();
        let mut record_revisions = HashMap::new();
        // The set the request names, even when it is empty: a client replacing it needs its
        // revision.
        if let (false, Some(branch)) = (req.category.is_empty() || req.category == rules::NOTE, &req.branch) {
            let record = rules::record_name(&req.category, branch, "");
            let found: Option<(i64,)> = sqlx::query_as("SELECT revision FROM records WHERE project = $1 AND record = $2")
                .bind(&req.project)
                .bind(&record)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some((revision,)) = found {
                record_revisions.insert(record, revision);
            }
        }
        let mut sql = sqlx::QueryBuilder::<Db>::new(MEMORY_SELECT);
        sql.push(" WHERE m.project = ").push_bind(req.project.clone());
        if !req.category.is_empty() {
            sql.push(" AND m.category = ").push_bind(req.category.clone());
        }
        if let Some(branch) = &req.branch {
            sql.push(" AND m.branch = ").push_bind(branch.clone());
        }
        if !req.include_evicted {
            sql.push(" AND m.evicted = FALSE");
        }
        if let Some(p) = after {
            sql.push(" AND (m.category, m.branch, m.key, m.revision, m.seq) > (")
                .push_bind(p.category)
                .push(", ")
                .push_bind(p.branch)
                .push(", ")
                .push_bind(p.key)
                .push(", ")
                .push_bind(p.revision)
                .push(", ")
                .push_bind(p.seq)
                .push(")");
        }
        sql.push(" ORDER BY m.category, m.branch, m.key, m.revision, m.seq LIMIT ").push_bind(page_size.saturating_add(1));
        let mut page = crate::core::page::Budget::new(page_size);
        let mut entries = Vec::new();
        let mut last = None;
        let mut more = false;
        {
            let mut rows = sql.build_query_as::<MemoryRow>().fetch(&mut *conn);
            while let Some(row) = rows.try_next().await? {
                let entry = row.to_proto();
                if !page.take(prost::Message::encoded_len(&entry)) {
                    more = true;
                    break;
                }
                if let Some(revision) = row.record_revision {
                    record_revisions.insert(row.record.clone(), revision);
                }
                last = Some(crate::store::MemoryPosition {
                    category: row.category,
                    branch: row.branch,
                    key: row.key,
                    revision: row.revision,
                    seq: row.seq,
                });
                entries.push(entry);
            }
        }
        let next_page_token = match last {
            Some(position) if more => crate::core::page::token(&position),
            _ => String::new(),
        };
        Ok(ListMemoryResponse { entries, caps, as_of_revision, record_revisions, next_page_token })
    }
}
