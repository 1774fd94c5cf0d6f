//! `BriefService`, and the brief that `ResumeSession` returns too.

use baton_proto::v1::brief_service_server::BriefService;
use baton_proto::v1::{Brief, GetBriefRequest, GetBriefResponse};
use tonic::{Request, Response, Status};

use super::Api;
use super::session::brief_budget;
use crate::core::access::Need;
use crate::core::brief;
use crate::core::validate::{self, limits};
use crate::error::Result;
use crate::store::{BriefData, BriefFor, Store};

/// Reads what the brief is made of and fits it to `budget` characters.
pub async fn build_brief<S: Store>(
    store: &S,
    q: BriefFor,
    budget: usize,
    changes: &[String],
) -> Result<Brief> {
    let project = q.project.clone();
    Ok(fit_brief(&project, store.brief_data(q).await?, budget, changes))
}

/// Fits what was read to `budget` characters.
pub fn fit_brief(project: &str, data: BriefData, budget: usize, changes: &[String]) -> Brief {
    let mut out = brief::fit(project, brief::sections(&data, changes), budget);
    out.as_of_revision = data.as_of_revision;
    out.last_git_head = data.previous.map(|p| p.git_head).unwrap_or_default();
    out
}

#[tonic::async_trait]
impl<S: Store> BriefService for Api<S> {
    async fn get_brief(
        &self,
        request: Request<GetBriefRequest>,
    ) -> Result<Response<GetBriefResponse>, Status> {
        self.auth.check(request.metadata(), Need::Read, &request.get_ref().project).await?;
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
        let brief = build_brief(&self.store, q, budget, &req.changes).await?;
        Ok(Response::new(GetBriefResponse { brief: Some(brief) }))
    }
}
