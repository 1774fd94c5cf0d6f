//! `BriefService`.

use baton_proto::v1::brief_service_server::BriefService;
use baton_proto::v1::{GetBriefRequest, GetBriefResponse};
use tonic::{Request, Response, Status};

use super::Api;
use super::session::brief_budget;
use crate::core::access::Need;
use crate::core::validate::{self, limits};
use crate::service::brief::build_brief;
use crate::store::{BriefFor, Store};

#[tonic::async_trait]
impl<S: Store> BriefService for Api<S> {
    async fn get_brief(
        &self,
        request: Request<GetBriefRequest>,
    ) -> Result<Response<GetBriefResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let session = if req.session_id.is_empty() {
            None
        } else {
            Some(validate::uuid("session_id", &req.session_id)?)
        };
        validate::single_line("branch", &req.branch, limits::SHORT)?;
        let budget = brief_budget("budget_chars", req.budget_chars)?;
        validate::count("changes", req.changes.len(), limits::ITEMS)?;
        for c in &req.changes {
            validate::optional("changes[]", c, limits::PATH)?;
        }
        let q = BriefFor { project: req.project, session_id: session, branch: req.branch, resuming: None };
        let brief = build_brief(&self.store, &self.memory_cache, q, budget, &req.changes).await?;
        Ok(Response::new(GetBriefResponse { brief: Some(brief) }))
    }
}
