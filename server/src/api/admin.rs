//! `AdminService`: retention, event-log compaction and purges on demand (admin tokens only).

use baton_proto::v1::admin_service_server::AdminService;
use baton_proto::v1::{
    Actor, CompactEventsRequest, CompactEventsResponse, PruneRequest, PruneResponse, PurgeRequest,
    PurgeResponse,
};
use tonic::{Request, Response, Status};

use super::Api;
use crate::core::access::Need;
use crate::core::validate::{self, invalid};
use crate::error::Error;
use crate::jobs::retention::{self, Policy};
use crate::store::Store;

fn actor(who: &crate::auth::Principal) -> Actor {
    Actor { token: who.name().to_owned(), ..Actor::default() }
}

#[tonic::async_trait]
impl<S: Store> AdminService for Api<S> {
    async fn prune(&self, request: Request<PruneRequest>) -> Result<Response<PruneResponse>, Status> {
        let who = self.auth.principal(request.metadata()).await?;
        who.allow(Need::Admin)?;
        let req = request.into_inner();
        let project = if req.project.is_empty() {
            who.all_projects()?;
            None
        } else {
            validate::project("project", &req.project)?;
            who.scope(&req.project)?;
            Some(req.project)
        };
        let keep_days = match req.keep_days {
            None => self.limits.retention.keep_days,
            Some(d) => u32::try_from(d).map_err(|_| {
                Error::from(invalid("keep_days", format!("{d} is negative; use 0 or more days")))
            })?,
        };
        let keep_ancestors = match req.keep_ancestors {
            None => self.limits.retention.keep_ancestors,
            Some(k) => usize::try_from(k).map_err(|_| {
                Error::from(invalid("keep_ancestors", format!("{k} is negative; use 0 or more")))
            })?,
        };
        let policy = Policy { keep_days, keep_ancestors };
        let projects = retention::prune(&self.store, project, policy, req.dry_run, actor(&who)).await?;
        Ok(Response::new(PruneResponse { projects, dry_run: req.dry_run }))
    }

    async fn compact_events(
        &self,
        request: Request<CompactEventsRequest>,
    ) -> Result<Response<CompactEventsResponse>, Status> {
        let who = self.auth.check(request.metadata(), Need::Admin, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        Ok(Response::new(self.store.compact_events(req.project, req.below_revision, actor(&who)).await?))
    }

    async fn purge(&self, request: Request<PurgeRequest>) -> Result<Response<PurgeResponse>, Status> {
        let who = self.auth.check(request.metadata(), Need::Admin, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        check_purge_value(&req.value)?;
        Ok(Response::new(self.store.purge(req.project, req.value, req.dry_run, actor(&who)).await?))
    }
}

/// A purge value must be specific enough not to wreck unrelated data.
pub fn check_purge_value(value: &str) -> Result<(), Error> {
    if value.chars().count() < crate::core::purge::MIN_LEN {
        return Err(invalid(
            "value",
            format!(
                "is {} characters; purge needs at least {} (a shorter value would match too much)",
                value.chars().count(),
                crate::core::purge::MIN_LEN
            ),
        )
        .into());
    }
    Ok(())
}
