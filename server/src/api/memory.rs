//! `MemoryService`.

use baton_proto::v1::memory_service_server::MemoryService;
use baton_proto::v1::{
    DeleteMemoryRequest, DeleteMemoryResponse, ListMemoryRequest, ListMemoryResponse, MemoryOp,
    PutMemoryRequest, PutMemoryResponse, SetMemoryCapsRequest, SetMemoryCapsResponse, delete_memory_request,
};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::memory as rules;
use crate::core::redact::Redactor;
use crate::core::validate::{self, limits};
use crate::error::Error;
use crate::store::Store;

const MAX_ITEMS: usize = 100;

pub(crate) fn check_scope(branch: &str, key: &str) -> Result<(), Error> {
    validate::single_line("branch", branch, limits::SHORT)?;
    validate::single_line("key", key, 200)?;
    Ok(())
}

#[tonic::async_trait]
impl<S: Store> MemoryService for Api<S> {
    async fn put_memory(
        &self,
        request: Request<PutMemoryRequest>,
    ) -> Result<Response<PutMemoryResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        validate::project("project", &req.project)?;
        rules::semantics(&req.category).map_err(Error::from)?;
        validate::enum_value::<MemoryOp>("op", req.op, true)?;
        check_scope(&req.branch, &req.key)?;
        validate::count("items", req.items.len(), MAX_ITEMS)?;
        for (i, item) in req.items.iter().enumerate() {
            validate::required(&format!("items[{i}].content"), &item.content, limits::TEXT)?;
            validate::optional(&format!("items[{i}].rationale"), &item.rationale, limits::TEXT)?;
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.fields(req.items.iter_mut().flat_map(|i| [&mut i.content, &mut i.rationale]));
        let ctx = write_ctx("PutMemory", &hash_view, req.write.as_ref(), redactor.count, &who)?;
        Ok(Response::new(crate::service::memory::put(&self.store, ctx, req).await?))
    }

    async fn list_memory(
        &self,
        request: Request<ListMemoryRequest>,
    ) -> Result<Response<ListMemoryResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        if !req.category.is_empty() {
            rules::semantics(&req.category).map_err(Error::from)?;
        }
        if let Some(branch) = &req.branch {
            validate::single_line("branch", branch, limits::SHORT)?;
        }
        let page_size = validate::page_size("page_size", req.page_size, 500, 1000)?;
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(crate::core::page::position("page_token", &req.page_token).map_err(Error::from)?)
        };
        Ok(Response::new(crate::service::memory::list(&self.store, req, page_size, after).await?))
    }

    async fn delete_memory(
        &self,
        request: Request<DeleteMemoryRequest>,
    ) -> Result<Response<DeleteMemoryResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        validate::project("project", &req.project)?;
        match &mut req.target {
            // Canonical, as every id is before it is looked up.
            Some(delete_memory_request::Target::EntryId(id)) => {
                *id = validate::uuid("entry_id", id)?.to_string();
            }
            Some(delete_memory_request::Target::Record(r)) => {
                let semantics = rules::semantics(&r.category).map_err(Error::from)?;
                check_scope(&r.branch, &r.key)?;
                if (semantics == rules::Semantics::Keyed) == r.key.is_empty() {
                    return Err(Error::from(validate::invalid(
                        "record.key",
                        "notes are named by key; other categories take no key",
                    ))
                    .into());
                }
            }
            None => {
                return Err(Error::from(validate::invalid("target", "give an entry_id or a record")).into());
            }
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("DeleteMemory", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(crate::service::memory::delete(&self.store, ctx, req).await?))
    }

    async fn set_memory_caps(
        &self,
        request: Request<SetMemoryCapsRequest>,
    ) -> Result<Response<SetMemoryCapsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        if req.caps.is_empty() {
            return Err(
                Error::from(validate::invalid("caps", "name at least one category and its cap")).into()
            );
        }
        rules::check_caps(&req.caps).map_err(Error::from)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("SetMemoryCaps", &hash_view, req.write.as_ref(), 0, &who)?;
        Ok(Response::new(crate::service::memory::set_caps(&self.store, ctx, req).await?))
    }
}
