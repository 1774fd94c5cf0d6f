//! `ItemLogService`. Item values and summaries are the caller's own, stored as given (as
//! checkpoint payloads are): nothing in them is redacted (a purge removes a leaked value).

use baton_proto::v1::item_log_service_server::ItemLogService;
use baton_proto::v1::{
    AppendItemsRequest, AppendItemsResponse, DeleteItemLogsRequest, DeleteItemLogsResponse,
    ListItemLogsRequest, ListItemLogsResponse, PopItemRequest, PopItemResponse, ReadItemsRequest,
    ReadItemsResponse,
};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::items::{self as rules, Listing, MAX_APPEND, MAX_DELETE_KEYS, MAX_DELETE_PREFIXES};
use crate::core::page;
use crate::core::validate::{self, Invalid, invalid};
use crate::error::Error;
use crate::service::items::{self, Append, Listed, NewItem, Reading};
use crate::store::Store;

/// A request's project and log key, validated.
fn named(project: &str, key: &str) -> Result<(), Invalid> {
    validate::project("project", project)?;
    rules::log_key("key", key)
}

#[tonic::async_trait]
impl<S: Store> ItemLogService for Api<S> {
    async fn append_items(
        &self,
        request: Request<AppendItemsRequest>,
    ) -> Result<Response<AppendItemsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        named(&req.project, &req.key)?;
        validate::count("items", req.items.len(), MAX_APPEND)?;
        if req.items.is_empty() && req.summary_json.is_none() {
            return Err(
                Error::from(invalid("items", "is empty; send at least one item, or a summary_json")).into()
            );
        }
        if let Some(summary) = &req.summary_json {
            rules::summary("summary_json", summary)?;
        }
        let mut size = 0usize;
        let mut new = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let (key, content_type) =
                rules::item_labels(&format!("items[{i}]"), &item.key, &item.content_type)?;
            size = size.saturating_add(item.value.len());
            new.push((key, content_type));
        }
        if size > self.limits.max_checkpoint_bytes {
            return Err(Error::ResourceExhausted(format!(
                "items: {size} bytes of values is over this server's limit of {} bytes per append \
                 (--max-checkpoint-bytes); append fewer items per call",
                self.limits.max_checkpoint_bytes
            ))
            .into());
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("AppendItems", &hash_view, req.write.as_ref(), 0, &who)?;
        let items = std::mem::take(&mut req.items)
            .into_iter()
            .zip(new)
            .map(|(item, (key, content_type))| NewItem { key, content_type, value: item.value })
            .collect();
        let append = Append { project: req.project, key: req.key, items, summary: req.summary_json };
        Ok(Response::new(items::append(&self.store, ctx, append).await?))
    }

    async fn read_items(
        &self,
        request: Request<ReadItemsRequest>,
    ) -> Result<Response<ReadItemsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        named(&req.project, &req.key)?;
        if req.after_seq < 0 {
            return Err(Error::from(invalid(
                "after_seq",
                "is negative; seqs start at 1 (0 = from the first)",
            ))
            .into());
        }
        let from = if req.page_token.is_empty() {
            None
        } else {
            Some(page::position("page_token", &req.page_token)?)
        };
        let reading = Reading {
            project: req.project,
            key: req.key,
            last: req.last,
            after_seq: req.after_seq,
            page_size: validate::page_size("page_size", req.page_size, 1000, 1000)?,
            from,
        };
        Ok(Response::new(items::read(&self.store, reading).await?))
    }

    async fn pop_item(&self, request: Request<PopItemRequest>) -> Result<Response<PopItemResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        named(&req.project, &req.key)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("PopItem", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(items::pop(&self.store, ctx, req.project, req.key).await?))
    }

    async fn list_item_logs(
        &self,
        request: Request<ListItemLogsRequest>,
    ) -> Result<Response<ListItemLogsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        rules::prefix("prefix", &req.prefix)?;
        let delimiter = rules::delimiter("delimiter", &req.delimiter)?;
        let from = if req.page_token.is_empty() {
            None
        } else {
            Some(page::position("page_token", &req.page_token)?)
        };
        let listed = Listed {
            project: req.project,
            listing: Listing { prefix: req.prefix, delimiter },
            summaries: req.with_summaries,
            page_size: validate::page_size("page_size", req.page_size, 100, 1000)?,
            from,
        };
        Ok(Response::new(items::list(&self.store, listed).await?))
    }

    async fn delete_item_logs(
        &self,
        request: Request<DeleteItemLogsRequest>,
    ) -> Result<Response<DeleteItemLogsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        validate::count("keys", req.keys.len(), MAX_DELETE_KEYS)?;
        validate::count("prefixes", req.prefixes.len(), MAX_DELETE_PREFIXES)?;
        if req.keys.is_empty() && req.prefixes.is_empty() {
            return Err(
                Error::from(invalid("keys", "and prefixes are both empty; name the logs to delete")).into()
            );
        }
        for (i, key) in req.keys.iter().enumerate() {
            rules::log_key(&format!("keys[{i}]"), key)?;
        }
        for (i, prefix) in req.prefixes.iter().enumerate() {
            if prefix.is_empty() {
                return Err(Error::from(invalid(
                    format!("prefixes[{i}]"),
                    "is empty, which would delete every log of the project; name a prefix",
                ))
                .into());
            }
            rules::prefix(&format!("prefixes[{i}]"), prefix)?;
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("DeleteItemLogs", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(items::delete(&self.store, ctx, req.project, req.keys, req.prefixes).await?))
    }
}
