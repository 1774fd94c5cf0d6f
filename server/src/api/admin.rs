//! `AdminService`: retention and event-log compaction on demand (admin tokens only).

use baton_proto::v1::admin_service_server::AdminService;
use baton_proto::v1::{Actor, CompactEventsRequest, CompactEventsResponse, PruneRequest, PruneResponse};
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
}
