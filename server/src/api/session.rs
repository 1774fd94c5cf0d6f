//! `SessionService`.

use baton_proto::v1::session_service_server::SessionService;
use baton_proto::v1::{
    AgentKind, EndSessionRequest, EndSessionResponse, GetSessionRequest, GetSessionResponse,
    HeartbeatRequest, HeartbeatResponse, ListSessionsRequest, ListSessionsResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionStatus, StartSessionRequest, StartSessionResponse, UpdateSessionRequest,
    UpdateSessionResponse, resume_session_request,
};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::redact::Redactor;
use crate::core::validate::{self, invalid, limits};
use crate::error::Error;
use crate::store::{Entity, SessionQuery, Store};

pub(crate) fn check_labels(
    host: &str,
    user: &str,
    cwd: &str,
    branch: &str,
    agent_session_id: &str,
) -> Result<(), Error> {
    validate::single_line("host", host, limits::SHORT)?;
    validate::single_line("user", user, limits::SHORT)?;
    validate::single_line("cwd", cwd, limits::PATH)?;
    validate::single_line("branch", branch, limits::SHORT)?;
    validate::agent_session_id("agent_session_id", agent_session_id)?;
    Ok(())
}

pub(crate) fn check_metadata(metadata: &std::collections::HashMap<String, String>) -> Result<(), Error> {
    validate::count("metadata", metadata.len(), limits::METADATA_ENTRIES)?;
    for (k, v) in metadata {
        validate::required("metadata key", k, 128)?;
        validate::optional(&format!("metadata[{k}]"), v, limits::SHORT * 8)?;
    }
    Ok(())
}

pub(crate) fn check_lease(lease_ttl_ms: i64) -> Result<(), Error> {
    const MAX: i64 = 7 * 24 * 3600 * 1000;
    if !(0..=MAX).contains(&lease_ttl_ms) {
        return Err(
            invalid("lease_ttl_ms", format!("{lease_ttl_ms} is outside 0..={MAX} (0 = no lease)")).into()
        );
    }
    Ok(())
}

#[tonic::async_trait]
impl<S: Store> SessionService for Api<S> {
    async fn start_session(
        &self,
        request: Request<StartSessionRequest>,
    ) -> Result<Response<StartSessionResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        validate::project("project", &req.project)?;
        let id = validate::new_id("session_id", &req.session_id)?;
        validate::enum_value::<AgentKind>("agent", req.agent, false)?;
        let status = validate::enum_value::<SessionStatus>("status", req.status, true)?;
        if !matches!(status, SessionStatus::Unspecified | SessionStatus::Initializing | SessionStatus::Active)
        {
            return Err(Error::from(invalid("status", "a session starts INITIALIZING or ACTIVE")).into());
        }
        check_labels(&req.host, &req.user, &req.cwd, &req.branch, &req.agent_session_id)?;
        validate::optional("goal", &req.goal, limits::TEXT)?;
        validate::single_line("git_base", &req.git_base, limits::SHORT)?;
        check_lease(req.lease_ttl_ms)?;
        check_metadata(&req.metadata)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.field(&mut req.goal);
        redactor.fields(req.metadata.values_mut());
        let ctx = write_ctx("StartSession", &hash_view, req.write.as_ref(), redactor.count, &who)?;
        Ok(Response::new(crate::service::session::start(&self.store, ctx, req, id).await?))
    }

    async fn get_session(
        &self,
        request: Request<GetSessionRequest>,
    ) -> Result<Response<GetSessionResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Read, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        Ok(Response::new(crate::service::session::get(&self.store, auth.id, auth.within).await?))
    }

    async fn list_sessions(
        &self,
        request: Request<ListSessionsRequest>,
    ) -> Result<Response<ListSessionsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        // Each status once; a longer list is a mistake (or an attempt to go past the
        // database's parameter limit).
        validate::count("statuses", req.statuses.len(), 64)?;
        let mut statuses = Vec::new();
        for s in &req.statuses {
            let status = validate::enum_value::<SessionStatus>("statuses", *s, false)?;
            if !statuses.contains(&status) {
                statuses.push(status);
            }
        }
        let agent = if req.agent == 0 {
            None
        } else {
            Some(validate::enum_value::<AgentKind>("agent", req.agent, false)? as i32)
        };
        validate::single_line("host", &req.host, limits::SHORT)?;
        validate::single_line("user", &req.user, limits::SHORT)?;
        validate::single_line("branch", &req.branch, limits::SHORT)?;
        let before_id = if req.page_token.is_empty() {
            None
        } else {
            Some(validate::uuid("page_token", &req.page_token)?.to_string())
        };
        let query = SessionQuery {
            project: req.project,
            statuses,
            agent,
            host: (!req.host.is_empty()).then_some(req.host),
            user: (!req.user.is_empty()).then_some(req.user),
            branch: (!req.branch.is_empty()).then_some(req.branch),
            since_us: req.since.as_ref().map(super::us),
            limit: validate::page_size("page_size", req.page_size, 100, 1000)?,
            before_id,
        };
        Ok(Response::new(crate::service::session::list(&self.store, query).await?))
    }

    async fn update_session(
        &self,
        request: Request<UpdateSessionRequest>,
    ) -> Result<Response<UpdateSessionResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Write, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        let mut req = request.into_inner();
        if let Some(goal) = &req.goal {
            validate::optional("goal", goal, limits::TEXT)?;
        }
        if let Some(branch) = &req.branch {
            validate::single_line("branch", branch, limits::SHORT)?;
        }
        if let Some(summary) = &req.summary {
            validate::optional("summary", summary, limits::TEXT)?;
        }
        if let Some(agent_session_id) = &req.agent_session_id {
            validate::agent_session_id("agent_session_id", agent_session_id)?;
        }
        check_metadata(&req.metadata)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.fields(req.goal.iter_mut().chain(req.summary.iter_mut()).chain(req.metadata.values_mut()));
        let ctx = write_ctx("UpdateSession", &hash_view, req.write.as_ref(), redactor.count, &auth.who)?;
        Ok(Response::new(crate::service::session::update(&self.store, ctx, req, auth.id, auth.within).await?))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Write, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        let req = request.into_inner();
        let status = match validate::enum_value::<SessionStatus>("status", req.status, true)? {
            SessionStatus::Unspecified | SessionStatus::Active => SessionStatus::Active,
            SessionStatus::Idle => SessionStatus::Idle,
            other => {
                return Err(Error::from(invalid(
                    "status",
                    format!(
                        "a heartbeat reports ACTIVE or IDLE, not {other:?}; use EndSession to end a session"
                    ),
                ))
                .into());
            }
        };
        if let Some(n) = req.tool_count
            && n < 0
        {
            return Err(Error::from(invalid("tool_count", "must not be negative")).into());
        }
        Ok(Response::new(
            crate::service::session::heartbeat(&self.store, auth.id, status, req.tool_count, auth.within)
                .await?,
        ))
    }

    async fn end_session(
        &self,
        request: Request<EndSessionRequest>,
    ) -> Result<Response<EndSessionResponse>, Status> {
        let auth = self
            .auth
            .check_entity(&request, Need::Write, Entity::Session, "session_id", &request.get_ref().session_id)
            .await?;
        let mut req = request.into_inner();
        let status = match validate::enum_value::<SessionStatus>("status", req.status, true)? {
            SessionStatus::Unspecified | SessionStatus::Completed => SessionStatus::Completed,
            SessionStatus::Crashed => SessionStatus::Crashed,
            other => {
                return Err(Error::from(invalid(
                    "status",
                    format!("a session ends COMPLETED or CRASHED, not {other:?}"),
                ))
                .into());
            }
        };
        validate::optional("summary", &req.summary, limits::TEXT)?;
        validate::single_line("git_head", &req.git_head, limits::SHORT)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redactor = Redactor::default();
        redactor.field(&mut req.summary);
        let ctx = write_ctx("EndSession", &hash_view, req.write.as_ref(), redactor.count, &auth.who)?;
        Ok(Response::new(
            crate::service::session::end(&self.store, ctx, req, auth.id, status, auth.within).await?,
        ))
    }

    async fn resume_session(
        &self,
        request: Request<ResumeSessionRequest>,
    ) -> Result<Response<ResumeSessionResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let mut req = request.into_inner();
        validate::project("project", &req.project)?;
        // Canonical ids before anything is looked up by them (the store reads them inside
        // the request's project only).
        match &mut req.target {
            Some(resume_session_request::Target::SessionId(id)) => {
                *id = validate::uuid("session_id", id)?.to_string();
            }
            Some(resume_session_request::Target::CheckpointId(id)) => {
                *id = validate::uuid("checkpoint_id", id)?.to_string();
            }
            None => {}
        }
        let new_id = validate::new_id("new_session_id", &req.new_session_id)?;
        validate::enum_value::<AgentKind>("agent", req.agent, true)?;
        check_labels(&req.host, &req.user, &req.cwd, &req.branch, &req.agent_session_id)?;
        check_lease(req.lease_ttl_ms)?;
        let budget = brief_budget("brief_budget_chars", req.brief_budget_chars)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("ResumeSession", &hash_view, req.write.as_ref(), 0, &who)?;
        let reply = crate::service::resume::resume_with_brief(
            &self.store,
            &self.memory_cache,
            ctx,
            req,
            new_id,
            budget,
        )
        .await?;
        Ok(Response::new(reply))
    }
}

/// A brief budget: 0 means the default.
pub(crate) fn brief_budget(field: &str, value: i32) -> Result<usize, Error> {
    use crate::core::brief::{DEFAULT_BUDGET, MAX_BUDGET};
    match usize::try_from(value) {
        Ok(0) => Ok(DEFAULT_BUDGET),
        Ok(v) if v <= MAX_BUDGET => Ok(v),
        _ => Err(invalid(
            field,
            format!("{value} is outside 1..={MAX_BUDGET} characters (0 = default {DEFAULT_BUDGET})"),
        )
        .into()),
    }
}
