// Purge: overwrite a value (a leaked secret) everywhere a project stores it, in one write
// under the project lock, with one event that does not carry the value.

use baton_proto::v1::{BlobRef, CheckpointState, PurgeResponse};

use crate::core::checkpoint::{self as cp, Compression, Header};
use crate::core::purge::{mask_bytes, mask_str};

/// A transcript blob rewritten: new chunk digests and whole-blob digest.
struct RewrittenBlob {
    digest: String,
    chunks: Vec<String>,
}

impl Backend {
    pub(crate) async fn do_purge(&self, project: String, value: String, dry_run: bool, actor: Actor) -> Result<PurgeResponse> {
        if head_revision(&mut *self.pool.acquire().await?, &project).await? == 0 {
            return Err(Error::NotFound(format!("project: no project {project:?}")));
        }
        let ctx = WriteCtx { actor, ..WriteCtx::default() };
        let mut w = match self.begin_memory(&project, &ctx).await? {
            Begun::Fresh(w) => w,
            Begun::Replay => return Err(Error::internal("maintenance write without request_id replayed")),
        };
        let needle = value.as_bytes();
        let mut out = PurgeResponse::default();

        // Sessions: their text columns and authors.
        type SessionText = (String, String, String, String, String, String, String, String, String, Vec<u8>, Vec<u8>);
        let rows: Vec<SessionText> = sqlx::query_as(
            "SELECT id, agent_session_id, host, user_name, cwd, branch, goal, summary, metadata, author, head_author \
             FROM sessions WHERE project = $1",
        )
        .bind(&project)
        .fetch_all(&mut *w.tx)
        .await?;
        for (id, agent_session_id, host, user, cwd, branch, goal, summary, metadata, mut author, mut head_author) in rows {
            let texts = [agent_session_id, host, user, cwd, branch, goal, summary, metadata];
            let masked: Vec<Option<String>> = texts.iter().map(|t| mask_str(t, &value)).collect();
            let bytes_hit = mask_bytes(&mut author, needle) + mask_bytes(&mut head_author, needle);
            if masked.iter().all(Option::is_none) && bytes_hit == 0 {
                continue;
            }
            out.records += 1;
            let new: Vec<String> = texts.into_iter().zip(masked).map(|(t, m)| m.unwrap_or(t)).collect();
            sqlx::query(
                "UPDATE sessions SET agent_session_id = $2, host = $3, user_name = $4, cwd = $5, branch = $6, goal = $7, \
                 summary = $8, metadata = $9, author = $10, head_author = $11 WHERE id = $1",
            )
            .bind(&id)
            .bind(&new[0])
            .bind(&new[1])
            .bind(&new[2])
            .bind(&new[3])
            .bind(&new[4])
            .bind(&new[5])
            .bind(&new[6])
            .bind(&new[7])
            .bind(&author)
            .bind(&head_author)
            .execute(&mut *w.tx)
            .await?;
        }

        // Memory entries.
        let rows: Vec<(String, String, String, Vec<u8>)> =
            sqlx::query_as("SELECT id, content, rationale, author FROM memory WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (id, content, rationale, mut author) in rows {
            let (c, r) = (mask_str(&content, &value), mask_str(&rationale, &value));
            if c.is_none() && r.is_none() && mask_bytes(&mut author, needle) == 0 {
                continue;
            }
            out.records += 1;
            sqlx::query("UPDATE memory SET content = $2, rationale = $3, author = $4 WHERE id = $1")
                .bind(&id)
                .bind(c.unwrap_or(content))
                .bind(r.unwrap_or(rationale))
                .bind(&author)
                .execute(&mut *w.tx)
                .await?;
        }
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT record, author FROM records WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (record, mut author) in rows {
            if mask_bytes(&mut author, needle) > 0 {
                sqlx::query("UPDATE records SET author = $3 WHERE project = $1 AND record = $2").bind(&project).bind(&record).bind(&author).execute(&mut *w.tx).await?;
            }
        }

        // Checkpoints, with their transcripts.
        let mut blobs_done: HashMap<String, Option<RewrittenBlob>> = HashMap::new();
        let mut replaced_chunks: HashSet<String> = HashSet::new();
        let ids: Vec<(String,)> = sqlx::query_as("SELECT id FROM checkpoints WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (id,) in ids {
            let row: CheckpointRow = sqlx::query_as("SELECT * FROM checkpoints WHERE id = $1").bind(&id).fetch_one(&mut *w.tx).await?;
            if self.purge_checkpoint(&mut w.tx, row, &value, &mut blobs_done, &mut replaced_chunks).await? {
                out.records += 1;
            }
        }
        out.chunks = replaced_chunks.len() as i64;
        // Old chunks that held the value (in whole or in part) and nothing references now.
        if !replaced_chunks.is_empty() {
            let still = referenced_chunks(&mut w.tx, &project).await?;
            for digest in replaced_chunks.iter().filter(|d| !still.contains(*d)) {
                sqlx::query("DELETE FROM chunks WHERE project = $1 AND digest = $2").bind(&project).bind(digest).execute(&mut *w.tx).await?;
            }
        }
        // Unreferenced chunks that hold it whole.
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT digest, data FROM chunks WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (digest, packed) in rows {
            let Ok(mut data) = zstd::stream::decode_all(packed.as_slice()) else { continue };
            if mask_bytes(&mut data, needle) > 0 {
                sqlx::query("DELETE FROM chunks WHERE project = $1 AND digest = $2").bind(&project).bind(&digest).execute(&mut *w.tx).await?;
                out.chunks += 1;
            }
        }

        // The log, conflicts and stored replies: masked in place; each must still decode.
        let rows: Vec<(i64, Vec<u8>)> = sqlx::query_as("SELECT revision, body FROM events WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (revision, mut body) in rows {
            if mask_bytes(&mut body, needle) == 0 {
                continue;
            }
            Event::decode(body.as_slice()).map_err(|_| purge_refused(&format!("event {revision}")))?;
            out.events += 1;
            sqlx::query("UPDATE events SET body = $3 WHERE project = $1 AND revision = $2").bind(&project).bind(revision).bind(&body).execute(&mut *w.tx).await?;
        }
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT id, body FROM conflicts WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (id, mut body) in rows {
            if mask_bytes(&mut body, needle) == 0 {
                continue;
            }
            Conflict::decode(body.as_slice()).map_err(|_| purge_refused(&format!("conflict {id}")))?;
            out.conflicts += 1;
            sqlx::query("UPDATE conflicts SET body = $2 WHERE id = $1").bind(&id).bind(&body).execute(&mut *w.tx).await?;
        }
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT request_id, reply FROM requests WHERE project = $1").bind(&project).fetch_all(&mut *w.tx).await?;
        for (request_id, mut reply) in rows {
            if mask_bytes(&mut reply, needle) > 0 {
                out.replies += 1;
                sqlx::query("UPDATE requests SET reply = $3 WHERE project = $1 AND request_id = $2").bind(&project).bind(&request_id).bind(&reply).execute(&mut *w.tx).await?;
            }
        }

        let touched = out.records + out.events + out.conflicts + out.chunks + out.replies;
        if dry_run || touched == 0 {
            return Ok(out); // dropped: rolled back, no revision used
        }
        let event = w
            .emit(Event {
                kind: EventKind::Purged as i32,
                entity: "project".into(),
                entity_id: project.clone(),
                actor: Some(ctx.actor.clone()),
                value: Some(baton_proto::v1::event::Value::Maintenance(Maintenance {
                    purged_records: out.records,
                    purged_events: out.events,
                    purged_conflicts: out.conflicts,
                    ..Default::default()
                })),
                ..Default::default()
            })
            .await?;
        out.revision = event.revision;
        w.finish(self, &ctx, &out).await?;
        Ok(out)
    }

    /// Masks one checkpoint (and its transcripts); true when it changed. A checkpoint that
    /// verified before gets a new digest over its new content; a corrupt one stays corrupt.
    async fn purge_checkpoint(
        &self,
        tx: &mut Tx,
        row: CheckpointRow,
        value: &str,
        blobs_done: &mut HashMap<String, Option<RewrittenBlob>>,
        replaced_chunks: &mut HashSet<String>,
    ) -> Result<bool> {
        let needle = value.as_bytes();
        let was_valid =
            cp::decode(&header(&row, &row.reason, &row.blobs), &row.state, &row.payload, &row.compression, &row.digest).is_ok();
        let state_was_valid = row.verified_state().is_ok();
        let compression = Compression::parse(&row.compression).unwrap_or(Compression::None);
        let (Ok(mut state), Ok(mut payload)) = (cp::decompress(&row.state, compression), cp::decompress(&row.payload, compression)) else {
            // Undecodable bytes: mask what is there as stored.
            let (mut state, mut payload) = (row.state.clone(), row.payload.clone());
            if mask_bytes(&mut state, needle) + mask_bytes(&mut payload, needle) == 0 {
                return Ok(false);
            }
            sqlx::query("UPDATE checkpoints SET state = $2, payload = $3 WHERE id = $1").bind(&row.id).bind(&state).bind(&payload).execute(&mut **tx).await?;
            return Ok(true);
        };
        let mut changed = mask_bytes(&mut state, needle) > 0;
        if changed && CheckpointState::decode(state.as_slice()).is_err() {
            return Err(purge_refused(&format!("checkpoint {}", row.id)));
        }
        changed |= mask_bytes(&mut payload, needle) > 0;
        let reason = mask_str(&row.reason, value);
        changed |= reason.is_some();
        let mut author = row.author.clone();
        changed |= mask_bytes(&mut author, needle) > 0;

        let mut blobs = row.blobs.clone();
        if !blobs.is_empty() {
            changed |= mask_bytes(&mut blobs, needle) > 0;
            let mut refs = BlobRefs::decode(blobs.as_slice()).map_err(|_| purge_refused(&format!("checkpoint {} transcripts", row.id)))?;
            let mut rewrote = false;
            for blob in &mut refs.blobs {
                if let Some(new) = self.purge_blob(tx, &row.project, blob, needle, blobs_done, replaced_chunks).await? {
                    blob.digest = new.digest.clone();
                    blob.chunks = new.chunks.clone();
                    rewrote = true;
                }
            }
            if rewrote {
                blobs = refs.encode_to_vec();
                changed = true;
            }
        }
        if !changed {
            return Ok(false);
        }
        let reason = reason.unwrap_or_else(|| row.reason.clone());
        let digest = if was_valid { cp::digest(&header(&row, &reason, &blobs), &state, &payload) } else { row.digest.clone() };
        let state_digest = if state_was_valid { Some(cp::state_digest(&header(&row, &reason, &blobs), &state)) } else { row.state_digest.clone() };
        let pack = |bytes: &[u8]| -> Result<Vec<u8>> {
            match compression {
                Compression::Zstd if !bytes.is_empty() => {
                    zstd::bulk::compress(bytes, cp::ZSTD_LEVEL).map_err(|e| Error::internal(format!("compressing a checkpoint: {e}")))
                }
                _ => Ok(bytes.to_vec()),
            }
        };
        sqlx::query("UPDATE checkpoints SET reason = $2, state = $3, payload = $4, digest = $5, blobs = $6, author = $7, state_digest = $8 WHERE id = $1")
            .bind(&row.id)
            .bind(&reason)
            .bind(pack(&state)?)
            .bind(pack(&payload)?)
            .bind(&digest)
            .bind(&blobs)
            .bind(&author)
            .bind(&state_digest)
            .execute(&mut **tx)
            .await?;
        Ok(true)
    }

    /// Masks a transcript across its chunks (the value may straddle a chunk boundary):
    /// the same chunk sizes, new content-addressed chunks. `None` when it does not contain
    /// the value (or a chunk is missing: nothing to rewrite it from).
    async fn purge_blob(
        &self,
        tx: &mut Tx,
        project: &str,
        blob: &BlobRef,
        needle: &[u8],
        done: &mut HashMap<String, Option<RewrittenBlob>>,
        replaced_chunks: &mut HashSet<String>,
    ) -> Result<Option<RewrittenBlob>> {
        let key = blob.chunks.join(",");
        if let Some(known) = done.get(&key) {
            return Ok(known.as_ref().map(|b| RewrittenBlob { digest: b.digest.clone(), chunks: b.chunks.clone() }));
        }
        let mut whole = Vec::new();
        let mut sizes = Vec::with_capacity(blob.chunks.len());
        for digest in &blob.chunks {
            let row: Option<(Vec<u8>,)> = sqlx::query_as("SELECT data FROM chunks WHERE project = $1 AND digest = $2").bind(project).bind(digest).fetch_optional(&mut **tx).await?;
            let Some(data) = row.and_then(|(packed,)| zstd::stream::decode_all(packed.as_slice()).ok()) else {
                done.insert(key, None);
                return Ok(None);
            };
            sizes.push(data.len());
            whole.extend_from_slice(&data);
        }
        if mask_bytes(&mut whole, needle) == 0 {
            done.insert(key, None);
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
                replaced_chunks.insert(old.clone());
                let packed = zstd::bulk::compress(part, 3).map_err(|e| Error::internal(format!("compressing a chunk: {e}")))?;
                sqlx::query(
                    "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (project, digest) DO NOTHING",
                )
                .bind(project)
                .bind(&digest)
                .bind(packed)
                .bind(size as i64)
                .bind(now)
                .execute(&mut **tx)
                .await?;
            }
            chunks.push(digest);
        }
        let rewritten = RewrittenBlob { digest: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&whole)), chunks };
        done.insert(key, Some(RewrittenBlob { digest: rewritten.digest.clone(), chunks: rewritten.chunks.clone() }));
        Ok(Some(rewritten))
    }
}

fn header<'a>(row: &'a CheckpointRow, reason: &'a str, blobs: &'a [u8]) -> Header<'a> {
    Header { session_id: &row.session_id, kind: row.kind, reason, payload_content_type: &row.payload_content_type, blobs }
}

fn purge_refused(what: &str) -> Error {
    Error::FailedPrecondition(format!(
        "masking the value would break the encoding of {what}; nothing was changed. Purge a longer, more specific value"
    ))
}

/// Every chunk digest some checkpoint of the project references.
async fn referenced_chunks(conn: &mut Conn, project: &str) -> Result<HashSet<String>> {
    let rows: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT id, blobs FROM checkpoints WHERE project = $1 AND length(blobs) > 0")
        .bind(project)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = HashSet::new();
    for (id, blobs) in rows {
        let refs = BlobRefs::decode(blobs.as_slice()).map_err(|e| Error::internal(format!("checkpoint {id} blob refs do not decode: {e}")))?;
        out.extend(refs.blobs.into_iter().flat_map(|b| b.chunks));
    }
    Ok(out)
}
