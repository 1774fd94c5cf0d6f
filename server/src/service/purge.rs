//! Purge: overwrite a value (a leaked secret) everywhere a project stores it, in one write
//! under the project lock, with one event that does not carry the value. `core::purge`
//! masks; this file finds every place and has the store write it back.

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{
    Actor, BlobRef, BlobRefs, CheckpointState, Conflict, Event, EventKind, Maintenance as MaintenanceEvent,
    PurgeResponse,
};
use prost::Message;

use super::retention::{event, run};
use super::write::Write;
use crate::core::checkpoint::{self as cp, Compression, Header};
use crate::core::chunk::MAX_CHUNK;
use crate::core::purge::{mask_bytes, mask_str};
use crate::error::{Error, Result};
use crate::store::commit_links::CommitTx;
use crate::store::items::ItemTx;
use crate::store::maintenance::{
    BlobsRow, ChunkData, ConflictBody, EntryText, MaintenanceTx, RecordAuthor, StoredReply, TreeRow,
};
use crate::store::model::{Change, Checkpoint, CommitChange, ItemChange, LogRow, Maintenance};
use crate::store::{Store, WriteCtx, WriteTx};

/// Items read at a time.
const ITEM_PAGE: i64 = 500;

/// Overwrites `value` everywhere in `project` (or, on a dry run, only counts).
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn purge<S: Store>(
    store: &S,
    project: String,
    value: String,
    dry_run: bool,
    actor: Actor,
) -> Result<PurgeResponse> {
    let ctx = WriteCtx { actor, ..WriteCtx::default() };
    let key = project.clone();
    run(store, &key, ctx, true, move |w, ctx| {
        Box::pin(async move {
            let mut p = Purge { value: &value, out: PurgeResponse::default(), blobs_done: HashMap::new() };
            p.sessions(w).await?;
            p.memory(w).await?;
            p.checkpoints(w).await?;
            p.pending_writes(w).await?;
            p.item_logs(w).await?;
            p.commit_links(w).await?;
            p.log(w).await?;
            let mut out = p.out;
            let touched = out.records + out.events + out.conflicts + out.chunks + out.replies;
            if dry_run || touched == 0 {
                return Ok(out);
            }
            let value = MaintenanceEvent {
                purged_records: out.records,
                purged_events: out.events,
                purged_conflicts: out.conflicts,
                ..Default::default()
            };
            out.revision = w.emit(event(EventKind::Purged, &project, &ctx.actor, value))?.revision;
            w.finish(ctx, &out)?;
            Ok(out)
        })
    })
    .await
}

/// A purge in progress: the value, the counts so far, and the transcripts already rewritten
/// (by their chunk list: checkpoints share them).
struct Purge<'a> {
    value: &'a str,
    out: PurgeResponse,
    blobs_done: HashMap<String, Option<BlobRef>>,
}

impl Purge<'_> {
    fn needle(&self) -> &[u8] {
        self.value.as_bytes()
    }

    /// Sessions: their text and authors.
    async fn sessions<T: WriteTx + MaintenanceTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        for mut s in w.tx().sessions().await? {
            let mut hit =
                mask_bytes(&mut s.author, self.needle()) + mask_bytes(&mut s.head_author, self.needle());
            for text in [
                &mut s.agent_session_id,
                &mut s.host,
                &mut s.user_name,
                &mut s.cwd,
                &mut s.branch,
                &mut s.goal,
                &mut s.summary,
                &mut s.metadata,
            ] {
                if let Some(masked) = mask_str(text, self.value) {
                    *text = masked;
                    hit += 1;
                }
            }
            if hit > 0 {
                self.out.records += 1;
                w.apply(Change::Maintenance(Maintenance::MaskSession(Box::new(s))));
            }
        }
        Ok(())
    }

    /// Threads' pending writes: their values (stored as given, like payloads) and labels.
    async fn pending_writes<T: WriteTx + MaintenanceTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        for mut p in w.tx().pending_writes().await? {
            let mut hit = mask_bytes(&mut p.value, self.needle());
            for text in [&mut p.channel, &mut p.task_path, &mut p.value_type] {
                if let Some(masked) = mask_str(text, self.value) {
                    *text = masked;
                    hit += 1;
                }
            }
            if hit > 0 {
                self.out.records += 1;
                w.apply(Change::Maintenance(Maintenance::MaskWrite(Box::new(p))));
            }
        }
        Ok(())
    }

    /// Item logs: their summaries and authors, and their items' values (stored as given).
    async fn item_logs<T: WriteTx + MaintenanceTx + ItemTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        for mut log in w.tx().all_item_logs().await? {
            let mut hit = mask_bytes(&mut log.author, self.needle());
            if let Some(masked) = log.summary.as_deref().and_then(|s| mask_str(s, self.value)) {
                log.summary = Some(masked);
                hit += 1;
            }
            if hit > 0 {
                self.out.records += 1;
                w.apply(Change::Items(ItemChange::PutLog(Box::new(log))));
            }
        }
        let (mut key, mut seq) = (String::new(), 0);
        loop {
            let page = w.tx().items_after(&key, seq, ITEM_PAGE).await?;
            let Some(last) = page.last() else { return Ok(()) };
            (key, seq) = (last.log_key.clone(), last.seq);
            for mut item in page {
                let hit = mask_bytes(&mut item.value, self.needle())
                    + usize::from(mask_str(&item.content_type, self.value).is_some());
                if hit > 0 {
                    item.content_type = mask_str(&item.content_type, self.value).unwrap_or(item.content_type);
                    self.out.records += 1;
                    w.apply(Change::Items(ItemChange::MaskItem(Box::new(item))));
                }
            }
        }
    }

    /// Commit links: their texts (subject, prompt, task, branch, paths) and authors; the
    /// fingerprints are hashes.
    async fn commit_links<T: WriteTx + CommitTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        let mut after = (String::new(), String::new());
        loop {
            let page = w.tx().commit_links_after(after.clone(), ITEM_PAGE).await?;
            let Some(last) = page.last() else { return Ok(()) };
            after = (last.commit_id.clone(), last.session_id.clone());
            for mut link in page {
                let mut hit = mask_bytes(&mut link.author, self.needle());
                for text in
                    [&mut link.subject, &mut link.prompt, &mut link.task, &mut link.branch, &mut link.files]
                {
                    if let Some(masked) = mask_str(text, self.value) {
                        *text = masked;
                        hit += 1;
                    }
                }
                if hit > 0 {
                    self.out.records += 1;
                    w.apply(Change::Commits(CommitChange::Put(vec![(link, Vec::new())])));
                }
            }
        }
    }

    /// Memory entries, and the authors of memory records.
    async fn memory<T: WriteTx + MaintenanceTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        for EntryText { id, content, rationale, mut author } in w.tx().entry_texts().await? {
            let (c, r) = (mask_str(&content, self.value), mask_str(&rationale, self.value));
            if c.is_none() && r.is_none() && mask_bytes(&mut author, self.needle()) == 0 {
                continue;
            }
            self.out.records += 1;
            let (content, rationale) = (c.unwrap_or(content), r.unwrap_or(rationale));
            w.apply(Change::Maintenance(Maintenance::MaskEntry { id, content, rationale, author }));
        }
        for RecordAuthor { record, mut author } in w.tx().record_authors().await? {
            if mask_bytes(&mut author, self.needle()) > 0 {
                w.apply(Change::Maintenance(Maintenance::SetRecordAuthor { record, author }));
            }
        }
        Ok(())
    }

    /// Checkpoints with their transcripts, then the chunks that held the value.
    async fn checkpoints<T: WriteTx + MaintenanceTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        let mut replaced: HashSet<String> = HashSet::new();
        let mut new_blobs: HashMap<String, Vec<u8>> = HashMap::new();
        for TreeRow { id, .. } in w.tx().checkpoint_tree().await? {
            let Some(row) = w.tx().checkpoint(&id).await? else { continue };
            if let Some(masked) = self.checkpoint(w, row, &mut replaced).await? {
                self.out.records += 1;
                new_blobs.insert(masked.id.clone(), masked.blobs.clone());
                w.apply(Change::Maintenance(Maintenance::MaskCheckpoint(Box::new(masked))));
            }
        }
        self.out.chunks = i64::try_from(replaced.len()).unwrap_or(i64::MAX);
        // Old chunks that held the value (in whole or in part) and nothing references now.
        let mut gone: HashSet<String> = HashSet::new();
        if !replaced.is_empty() {
            let mut still = HashSet::new();
            for BlobsRow { id, blobs } in w.tx().checkpoint_blobs().await? {
                let blobs = new_blobs.get(&id).unwrap_or(&blobs);
                let refs = crate::core::blobs::decode(blobs)
                    .map_err(|e| Error::internal(format!("checkpoint {id} blob refs do not decode: {e}")))?;
                still.extend(refs.into_iter().flat_map(|b| b.chunks));
            }
            gone.extend(replaced.into_iter().filter(|d| !still.contains(d)));
        }
        // Chunks that hold it whole.
        for ChunkData { digest, data: packed } in w.tx().chunks().await? {
            if gone.contains(&digest) {
                continue;
            }
            let Ok(mut data) = zstd::bulk::decompress(&packed, MAX_CHUNK) else { continue };
            if mask_bytes(&mut data, self.needle()) > 0 {
                gone.insert(digest);
                self.out.chunks += 1;
            }
        }
        if !gone.is_empty() {
            let mut digests: Vec<String> = gone.into_iter().collect();
            digests.sort();
            w.apply(Change::Maintenance(Maintenance::DeleteChunks { digests }));
        }
        Ok(())
    }

    /// Masks one checkpoint (and its transcripts); `Some` when it changed. A checkpoint that
    /// verified before gets new digests over its new content; a corrupt one stays corrupt.
    async fn checkpoint<T: WriteTx + MaintenanceTx>(
        &mut self,
        w: &mut Write<T>,
        mut row: Checkpoint,
        replaced: &mut HashSet<String>,
    ) -> Result<Option<Checkpoint>> {
        let was_valid = row.verified(false).is_ok();
        let state_was_valid = row.verified_state().is_ok();
        let compression = Compression::parse(&row.compression).unwrap_or(Compression::None);
        let Ok((mut state, mut payload)) = cp::unpack(&row.stored(), compression) else {
            // Undecodable bytes: mask what is there as stored.
            let hit = mask_bytes(&mut row.state, self.needle()) + mask_bytes(&mut row.payload, self.needle());
            return Ok((hit > 0).then_some(row));
        };
        let mut changed = mask_bytes(&mut state, self.needle()) > 0;
        if changed && CheckpointState::decode(state.as_slice()).is_err() {
            return Err(refused(&format!("checkpoint {}", row.id)));
        }
        changed |= mask_bytes(&mut payload, self.needle()) > 0;
        if let Some(reason) = mask_str(&row.reason, self.value) {
            row.reason = reason;
            changed = true;
        }
        changed |= mask_bytes(&mut row.author, self.needle()) > 0;
        let mut plain_blobs = crate::core::blobs::unpack(&row.blobs)
            .map_err(|_| refused(&format!("checkpoint {} transcripts", row.id)))?
            .into_owned();
        if !plain_blobs.is_empty() {
            let mut masked = mask_bytes(&mut plain_blobs, self.needle()) > 0;
            let mut refs = BlobRefs::decode(plain_blobs.as_slice())
                .map_err(|_| refused(&format!("checkpoint {} transcripts", row.id)))?;
            let mut rewrote = false;
            for blob in &mut refs.blobs {
                if let Some(new) = self.blob(w, blob, replaced).await? {
                    blob.digest = new.digest;
                    blob.chunks = new.chunks;
                    rewrote = true;
                }
            }
            if rewrote {
                plain_blobs = refs.encode_to_vec();
                masked = true;
            }
            if masked {
                row.blobs = crate::core::blobs::pack(plain_blobs.clone());
                changed = true;
            }
        }
        if let Some(text) = &row.metadata {
            let mut hit = 0;
            let masked = crate::core::thread::metadata("metadata", text, |s| {
                if let Some(m) = mask_str(s, self.value) {
                    *s = m;
                    hit += 1;
                }
            });
            if hit > 0 {
                let masked = masked.map_err(|_| refused(&format!("checkpoint {} metadata", row.id)))?;
                row.metadata = Some(masked.json);
                row.run_id = masked.run_id;
                changed = true;
            }
        }
        if !changed {
            return Ok(None);
        }
        let header = Header {
            session_id: &row.session_id,
            kind: row.kind,
            reason: &row.reason,
            payload_content_type: &row.payload_content_type,
            blobs: std::borrow::Cow::Borrowed(&plain_blobs),
            thread: cp::ThreadPart::of(row.ordered_key.as_deref(), row.metadata.as_deref()),
        };
        if was_valid {
            row.digest = cp::digest(&header, &state, &payload);
        }
        if state_was_valid {
            row.state_digest = Some(cp::state_digest(&header, &state));
        }
        row.state = pack(&state, compression)?;
        row.payload = pack(&payload, compression)?;
        Ok(Some(row))
    }

    /// Masks a transcript across its chunks (the value may straddle a chunk boundary): the
    /// same chunk sizes, new content-addressed chunks. `None` when it does not contain the
    /// value (or a chunk is missing: nothing to rewrite it from).
    async fn blob<T: WriteTx + MaintenanceTx>(
        &mut self,
        w: &mut Write<T>,
        blob: &BlobRef,
        replaced: &mut HashSet<String>,
    ) -> Result<Option<BlobRef>> {
        let key = blob.chunks.join(",");
        if let Some(known) = self.blobs_done.get(&key) {
            return Ok(known.clone());
        }
        let mut whole = Vec::new();
        let mut sizes = Vec::with_capacity(blob.chunks.len());
        for digest in &blob.chunks {
            let data = w
                .tx()
                .chunk(digest)
                .await?
                .and_then(|packed| zstd::bulk::decompress(&packed, MAX_CHUNK).ok());
            let Some(data) = data else {
                self.blobs_done.insert(key, None);
                return Ok(None);
            };
            sizes.push(data.len());
            whole.extend_from_slice(&data);
        }
        if mask_bytes(&mut whole, self.needle()) == 0 {
            self.blobs_done.insert(key, None);
            return Ok(None);
        }
        let now = crate::store::rows::us(&prost_types::Timestamp::from(std::time::SystemTime::now()));
        let mut chunks = Vec::with_capacity(sizes.len());
        let mut at = 0;
        for (old, size) in blob.chunks.iter().zip(sizes) {
            let part = &whole[at..at + size];
            at += size;
            let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(part));
            if &digest != old {
                replaced.insert(old.clone());
                let data = zstd::bulk::compress(part, cp::ZSTD_LEVEL)
                    .map_err(|e| Error::internal(format!("compressing a chunk: {e}")))?;
                let size_bytes = i64::try_from(size).unwrap_or(i64::MAX);
                let put = Maintenance::PutChunk { digest: digest.clone(), data, size_bytes, created_us: now };
                w.apply(Change::Maintenance(put));
            }
            chunks.push(digest);
        }
        let new = BlobRef {
            digest: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&whole)),
            chunks,
            ..blob.clone()
        };
        self.blobs_done.insert(key, Some(new.clone()));
        Ok(Some(new))
    }

    /// The log, conflicts and stored replies: masked in place; each must still decode.
    async fn log<T: WriteTx + MaintenanceTx>(&mut self, w: &mut Write<T>) -> Result<()> {
        for LogRow { revision, body } in w.tx().event_bodies().await? {
            let mut plain = crate::core::packed::unpack(&body, crate::core::packed::MAX_RECORD_BYTES)
                .map_err(|_| refused(&format!("event {revision}")))?
                .into_owned();
            if mask_bytes(&mut plain, self.needle()) == 0 {
                continue;
            }
            Event::decode(plain.as_slice()).map_err(|_| refused(&format!("event {revision}")))?;
            self.out.events += 1;
            let body = crate::core::packed::pack(plain);
            w.apply(Change::Maintenance(Maintenance::SetEventBody { revision, body }));
        }
        for ConflictBody { id, mut body } in w.tx().conflict_bodies().await? {
            if mask_bytes(&mut body, self.needle()) == 0 {
                continue;
            }
            Conflict::decode(body.as_slice()).map_err(|_| refused(&format!("conflict {id}")))?;
            self.out.conflicts += 1;
            w.apply(Change::Maintenance(Maintenance::SetConflictBody { id, body }));
        }
        for StoredReply { request_id, mut reply } in w.tx().replies().await? {
            if mask_bytes(&mut reply, self.needle()) > 0 {
                self.out.replies += 1;
                w.apply(Change::Maintenance(Maintenance::SetReply { request_id, reply }));
            }
        }
        Ok(())
    }
}

/// Bytes compressed as the checkpoint stores them.
fn pack(bytes: &[u8], compression: Compression) -> Result<Vec<u8>> {
    match compression {
        Compression::Zstd if !bytes.is_empty() => zstd::bulk::compress(bytes, cp::ZSTD_LEVEL)
            .map_err(|e| Error::internal(format!("compressing a checkpoint: {e}"))),
        _ => Ok(bytes.to_vec()),
    }
}

fn refused(what: &str) -> Error {
    Error::FailedPrecondition(format!(
        "masking the value would break the encoding of {what}; nothing was changed. Purge a longer, more specific \
         value"
    ))
}
