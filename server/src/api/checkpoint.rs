//! `CheckpointService`.

use baton_proto::v1::checkpoint_service_server::CheckpointService;
use baton_proto::v1::{
    BlobRef, CheckpointKind, CheckpointState, Chunk, CreateCheckpointRequest, CreateCheckpointResponse,
    GetCheckpointRequest, GetCheckpointResponse, GetChunksRequest, GetChunksResponse, ListCheckpointsRequest,
    ListCheckpointsResponse, MissingChunksRequest, MissingChunksResponse, PutChunksRequest,
    PutChunksResponse,
};
use prost::Message;
use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::checkpoint::{self, Header};
use crate::core::redact::Redactor;
use crate::core::validate::{self, limits};
use crate::error::Error;
use crate::store::{Entity, NewCheckpoint, Store, model};
use std::collections::HashMap;

/// Size rules for the structured state: bounded lists of bounded strings.
pub(crate) fn check_state(state: &CheckpointState) -> Result<(), Error> {
    let lists: [(&str, usize); 10] = [
        ("state.active_tasks", state.active_tasks.len()),
        ("state.open_questions", state.open_questions.len()),
        ("state.blockers", state.blockers.len()),
        ("state.recent_changes", state.recent_changes.len()),
        ("state.decisions", state.decisions.len()),
        ("state.files_created", state.files_created.len()),
        ("state.files_modified", state.files_modified.len()),
        ("state.files_deleted", state.files_deleted.len()),
        ("state.tool_history", state.tool_history.len()),
        ("state.errors", state.errors.len()),
    ];
    for (field, n) in lists {
        validate::count(field, n, limits::ITEMS)?;
    }
    if !(0..=100).contains(&state.progress) {
        return Err(
            validate::invalid("state.progress", format!("{} is outside 0..=100", state.progress)).into()
        );
    }
    for t in &state.active_tasks {
        if !(0..=100).contains(&t.progress) {
            return Err(validate::invalid(
                "state.active_tasks.progress",
                format!("{} is outside 0..=100", t.progress),
            )
            .into());
        }
    }
    if state.tool_count < 0 {
        return Err(validate::invalid("state.tool_count", "must not be negative").into());
    }
    validate::single_line("state.git_head", &state.git_head, limits::SHORT)?;
    Ok(())
}

/// Chunk limits: per chunk, per request.
use crate::core::chunk::MAX_CHUNK;
pub const MAX_CHUNKS_BYTES: usize = 8 * 1024 * 1024;
const MAX_CHUNKS_PER_CALL: usize = 64;

/// Chunks a request uploads, checked (count, sizes, digests) and compressed as stored.
pub(crate) fn packed_chunks(
    field: &str,
    chunks: &[baton_proto::v1::Chunk],
) -> Result<Vec<model::Chunk>, Error> {
    if chunks.len() > MAX_CHUNKS_PER_CALL {
        return Err(Error::ResourceExhausted(format!(
            "{field}: {} in one call; the limit is {MAX_CHUNKS_PER_CALL}",
            chunks.len()
        )));
    }
    let total: usize = chunks.iter().map(|c| c.data.len()).sum();
    if total > MAX_CHUNKS_BYTES {
        return Err(Error::ResourceExhausted(format!(
            "{field}: {total} bytes in one call; the limit is {MAX_CHUNKS_BYTES}"
        )));
    }
    let mut stored = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        check_digest(&format!("{field}[{i}].digest"), &c.digest)?;
        if c.data.len() > MAX_CHUNK {
            return Err(Error::ResourceExhausted(format!(
                "{field}[{i}]: {} bytes; the limit is {MAX_CHUNK} per chunk",
                c.data.len()
            )));
        }
        if hex::encode(Sha256::digest(&c.data)) != c.digest {
            return Err(validate::invalid(
                format!("{field}[{i}].digest"),
                "does not match the sha256 of its data",
            )
            .into());
        }
        let packed = crate::core::chunk::pack(&c.data)
            .map_err(|e| Error::internal(format!("compressing a chunk: {e}")))?;
        let size_bytes = i64::try_from(c.data.len()).unwrap_or(i64::MAX);
        stored.push(model::Chunk { digest: c.digest.clone(), data: packed, size_bytes });
    }
    Ok(stored)
}
const MAX_DIGESTS: usize = 10_000;

fn check_digest(field: &str, digest: &str) -> Result<(), Error> {
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(validate::invalid(field, format!("{digest:?} is not a sha256 in lower-case hex")).into());
    }
    Ok(())
}

/// Blob references of an agent's checkpoint (its transcript and the files beside it).
pub const MAX_BLOBS: usize = 16;
/// Of a thread's checkpoint: one per large channel value.
pub const MAX_THREAD_BLOBS: usize = 1024;

pub(crate) fn check_blobs(blobs: &[BlobRef], most: usize) -> Result<Vec<String>, Error> {
    validate::count("blobs", blobs.len(), most)?;
    let mut chunks = Vec::new();
    for (i, b) in blobs.iter().enumerate() {
        check_digest(&format!("blobs[{i}].digest"), &b.digest)?;
        validate::count(&format!("blobs[{i}].chunks"), b.chunks.len(), 100_000)?;
        for (j, c) in b.chunks.iter().enumerate() {
            check_digest(&format!("blobs[{i}].chunks[{j}]"), c)?;
        }
        // A remote number a client may allocate by: never more than its chunks can hold.
        let most = i64::try_from(b.chunks.len())
            .unwrap_or(i64::MAX)
            .saturating_mul(i64::try_from(MAX_CHUNK).unwrap_or(i64::MAX));
        if !(0..=most).contains(&b.size_bytes) {
            return Err(validate::invalid(
                format!("blobs[{i}].size_bytes"),
                format!(
                    "{} is outside 0..={most} ({} chunks of at most {MAX_CHUNK} bytes)",
                    b.size_bytes,
                    b.chunks.len()
                ),
            )
            .into());
        }
        validate::single_line(&format!("blobs[{i}].role"), &b.role, 64)?;
        validate::single_line(&format!("blobs[{i}].content_type"), &b.content_type, 256)?;
        validate::agent_session_id(&format!("blobs[{i}].agent_session_id"), &b.agent_session_id)?;
        validate::single_line(&format!("blobs[{i}].cwd"), &b.cwd, limits::PATH)?;
        chunks.extend(b.chunks.iter().cloned());
    }
    chunks.sort();
    chunks.dedup();
    Ok(chunks)
}

#[tonic::async_trait]
impl<S: Store> CheckpointService for Api<S> {
    async fn create_checkpoint(
        &self,
        request: Request<CreateCheckpointRequest>,
    ) -> Result<Response<CreateCheckpointResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Write, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        let mut req = request.into_inner();
        let session_id = auth.id;
        let id = validate::new_id("checkpoint_id", &req.checkpoint_id)?;
        if let Some(parent) = &mut req.parent_id
            && !parent.is_empty()
        {
            *parent = validate::uuid("parent_id", parent)?.to_string();
        }
        validate::enum_value::<CheckpointKind>("kind", req.kind, false)?;
        validate::optional("reason", &req.reason, limits::TEXT)?;
        validate::single_line("payload_content_type", &req.payload_content_type, 256)?;
        let state = req.state.take().unwrap_or_default();
        check_state(&state)?;
        let size = state.encoded_len() + req.payload.len();
        if size > self.limits.max_checkpoint_bytes {
            return Err(Error::ResourceExhausted(format!(
                "state + payload: {size} bytes is over this server's checkpoint limit of {} bytes \
                 (--max-checkpoint-bytes); store large blobs elsewhere and reference them",
                self.limits.max_checkpoint_bytes
            ))
            .into());
        }
        let mut hash_view = req.clone();
        hash_view.state = Some(state.clone());
        without_clock(&mut hash_view.write);
        let mut state = state;
        let mut redactor = Redactor::default();
        redactor.field(&mut req.reason);
        redactor.fields(crate::core::redact::state_texts(&mut state));
        let ctx = write_ctx("CreateCheckpoint", &hash_view, req.write.as_ref(), redactor.count, &auth.who)?;
        let chunk_digests = check_blobs(&req.blobs, MAX_BLOBS)?;
        let plain_blobs = crate::core::blobs::encode(&req.blobs);
        let session = session_id.to_string();
        let header = Header {
            session_id: &session,
            kind: req.kind,
            reason: &req.reason,
            payload_content_type: &req.payload_content_type,
            blobs: std::borrow::Cow::Borrowed(&plain_blobs),
            thread: None,
        };
        let content = checkpoint::encode(&header, &state, &req.payload)
            .map_err(|e| Error::internal(format!("compressing a checkpoint: {e}")))?;
        let state_tool_count = state.tool_count;
        req.payload = Vec::new();
        let blobs = crate::core::blobs::pack(plain_blobs);
        let new =
            NewCheckpoint { request: req, session_id, id, content, state_tool_count, blobs, chunk_digests };
        Ok(Response::new(crate::service::checkpoint::create(&self.store, ctx, new, auth.within).await?))
    }

    async fn get_checkpoint(
        &self,
        request: Request<GetCheckpointRequest>,
    ) -> Result<Response<GetCheckpointResponse>, Status> {
        let auth = self
            .auth
            .check_entity(
                &request,
                Need::Read,
                Entity::Checkpoint,
                "checkpoint_id",
                &request.get_ref().checkpoint_id,
            )
            .await?;
        let include_payload = request.get_ref().include_payload;
        Ok(Response::new(
            crate::service::checkpoint::get(&self.store, auth.id, include_payload, auth.within).await?,
        ))
    }

    async fn list_checkpoints(
        &self,
        request: Request<ListCheckpointsRequest>,
    ) -> Result<Response<ListCheckpointsResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Read, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        let req = request.get_ref();
        let page_size = validate::page_size("page_size", req.page_size, 100, 1000)?;
        let after = if req.page_token.is_empty() {
            None
        } else {
            let id: String = crate::core::page::position("page_token", &req.page_token)?;
            Some(validate::uuid("page_token", &id)?.to_string())
        };
        Ok(Response::new(
            crate::service::checkpoint::list(
                &self.store,
                auth.id,
                req.include_state,
                page_size,
                after,
                auth.within,
            )
            .await?,
        ))
    }

    async fn missing_chunks(
        &self,
        request: Request<MissingChunksRequest>,
    ) -> Result<Response<MissingChunksResponse>, Status> {
        self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        validate::count("digests", req.digests.len(), MAX_DIGESTS)?;
        for (i, d) in req.digests.iter().enumerate() {
            check_digest(&format!("digests[{i}]"), d)?;
        }
        let missing = crate::store::missing_chunks(&self.store, req.project, req.digests).await?;
        Ok(Response::new(MissingChunksResponse { missing }))
    }

    async fn put_chunks(
        &self,
        request: Request<PutChunksRequest>,
    ) -> Result<Response<PutChunksResponse>, Status> {
        self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let stored = packed_chunks("chunks", &req.chunks)?;
        let stored = self.store.put_chunks(req.project, stored).await?;
        Ok(Response::new(PutChunksResponse { stored: i32::try_from(stored).unwrap_or(i32::MAX) }))
    }

    async fn get_chunks(
        &self,
        request: Request<GetChunksRequest>,
    ) -> Result<Response<GetChunksResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        validate::count("digests", req.digests.len(), MAX_CHUNKS_PER_CALL)?;
        for (i, d) in req.digests.iter().enumerate() {
            check_digest(&format!("digests[{i}]"), d)?;
        }
        let stored = self.store.chunks(req.project.clone(), req.digests.clone(), true).await?;
        let stored: HashMap<String, model::Chunk> =
            stored.into_iter().map(|c| (c.digest.clone(), c)).collect();
        // In the order asked, each as often as asked.
        let found: Vec<&model::Chunk> = req.digests.iter().filter_map(|d| stored.get(d)).collect();
        // A reply is bounded in bytes as well as in count (by the sizes the chunks were
        // stored with, before anything is decompressed).
        let total: i64 = found.iter().map(|c| c.size_bytes.max(0)).sum();
        if total > i64::try_from(MAX_CHUNKS_BYTES).unwrap_or(i64::MAX) {
            return Err(Error::ResourceExhausted(format!(
                "digests: these {} chunks hold {total} bytes, over the {MAX_CHUNKS_BYTES} bytes one GetChunks reply \
                 carries; ask for fewer per call",
                found.len()
            ))
            .into());
        }
        let mut chunks = Vec::with_capacity(found.len());
        for stored in found {
            let digest = stored.digest.clone();
            let data = crate::core::chunk::unpack(&digest, &stored.data, stored.size_bytes).map_err(|e| {
                Error::DataLoss {
                    id: format!("chunk {digest}"),
                    source: crate::core::checkpoint::IntegrityError::Digest {
                        expected: digest.clone(),
                        computed: e.to_string(),
                    },
                }
            })?;
            chunks.push(Chunk { digest, data });
        }
        if let Some(missing) = req.digests.iter().find(|d| !chunks.iter().any(|c| &c.digest == *d)) {
            return Err(
                Error::NotFound(format!("digests: no chunk {missing} in project {:?}", req.project)).into()
            );
        }
        Ok(Response::new(GetChunksResponse { chunks }))
    }
}
