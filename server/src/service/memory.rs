//! Project memory writes: current-state sets (REPLACE_SET, ADD_ITEM, REMOVE_ITEM), history
//! (APPEND, with eviction beyond the cap), keyed notes (UPSERT), deletes and caps.
//!
//! A set or a note is one record, written last-write-wins against its current version
//! (`core::lww`); item operations apply to the set as it is (`core::set_item`); history
//! never conflicts.

use std::collections::HashMap;

use baton_proto::v1::{
    Actor, Conflict, DeleteMemoryRequest, DeleteMemoryResponse, EventKind, ListMemoryRequest,
    ListMemoryResponse, MemoryChange, MemoryEntry, MemoryItem, MemoryOp, MemorySet, PutMemoryRequest,
    PutMemoryResponse, RecordValue, SetMemoryCapsRequest, SetMemoryCapsResponse, WriteOutcome, WriteResult,
    delete_memory_request, record_value,
};

use super::write::{self, Write, event};
use crate::core::conflict::{self, Contested};
use crate::core::lww::{self, Decision, RecordVersion};
use crate::core::memory::{self as rules, Semantics};
use crate::core::set_item::{self, SetItemError, SetItemOp};
use crate::error::{Error, Result};
use crate::store::model::{Change, Entry, FirstRead, Lock, MemoryQuery};
use crate::store::{MemoryPosition, Store, WriteCtx, WriteTx, parse_caps};

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

    /// How a record's entries read in a conflict: a note's one entry, or the set.
    fn value(&self, revision: i64, entries: Vec<MemoryEntry>) -> RecordValue {
        if self.category == rules::NOTE {
            return RecordValue { value: entries.into_iter().next().map(record_value::Value::Note) };
        }
        RecordValue {
            value: Some(record_value::Value::MemorySet(MemorySet {
                category: self.category.to_owned(),
                branch: self.branch.to_owned(),
                revision,
                entries,
            })),
        }
    }

    /// What a write of `items` would make of the record, as a conflict shows it.
    fn written(&self, items: &[MemoryItem], ctx: &WriteCtx) -> Vec<MemoryEntry> {
        items
            .iter()
            .map(|i| MemoryEntry {
                category: self.category.to_owned(),
                branch: self.branch.to_owned(),
                key: self.key.to_owned(),
                content: i.content.clone(),
                rationale: i.rationale.clone(),
                author: Some(ctx.actor.clone()),
                ..Default::default()
            })
            .collect()
    }
}

/// A set or note as the write found it: its entries as the API shows them, and its version.
struct Found {
    record: String,
    before: Vec<MemoryEntry>,
    current: Option<(RecordVersion, Actor)>,
}

impl Found {
    async fn read<T: WriteTx>(w: &mut Write<T>, t: &Target<'_>) -> Result<Self> {
        let record = t.record();
        let state = w.tx().record_state(&record).await?;
        let before = state.entries.iter().map(|e| e.to_proto(&w.project)).collect();
        Ok(Self { record, before, current: state.version })
    }

    /// The revision of the record's last write (0 if never written).
    fn revision(&self) -> i64 {
        self.current.as_ref().map_or(0, |(v, _)| v.revision)
    }

    /// The conflict of a write that wanted the record to hold `wanted`.
    fn conflict(
        &self,
        t: &Target<'_>,
        decision: Decision,
        ctx: &WriteCtx,
        wanted: Vec<MemoryEntry>,
    ) -> Conflict {
        let contested = Contested {
            record: self.record.clone(),
            current: self.current.clone(),
            current_value: Some(t.value(self.revision(), self.before.clone())),
            written_value: Some(t.value(self.revision(), wanted)),
            detail: String::new(),
        };
        conflict::conflict(decision, ctx.writer(), contested)
    }
}

/// The lock of a memory write, reading the record it is about first (sets and notes).
fn lock(project: &str, ctx: &WriteCtx, record: Option<&str>) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: ctx.request_id.clone(),
        memory: true,
        first_read: record.map(|r| FirstRead::Record(r.to_owned())),
        rewrites_log: false,
    }
}

/// PutMemory.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn put<S: Store>(store: &S, ctx: WriteCtx, req: PutMemoryRequest) -> Result<PutMemoryResponse> {
    let semantics = rules::semantics(&req.category)?;
    let record =
        (semantics != Semantics::History).then(|| rules::record_name(&req.category, &req.branch, &req.key));
    let lock = lock(&req.project, &ctx, record.as_deref());
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let cap =
                rules::effective_caps(&parse_caps(&w.caps_json)).get(&req.category).copied().unwrap_or(0);
            let op = MemoryOp::try_from(req.op).unwrap_or_default();
            rules::check_put(&req.category, op, &req.key, req.items.len(), cap)?;
            let t = Target { category: &req.category, branch: &req.branch, key: &req.key };
            let reply = match semantics {
                Semantics::History => append(w, &t, ctx, &req.items, cap).await?,
                Semantics::CurrentSet if matches!(op, MemoryOp::AddItem | MemoryOp::RemoveItem) => {
                    let (entries, removed, result) = write_items(w, &t, ctx, op, &req.items, cap).await?;
                    PutMemoryResponse { entries, evicted: vec![], result: Some(result), removed }
                }
                Semantics::CurrentSet | Semantics::Keyed => {
                    let op =
                        if semantics == Semantics::Keyed { MemoryOp::Upsert } else { MemoryOp::ReplaceSet };
                    let found = Found::read(w, &t).await?;
                    let (entries, result) = write_record(w, &t, ctx, op, found, &req.items, None)?;
                    PutMemoryResponse { entries, evicted: vec![], result: Some(result), removed: vec![] }
                }
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// DeleteMemory: an entry by id, or a whole record.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn delete<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: DeleteMemoryRequest,
) -> Result<DeleteMemoryResponse> {
    // Deleting from a set or a note is an LWW write of its record.
    let record = match &req.target {
        Some(delete_memory_request::Target::Record(r))
            if rules::semantics(&r.category)? != Semantics::History =>
        {
            Some(rules::record_name(&r.category, &r.branch, &r.key))
        }
        _ => None,
    };
    let lock = lock(&req.project, &ctx, record.as_deref());
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let (category, branch, key, only) = match &req.target {
                Some(delete_memory_request::Target::EntryId(id)) => {
                    let entry = w.tx().entry(id).await?.ok_or_else(|| {
                        Error::NotFound(format!(
                            "entry_id: no memory entry {id} in project {:?}",
                            req.project
                        ))
                    })?;
                    (entry.category, entry.branch, entry.key, Some(id.clone()))
                }
                Some(delete_memory_request::Target::Record(r)) => {
                    (r.category.clone(), r.branch.clone(), r.key.clone(), None)
                }
                None => return Err(Error::InvalidArgument("target: give an entry_id or a record".into())),
            };
            let semantics = rules::semantics(&category)?;
            let t = Target { category: &category, branch: &branch, key: &key };
            let (deleted_ids, result) = if semantics == Semantics::History {
                delete_history(w, &t, ctx, only).await?
            } else {
                let found = Found::read(w, &t).await?;
                if found.before.is_empty() && found.current.is_none() {
                    return Err(Error::NotFound(format!(
                        "record: {} does not exist in project {:?}",
                        found.record, req.project
                    )));
                }
                let drop_ids: Vec<String> = found
                    .before
                    .iter()
                    .filter(|e| only.as_ref().is_none_or(|id| &e.id == id))
                    .map(|e| e.id.clone())
                    .collect();
                let op = if semantics == Semantics::Keyed { MemoryOp::Upsert } else { MemoryOp::ReplaceSet };
                let (_, result) = write_record(w, &t, ctx, op, found, &[], Some(&drop_ids))?;
                let deleted = if result.outcome == WriteOutcome::Stale as i32 { vec![] } else { drop_ids };
                (deleted, result)
            };
            let reply = DeleteMemoryResponse { deleted_ids, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// SetMemoryCaps: the caps given replace those of the same categories.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn set_caps<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: SetMemoryCapsRequest,
) -> Result<SetMemoryCapsResponse> {
    let lock = lock(&req.project, &ctx, None);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut caps = parse_caps(&w.caps_json);
            caps.extend(req.caps.clone());
            let json = serde_json::to_string(&caps).map_err(Error::internal)?;
            let revision = w.revision();
            w.apply(Change::SetMemoryCaps { json });
            let effective: HashMap<String, i32> = rules::effective_caps(&caps).into_iter().collect();
            let mut ev = event(EventKind::ProjectSettingsChanged, "project", &req.project, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Settings(baton_proto::v1::ProjectSettings {
                memory_caps: effective.clone(),
            }));
            w.emit(ev)?;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = SetMemoryCapsResponse { caps: effective, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// Writes a record's new content (sent by `finish`): drops `delete_ids` (None = every
/// entry), adds `items` and sets the record's version. Returns the entries created.
#[allow(clippy::unnecessary_wraps, reason = "a fail point makes it fail in the fault tests")]
fn apply_record<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    items: &[MemoryItem],
    delete_ids: Option<&[String]>,
    ctx: &WriteCtx,
) -> Result<Vec<MemoryEntry>> {
    let record = t.record();
    let revision = w.revision();
    let written_us = ctx.written_us(w.now_us);
    match delete_ids {
        None => w.apply(Change::DeleteRecord { record: record.clone() }),
        Some([]) => {}
        Some(ids) => w.apply(Change::DeleteEntries { ids: ids.to_vec() }),
    }
    let created = new_entries(t, items, revision, written_us, ctx);
    if !created.is_empty() {
        fail::fail_point!("memory.insert", |_| Err(write::injected("memory.insert")));
        w.apply(Change::InsertEntries { record: record.clone(), entries: created.clone() });
    }
    w.apply(Change::PutRecordVersion { record, revision, written_us, author: ctx.actor.clone() });
    Ok(created.iter().map(|e| e.to_proto(&w.project)).collect())
}

/// The entries a write of `items` creates, in order.
fn new_entries(
    t: &Target<'_>,
    items: &[MemoryItem],
    revision: i64,
    written_us: i64,
    ctx: &WriteCtx,
) -> Vec<Entry> {
    items
        .iter()
        .enumerate()
        .map(|(seq, item)| Entry {
            id: uuid::Uuid::now_v7().to_string(),
            category: t.category.to_owned(),
            branch: t.branch.to_owned(),
            key: t.key.to_owned(),
            content: item.content.clone(),
            rationale: item.rationale.clone(),
            author: ctx.actor.clone(),
            revision,
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
            created_us: written_us,
            evicted: false,
            record_revision: revision,
        })
        .collect()
}

/// A last-write-wins write of a whole record (a set or a note), as `found`: `items` is its
/// new content, `delete_ids` the entries it drops (None = all of them).
fn write_record<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    ctx: &WriteCtx,
    op: MemoryOp,
    found: Found,
    items: &[MemoryItem],
    delete_ids: Option<&[String]>,
) -> Result<(Vec<MemoryEntry>, WriteResult)> {
    let decision = lww::decide(found.current.as_ref().map(|(v, _)| *v), ctx.intent(w.now_us));
    let conflict = decision.is_conflict().then(|| found.conflict(t, decision, ctx, t.written(items, ctx)));
    if let (Decision::Rejected, Some(conflict)) = (decision, &conflict) {
        return Err(w.rejected(conflict.clone()));
    }
    let revision = w.revision();
    let mut created = Vec::new();
    let mut deleted_ids = Vec::new();
    // A record never written holds no entries, evicted or not: nothing to delete (a
    // statement less for every new key and note).
    let delete_ids =
        if found.current.is_none() && found.before.is_empty() { Some(&[][..]) } else { delete_ids };
    let entries = if decision.applies() {
        created = apply_record(w, t, items, delete_ids, ctx)?;
        // What the record holds now: the entries kept (under the new record version), then
        // those just created, in the order a read gives them.
        let mut after: Vec<MemoryEntry> = match delete_ids {
            None => Vec::new(),
            Some(ids) => found
                .before
                .iter()
                .filter(|e| !ids.contains(&e.id))
                .cloned()
                .map(|mut e| {
                    e.record_revision = revision;
                    e
                })
                .collect(),
        };
        deleted_ids = delete_ids
            .map_or_else(|| found.before.iter().map(|e| e.id.clone()).collect(), <[String]>::to_vec);
        after.extend(created.iter().cloned());
        after
    } else {
        found.before
    };
    let change = Changed { op, entries, evicted_ids: vec![], deleted_ids };
    let conflict = emit_memory(w, t, change, conflict, ctx)?.conflict;
    Ok((created, conflict::result(revision, decision, conflict, ctx.writer())))
}

/// An item operation on a current-state set (ADD_ITEM, REMOVE_ITEM): applied to the set as
/// it is (`core::set_item`), never STALE. Returns the entries created, those removed, and
/// the result.
async fn write_items<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    ctx: &WriteCtx,
    op: MemoryOp,
    items: &[MemoryItem],
    cap: i32,
) -> Result<(Vec<MemoryEntry>, Vec<MemoryEntry>, WriteResult)> {
    let found = Found::read(w, t).await?;
    let decision = set_item::decide(found.revision(), ctx.intent(w.now_us));
    let which = if op == MemoryOp::AddItem { SetItemOp::Add } else { SetItemOp::Remove };
    let held: Vec<(String, String)> =
        found.before.iter().map(|e| (e.id.clone(), e.content.clone())).collect();
    let change = set_item::change(which, &found.record, &held, items, cap).map_err(|e| match e {
        SetItemError::OverCap { .. } => Error::FailedPrecondition(e.to_string()),
        SetItemError::Empty(_) => Error::InvalidArgument(e.to_string()),
    })?;
    let (removed, kept): (Vec<MemoryEntry>, Vec<MemoryEntry>) =
        found.before.iter().cloned().partition(|e| change.remove.contains(&e.id));
    let conflict = decision.is_conflict().then(|| {
        let mut wanted = kept.clone();
        wanted.extend(t.written(&change.add, ctx).into_iter().map(|mut e| {
            e.key = String::new();
            e
        }));
        found.conflict(t, decision, ctx, wanted)
    });
    if let (Decision::Rejected, Some(conflict)) = (decision, &conflict) {
        return Err(w.rejected(conflict.clone()));
    }
    let revision = w.revision();
    let created = apply_record(w, t, &change.add, Some(&change.remove), ctx)?;
    let mut after: Vec<MemoryEntry> = kept
        .into_iter()
        .map(|mut e| {
            e.record_revision = revision;
            e
        })
        .collect();
    after.extend(created.iter().cloned());
    let changed = Changed { op, entries: after, evicted_ids: vec![], deleted_ids: change.remove };
    let conflict = emit_memory(w, t, changed, conflict, ctx)?.conflict;
    Ok((created, removed, conflict::result(revision, decision, conflict, ctx.writer())))
}

/// History: append, evicting the oldest live entries beyond the cap (the new ones too, if
/// more were appended than the cap holds). Never a conflict.
async fn append<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    ctx: &WriteCtx,
    items: &[MemoryItem],
    cap: i32,
) -> Result<PutMemoryResponse> {
    let record = t.record();
    let before = w.tx().record_entries(&record, false).await?;
    let revision = w.revision();
    let mut appended = new_entries(t, items, revision, ctx.written_us(w.now_us), ctx);
    // Live entries read oldest first (revision, then place), and the new ones are newest:
    // the oldest go, the new ones too if more were appended than the cap holds.
    let evict = rules::evictions(before.len(), appended.len(), cap);
    let old = evict.min(before.len());
    for entry in appended.iter_mut().take(evict - old) {
        entry.evicted = true;
    }
    let evicted: Vec<Entry> =
        before[..old].iter().cloned().chain(appended.iter().filter(|e| e.evicted).cloned()).collect();
    if old > 0 {
        w.apply(Change::Evict { ids: before[..old].iter().map(|e| e.id.clone()).collect() });
    }
    if !appended.is_empty() {
        fail::fail_point!("memory.insert", |_| Err(write::injected("memory.insert")));
        w.apply(Change::InsertEntries { record, entries: appended.clone() });
    }
    let evicted: Vec<MemoryEntry> = evicted
        .into_iter()
        .map(|mut e| {
            e.evicted = true;
            e.to_proto(&w.project)
        })
        .collect();
    let entries: Vec<MemoryEntry> = appended.iter().map(|e| e.to_proto(&w.project)).collect();
    let changed = Changed {
        op: MemoryOp::Append,
        entries: entries.clone(),
        evicted_ids: evicted.iter().map(|e| e.id.clone()).collect(),
        deleted_ids: vec![],
    };
    emit_memory(w, t, changed, None, ctx)?;
    let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
    Ok(PutMemoryResponse { entries, evicted, result: Some(result), removed: vec![] })
}

/// Deleting history (one entry, or a whole record's): plain, as history has no record to
/// conflict on.
async fn delete_history<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    ctx: &WriteCtx,
    only: Option<String>,
) -> Result<(Vec<String>, WriteResult)> {
    let ids: Vec<String> = match only {
        Some(id) => vec![id],
        None => w.tx().record_entries(&t.record(), true).await?.into_iter().map(|e| e.id).collect(),
    };
    let revision = w.revision();
    if !ids.is_empty() {
        w.apply(Change::DeleteEntries { ids: ids.clone() });
    }
    let changed =
        Changed { op: MemoryOp::Append, entries: vec![], evicted_ids: vec![], deleted_ids: ids.clone() };
    emit_memory(w, t, changed, None, ctx)?;
    Ok((ids, conflict::result(revision, Decision::Applied, None, ctx.writer())))
}

/// What a memory write did to a record, as its event tells it.
struct Changed {
    op: MemoryOp,
    entries: Vec<MemoryEntry>,
    evicted_ids: Vec<String>,
    deleted_ids: Vec<String>,
}

fn emit_memory<T: WriteTx>(
    w: &mut Write<T>,
    t: &Target<'_>,
    changed: Changed,
    conflict: Option<Conflict>,
    ctx: &WriteCtx,
) -> Result<baton_proto::v1::Event> {
    let mut ev = event(EventKind::MemoryChanged, "memory", &t.record(), &ctx.actor);
    ev.value = Some(baton_proto::v1::event::Value::Memory(MemoryChange {
        category: t.category.to_owned(),
        branch: t.branch.to_owned(),
        key: t.key.to_owned(),
        op: changed.op as i32,
        entries: changed.entries,
        evicted_ids: changed.evicted_ids,
        deleted_ids: changed.deleted_ids,
    }));
    ev.conflict = conflict;
    w.emit(ev)
}

/// ListMemory: one page of a project's memory in the list's order, after `after` (the
/// position a page token holds), within the reply's budget.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn list<S: Store>(
    store: &S,
    req: ListMemoryRequest,
    page_size: i64,
    after: Option<MemoryPosition>,
) -> Result<ListMemoryResponse> {
    // The head first: what is read after it is at least that new.
    let project = crate::store::project(store, req.project.clone()).await?;
    let as_of_revision = project.as_ref().map_or(0, |p| p.head_revision);
    let caps_json = project.map(|p| p.memory_caps);
    let caps =
        rules::effective_caps(&caps_json.map(|j| parse_caps(&j)).unwrap_or_default()).into_iter().collect();
    let mut record_revisions = HashMap::new();
    // The set the request names, even when it is empty: a client replacing it needs its
    // revision.
    if let (false, Some(branch)) = (req.category.is_empty() || req.category == rules::NOTE, &req.branch) {
        let record = rules::record_name(&req.category, branch, "");
        if let Some(revision) = store.record_revision(req.project.clone(), record.clone()).await? {
            record_revisions.insert(record, revision);
        }
    }
    let query = MemoryQuery {
        project: req.project.clone(),
        category: req.category.clone(),
        branch: req.branch.clone(),
        include_evicted: req.include_evicted,
        after,
        limit: page_size,
    };
    let mut page = crate::core::page::Budget::new(page_size);
    let mut entries = Vec::new();
    let mut last = None;
    let mut more = false;
    for row in store.memory(query).await? {
        let entry = row.to_proto();
        if !page.take(prost::Message::encoded_len(&entry)) {
            more = true;
            break;
        }
        if let Some(revision) = row.record_revision {
            record_revisions.insert(row.record.clone(), revision);
        }
        last = Some(MemoryPosition {
            category: row.category,
            branch: row.branch,
            key: row.key,
            revision: row.revision,
            seq: row.seq,
        });
        entries.push(entry);
    }
    let next_page_token = match last {
        Some(position) if more => crate::core::page::token(&position),
        _ => String::new(),
    };
    Ok(ListMemoryResponse { entries, caps, as_of_revision, record_revisions, next_page_token })
}
