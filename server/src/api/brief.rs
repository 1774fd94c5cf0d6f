//! `BriefService`, and the brief that `ResumeSession` returns too.

use baton_proto::v1::brief_service_server::BriefService;
use baton_proto::v1::{
    Brief, GetBriefRequest, GetBriefResponse, ResumeSessionRequest, ResumeSessionResponse,
    resume_session_request,
};
use tonic::{Request, Response, Status};

use super::Api;
use super::session::brief_budget;
use crate::core::access::Need;
use crate::core::brief;
use crate::core::validate::{self, limits};
use crate::error::Result;
use crate::store::{BriefData, BriefFor, Store, WriteCtx};

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

/// `ResumeSession`'s write and the brief its reply carries.
pub async fn resume_with_brief<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: ResumeSessionRequest,
    new_id: uuid::Uuid,
    budget: usize,
) -> Result<ResumeSessionResponse> {
    let project = req.project.clone();
    // Resuming a named session, the brief is read side by side with the write (from when
    // the backend says, see `RESUME_BRIEF_WAITS`) instead of after it, which would be about
    // half of a resume's latency: it leaves out the session being resumed and takes it as
    // the previous one, which is what the write makes true. A replayed reply (another new
    // session) gets its brief after.
    let ahead = match &req.target {
        Some(resume_session_request::Target::SessionId(target)) => Some(BriefFor {
            project: project.clone(),
            session_id: Some(new_id),
            branch: req.branch.clone(),
            resuming: Some(target.clone()),
        }),
        _ => None,
    };
    let (mut reply, ahead) = match ahead {
        Some(q) => {
            let (settled, committing) = tokio::sync::oneshot::channel();
            let (reply, data) = tokio::join!(store.resume_session(ctx, req, new_id, Some(settled)), async {
                // Told only if the write gets that far.
                match committing.await {
                    Ok(()) => Some(store.brief_data(q).await),
                    Err(_) => None,
                }
            });
            (reply?, data)
        }
        None => (store.resume_session(ctx, req, new_id, None).await?, None),
    };
    let session = reply.session.as_ref().map(|s| (s.id.clone(), s.branch.clone()));
    let (session_id, branch) = session.unwrap_or_default();
    let fresh = reply.result.as_ref().is_some_and(|r| !r.replayed) && session_id == new_id.to_string();
    let brief = match ahead {
        Some(data) if fresh => {
            let mut data = data?;
            // The resumed session as the write left it.
            data.previous = reply.resumed_from.clone().or(data.previous);
            fit_brief(&project, data, budget, &[])
        }
        _ => {
            let session_id = validate::uuid("session_id", &session_id).ok();
            let q = BriefFor { project: project.clone(), session_id, branch, resuming: None };
            build_brief(store, q, budget, &[]).await?
        }
    };
    reply.brief = Some(brief);
    Ok(reply)
}

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
        let brief = build_brief(&self.store, q, budget, &req.changes).await?;
        Ok(Response::new(GetBriefResponse { brief: Some(brief) }))
    }
}
