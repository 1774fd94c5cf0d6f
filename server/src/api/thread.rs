//! `ThreadService`.

use baton_proto::v1::thread_service_server::ThreadService;
use baton_proto::v1::{
    AgentKind, CopyThreadRequest, CopyThreadResponse, DeleteThreadRunsRequest, DeleteThreadRunsResponse,
    DeleteThreadsRequest, DeleteThreadsResponse, GetThreadCheckpointRequest, GetThreadCheckpointResponse,
    ListThreadCheckpointsRequest, ListThreadCheckpointsResponse, OpenThreadRequest, OpenThreadResponse,
    PruneThreadsRequest, PruneThreadsResponse, PutThreadCheckpointRequest, PutThreadCheckpointResponse,
    PutThreadWritesRequest, PutThreadWritesResponse,
};
use prost::Message;
use tonic::{Request, Response, Status};

use super::checkpoint::{check_blobs, check_state};
use super::session::{check_labels, check_metadata};
use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::page;
use crate::core::redact::Redactor;
use crate::core::thread::{self as rules, MAX_CHANNEL, MAX_NAMED, MAX_TASK, MAX_WRITES};
use crate::core::validate::{self, limits};
use crate::error::Error;
use crate::service::thread::{self, Labels, ThreadName};
use crate::store::Store;
use crate::store::model::PendingWrite;

/// A thread's namespace as a request names it, validated.
fn name(project: &str, thread: &str, namespace: &str) -> Result<ThreadName, Error> {
    validate::project("project", project)?;
    rules::thread("thread", thread)?;
    rules::namespace("namespace", namespace)?;
    Ok(ThreadName { project: project.to_owned(), thread: thread.to_owned(), namespace: namespace.to_owned() })
}

fn labels(agent: i32, host: &str, user: &str) -> Result<Labels, Error> {
    validate::enum_value::<AgentKind>("agent", agent, true)?;
    check_labels(host, user, "", "", "")?;
    Ok(Labels {
        agent,
        host: host.to_owned(),
        user: user.to_owned(),
        metadata: std::collections::HashMap::new(),
    })
}

/// Thread keys (or run ids) a delete or prune names: 1..=1000 of them.
fn named(
    field: &str,
    values: &[String],
    each: impl Fn(&str, &str) -> Result<(), validate::Invalid>,
) -> Result<(), Error> {
    validate::count(field, values.len(), MAX_NAMED)?;
    for (i, v) in values.iter().enumerate() {
        each(&format!("{field}[{i}]"), v)?;
    }
    Ok(())
}

#[tonic::async_trait]
impl<S: Store> ThreadService for Api<S> {
    async fn open_thread(
        &self,
        request: Request<OpenThreadRequest>,
    ) -> Result<Response<OpenThreadResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        let name = name(&req.project, &req.thread, &req.namespace)?;
        let mut labels = labels(req.agent, &req.host, &req.user)?;
        check_metadata(&req.metadata)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.fields(req.metadata.values_mut());
        labels.metadata = req.metadata;
        let ctx = write_ctx("OpenThread", &hash_view, req.write.as_ref(), redactor.count, &who)?;
        Ok(Response::new(thread::open(&self.store, ctx, name, labels).await?))
    }

    async fn put_thread_checkpoint(
        &self,
        request: Request<PutThreadCheckpointRequest>,
    ) -> Result<Response<PutThreadCheckpointResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        let name = name(&req.project, &req.thread, &req.namespace)?;
        rules::key("key", &req.key)?;
        if !req.parent_key.is_empty() {
            rules::key("parent_key", &req.parent_key)?;
        }
        if req.parent_key == req.key {
            return Err(Error::from(validate::invalid("parent_key", "is the checkpoint's own key")).into());
        }
        let id = validate::new_id("checkpoint_id", &req.checkpoint_id)?;
        let labels = labels(req.agent, &req.host, &req.user)?;
        validate::single_line("payload_content_type", &req.payload_content_type, 256)?;
        let mut state = req.state.take().unwrap_or_default();
        check_state(&state)?;
        let size = state.encoded_len() + req.payload.len() + req.metadata_json.len();
        if size > self.limits.max_checkpoint_bytes {
            return Err(Error::ResourceExhausted(format!(
                "state + payload + metadata: {size} bytes is over this server's checkpoint limit of {} bytes \
                 (--max-checkpoint-bytes); put large channel values in chunks (PutChunks) and reference them in blobs",
                self.limits.max_checkpoint_bytes
            ))
            .into());
        }
        let mut hash_view = req.clone();
        hash_view.state = Some(state.clone());
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.fields(crate::core::redact::state_texts(&mut state));
        let metadata = rules::metadata("metadata_json", &req.metadata_json, |s| redactor.field(s))?;
        let ctx = write_ctx("PutThreadCheckpoint", &hash_view, req.write.as_ref(), redactor.count, &who)?;
        let chunk_digests = check_blobs(&req.blobs, super::checkpoint::MAX_THREAD_BLOBS)?;
        let carried = super::checkpoint::packed_chunks("chunks", &req.chunks)?;
        for (i, c) in carried.iter().enumerate() {
            if !chunk_digests.contains(&c.digest) {
                return Err(Error::from(validate::invalid(
                    format!("chunks[{i}]"),
                    "is not a chunk of the checkpoint's blobs; send only the chunks they list",
                ))
                .into());
            }
        }
        let new = thread::NewThreadCheckpoint {
            name,
            key: req.key,
            parent_key: req.parent_key,
            metadata,
            state,
            payload: req.payload,
            payload_content_type: req.payload_content_type,
            blobs: req.blobs,
            chunk_digests,
            carried,
            id,
            id_given: !req.checkpoint_id.is_empty(),
            labels,
        };
        Ok(Response::new(thread::put(&self.store, ctx, new).await?))
    }

    async fn get_thread_checkpoint(
        &self,
        request: Request<GetThreadCheckpointRequest>,
    ) -> Result<Response<GetThreadCheckpointResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        let name = name(&req.project, &req.thread, &req.namespace)?;
        if !req.key.is_empty() {
            rules::key("key", &req.key)?;
        }
        let key = (!req.key.is_empty()).then_some(req.key);
        Ok(Response::new(thread::get(&self.store, name, key).await?))
    }

    async fn list_thread_checkpoints(
        &self,
        request: Request<ListThreadCheckpointsRequest>,
    ) -> Result<Response<ListThreadCheckpointsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        if !req.thread.is_empty() {
            rules::thread("thread", &req.thread)?;
        }
        if let Some(ns) = &req.namespace {
            rules::namespace("namespace", ns)?;
        }
        for (field, key) in [("key", &req.key), ("before_key", &req.before_key)] {
            if !key.is_empty() {
                rules::key(field, key)?;
            }
        }
        let after = if req.page_token.is_empty() {
            None
        } else {
            let p: thread::Position = page::position("page_token", &req.page_token)?;
            Some((p.key, p.id))
        };
        let query = thread::ListQuery {
            project: req.project,
            thread: req.thread,
            namespace: req.namespace,
            key: (!req.key.is_empty()).then_some(req.key),
            before_key: (!req.before_key.is_empty()).then_some(req.before_key),
            after,
            filter: rules::filter("metadata_filter_json", &req.metadata_filter_json)?,
            page_size: validate::page_size("page_size", req.page_size, 100, 1000)?,
            metadata_only: req.metadata_only,
        };
        Ok(Response::new(thread::list(&self.store, query).await?))
    }

    async fn put_thread_writes(
        &self,
        request: Request<PutThreadWritesRequest>,
    ) -> Result<Response<PutThreadWritesResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        let name = name(&req.project, &req.thread, &req.namespace)?;
        rules::key("key", &req.key)?;
        validate::count("writes", req.writes.len(), MAX_WRITES)?;
        if req.writes.is_empty() {
            return Err(Error::from(validate::invalid("writes", "is empty; send at least one write")).into());
        }
        for (i, w) in req.writes.iter().enumerate() {
            validate::required(&format!("writes[{i}].task_id"), &w.task_id, MAX_TASK)?;
            validate::optional(&format!("writes[{i}].task_path"), &w.task_path, MAX_TASK)?;
            validate::required(&format!("writes[{i}].channel"), &w.channel, MAX_CHANNEL)?;
            validate::single_line(&format!("writes[{i}].value_type"), &w.value_type, MAX_CHANNEL)?;
        }
        let size: usize = req.writes.iter().map(|w| w.value.len()).sum();
        if size > self.limits.max_checkpoint_bytes {
            return Err(Error::ResourceExhausted(format!(
                "writes: {size} bytes of values is over this server's checkpoint limit of {} bytes \
                 (--max-checkpoint-bytes); write large values as chunks (PutChunks) and reference them",
                self.limits.max_checkpoint_bytes
            ))
            .into());
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("PutThreadWrites", &hash_view, req.write.as_ref(), 0, &who)?;
        let writes = req
            .writes
            .into_iter()
            .map(|w| PendingWrite {
                checkpoint_id: String::new(),
                task_id: w.task_id,
                idx: w.index,
                channel: w.channel,
                task_path: w.task_path,
                value_type: w.value_type,
                value: w.value,
                revision: 0,
            })
            .collect();
        let max = self.limits.max_checkpoint_bytes;
        Ok(Response::new(thread::put_writes(&self.store, ctx, name, req.key, writes, max).await?))
    }

    async fn delete_threads(
        &self,
        request: Request<DeleteThreadsRequest>,
    ) -> Result<Response<DeleteThreadsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        named("threads", &req.threads, rules::thread)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("DeleteThreads", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(thread::delete_threads(&self.store, ctx, req.project, req.threads).await?))
    }

    async fn delete_thread_runs(
        &self,
        request: Request<DeleteThreadRunsRequest>,
    ) -> Result<Response<DeleteThreadRunsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        named("run_ids", &req.run_ids, |field, run| validate::required(field, run, limits::SHORT))?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("DeleteThreadRuns", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(thread::delete_runs(&self.store, ctx, req.project, req.run_ids).await?))
    }

    async fn copy_thread(
        &self,
        request: Request<CopyThreadRequest>,
    ) -> Result<Response<CopyThreadResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        rules::thread("source_thread", &req.source_thread)?;
        rules::thread("target_thread", &req.target_thread)?;
        if req.source_thread == req.target_thread {
            return Err(Error::from(validate::invalid("target_thread", "is the source thread")).into());
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("CopyThread", &hash_view, req.write.as_ref(), 0, &who)?;
        let (project, source, target) = (req.project, req.source_thread, req.target_thread);
        Ok(Response::new(thread::copy(&self.store, ctx, project, source, target).await?))
    }

    async fn prune_threads(
        &self,
        request: Request<PruneThreadsRequest>,
    ) -> Result<Response<PruneThreadsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        named("threads", &req.threads, rules::thread)?;
        let keep = usize::try_from(req.keep_latest).map_err(|_| {
            Error::from(validate::invalid(
                "keep_latest",
                format!("{} is negative; 0 deletes the threads", req.keep_latest),
            ))
        })?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("PruneThreads", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(thread::prune(&self.store, ctx, req.project, req.threads, keep).await?))
    }
}
