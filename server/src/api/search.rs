//! `SearchService`.

use baton_proto::v1::search_service_server::SearchService;
use baton_proto::v1::{SearchKind, SearchRequest, SearchResponse};
use tonic::{Request, Response, Status};

use super::Api;
use crate::core::access::Need;
use crate::core::search::query;
use crate::core::validate::{self, invalid, limits};
use crate::error::Error;
use crate::service::search::{Position, Search};
use crate::store::Store;

#[tonic::async_trait]
impl<S: Store> SearchService for Api<S> {
    async fn search(&self, request: Request<SearchRequest>) -> Result<Response<SearchResponse>, Status> {
        let who = self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let (key, label) = super::slot_key(&who, &request);
        let _slot = self.search_slots.acquire(&key, &label)?;
        let req = request.into_inner();
        let search = validated(&req)?;
        let page_size = validate::page_size("page_size", req.page_size, 20, 100)?;
        let position = if req.page_token.is_empty() {
            None
        } else {
            let p: Position =
                crate::core::page::position("page_token", &req.page_token).map_err(Error::from)?;
            if p.offset < 0 || p.revision < 0 || p.max_id < 0 {
                return Err(Error::from(invalid("page_token", "was not given by this list")).into());
            }
            Some(p)
        };
        let limit = self.limits.search_time_limit;
        Ok(Response::new(
            crate::service::search::search(&self.store, search, page_size, position, limit).await?,
        ))
    }
}

fn validated(req: &SearchRequest) -> Result<Search, Error> {
    validate::project("project", &req.project)?;
    let query = query::parse(&req.query)?;
    let mut kinds = Vec::new();
    for (i, k) in req.kinds.iter().enumerate() {
        kinds.push(validate::enum_value::<SearchKind>(&format!("kinds[{i}]"), *k, false)?);
    }
    let session_id = if req.session_id.is_empty() {
        String::new()
    } else {
        validate::uuid("session_id", &req.session_id)?.to_string()
    };
    validate::single_line("branch", &req.branch, limits::SHORT)?;
    validate::single_line("author", &req.author, limits::SHORT)?;
    let time = |field: &str, t: Option<&prost_types::Timestamp>, default: i64| match t {
        None => Ok(default),
        Some(t) if (0..1_000_000_000).contains(&t.nanos) => Ok(crate::core::time::us(t)),
        Some(_) => Err(invalid(field, "has nanos outside 0..1e9")),
    };
    let after_us = time("after", req.after.as_ref(), i64::MIN)?;
    let before_us = time("before", req.before.as_ref(), i64::MAX)?;
    if after_us >= before_us {
        return Err(invalid("after", "must be before `before`").into());
    }
    Ok(Search {
        project: req.project.clone(),
        query,
        kinds,
        session_id,
        branch: req.branch.clone(),
        author: req.author.clone(),
        after_us,
        before_us,
    })
}
