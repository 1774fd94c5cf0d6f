//! `CheckpointService`.

use baton_proto::v1::checkpoint_service_server::CheckpointService;
use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, CreateCheckpointResponse, GetCheckpointRequest,
    GetCheckpointResponse, ListCheckpointsRequest, ListCheckpointsResponse,
};
use prost::Message;
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::checkpoint::{self, Header};
use crate::core::redact::Redactor;
use crate::core::validate::{self, limits};
use crate::error::Error;
use crate::store::{NewCheckpoint, Store};

/// Size rules for the structured state: bounded lists of bounded strings.
fn check_state(state: &CheckpointState) -> Result<(), Error> {
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

#[tonic::async_trait]
impl<S: Store> CheckpointService for Api<S> {
    async fn create_checkpoint(
        &self,
        request: Request<CreateCheckpointRequest>,
    ) -> Result<Response<CreateCheckpointResponse>, Status> {
        let mut req = request.into_inner();
        let session_id = validate::uuid("session_id", &req.session_id)?;
        let id = validate::new_id("checkpoint_id", &req.checkpoint_id)?;
        if let Some(parent) = &req.parent_id
            && !parent.is_empty()
        {
            validate::uuid("parent_id", parent)?;
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
        let ctx = write_ctx("CreateCheckpoint", &hash_view, req.write.as_ref(), redactor.count)?;
        let session = session_id.to_string();
        let header = Header {
            session_id: &session,
            kind: req.kind,
            reason: &req.reason,
            payload_content_type: &req.payload_content_type,
        };
        let content = checkpoint::encode(&header, &state, &req.payload)
            .map_err(|e| Error::internal(format!("compressing a checkpoint: {e}")))?;
        let state_tool_count = state.tool_count;
        req.payload = Vec::new();
        let new = NewCheckpoint { request: req, session_id, id, content, state_tool_count };
        Ok(Response::new(self.store.create_checkpoint(ctx, new).await?))
    }

    async fn get_checkpoint(
        &self,
        request: Request<GetCheckpointRequest>,
    ) -> Result<Response<GetCheckpointResponse>, Status> {
        let req = request.into_inner();
        let id = validate::uuid("checkpoint_id", &req.checkpoint_id)?;
        Ok(Response::new(self.store.get_checkpoint(id, req.include_payload).await?))
    }

    async fn list_checkpoints(
        &self,
        request: Request<ListCheckpointsRequest>,
    ) -> Result<Response<ListCheckpointsResponse>, Status> {
        let req = request.into_inner();
        let id = validate::uuid("session_id", &req.session_id)?;
        Ok(Response::new(self.store.list_checkpoints(id, req.include_state).await?))
    }
}
