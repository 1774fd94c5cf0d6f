//! `AdminService`: retention, event-log compaction, purges and tokens (admin tokens only),
//! and per-project stats (any token, within its scope).

use baton_proto::v1::admin_service_server::AdminService;
use baton_proto::v1::{
    AccessToken, Actor, CompactEventsRequest, CompactEventsResponse, CreateTokenRequest, CreateTokenResponse,
    GetStatsRequest, GetStatsResponse, ListTokensRequest, ListTokensResponse, PruneRequest, PruneResponse,
    PurgeRequest, PurgeResponse, RevokeTokenRequest, RevokeTokenResponse,
};
use tonic::{Request, Response, Status};

use super::Api;
use crate::core::access::Need;
use crate::core::validate::{self, invalid};
use crate::error::Error;
use crate::jobs::retention::{self, Policy};
use crate::store::Store;
use crate::store::model::{TokenKey, TokenWrite};

fn actor(who: &crate::auth::Principal) -> Actor {
    Actor { token: who.name().to_owned(), ..Actor::default() }
}

#[tonic::async_trait]
impl<S: Store> AdminService for Api<S> {
    async fn prune(&self, request: Request<PruneRequest>) -> Result<Response<PruneResponse>, Status> {
        let who = self.auth.principal(&request).await?;
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
        let item_log_days = match req.item_log_days {
            None => self.limits.retention.item_log_days,
            Some(d) => u32::try_from(d).map_err(|_| {
                Error::from(invalid("item_log_days", format!("{d} is negative; use 0 (keep) or more days")))
            })?,
        };
        let commit_link_days = match req.commit_link_days {
            None => self.limits.retention.commit_link_days,
            Some(d) => u32::try_from(d).map_err(|_| {
                Error::from(invalid(
                    "commit_link_days",
                    format!("{d} is negative; use 0 (keep) or more days"),
                ))
            })?,
        };
        let policy = Policy { keep_days, keep_ancestors, item_log_days, commit_link_days };
        let projects = retention::prune(&self.store, project, policy, req.dry_run, actor(&who)).await?;
        Ok(Response::new(PruneResponse { projects, dry_run: req.dry_run }))
    }

    async fn compact_events(
        &self,
        request: Request<CompactEventsRequest>,
    ) -> Result<Response<CompactEventsResponse>, Status> {
        let who = self.auth.check(&request, Need::Admin, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        Ok(Response::new(
            crate::service::retention::compact(&self.store, req.project, req.below_revision, actor(&who))
                .await?,
        ))
    }

    async fn purge(&self, request: Request<PurgeRequest>) -> Result<Response<PurgeResponse>, Status> {
        let who = self.auth.check(&request, Need::Admin, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        check_purge_value(&req.value)?;
        Ok(Response::new(
            crate::service::purge::purge(&self.store, req.project, req.value, req.dry_run, actor(&who))
                .await?,
        ))
    }

    async fn create_token(
        &self,
        request: Request<CreateTokenRequest>,
    ) -> Result<Response<CreateTokenResponse>, Status> {
        let who = self.auth.principal(&request).await?;
        who.allow(Need::Admin)?;
        who.all_projects()?;
        let req = request.into_inner();
        validate::single_line("name", &req.name, 128)?;
        if req.name.trim().is_empty() {
            return Err(Error::from(invalid("name", "is required: who or what uses the token")).into());
        }
        if crate::core::access::Role::parse(&req.role).is_none() {
            return Err(Error::from(invalid(
                "role",
                format!("{:?} is not admin, writer or reader", req.role),
            ))
            .into());
        }
        let project = (!req.project.is_empty()).then_some(req.project);
        if let Some(p) = &project {
            validate::project("project", p)?;
        }
        let secret = crate::core::access::new_secret();
        let hash = crate::core::access::hash_secret(&secret);
        let row = crate::service::tokens::create(&self.store, req.name, req.role, project, hash).await?;
        tracing::info!(token = %row.name, role = %row.role, by = %who.name(), "token created");
        Ok(Response::new(CreateTokenResponse { token: Some(token_proto(row)), secret }))
    }

    async fn list_tokens(
        &self,
        request: Request<ListTokensRequest>,
    ) -> Result<Response<ListTokensResponse>, Status> {
        let who = self.auth.principal(&request).await?;
        who.allow(Need::Admin)?;
        who.all_projects()?;
        let tokens = self.store.tokens(TokenKey::All).await?.into_iter().map(token_proto).collect();
        Ok(Response::new(ListTokensResponse { tokens }))
    }

    async fn revoke_token(
        &self,
        request: Request<RevokeTokenRequest>,
    ) -> Result<Response<RevokeTokenResponse>, Status> {
        let who = self.auth.principal(&request).await?;
        who.allow(Need::Admin)?;
        who.all_projects()?;
        let name = request.into_inner().name;
        let revoke = TokenWrite::Revoke { name: name.clone(), now_us: crate::core::time::now_us() };
        if !self.store.write_token(revoke).await? {
            return Err(Error::NotFound(format!("name: no active token named {name:?}")).into());
        }
        tracing::info!(token = %name, by = %who.name(), "token revoked");
        Ok(Response::new(RevokeTokenResponse {}))
    }

    async fn get_stats(
        &self,
        request: Request<GetStatsRequest>,
    ) -> Result<Response<GetStatsResponse>, Status> {
        let who = self.auth.principal(&request).await?;
        who.allow(Need::Read)?;
        let req = request.into_inner();
        let named = !req.project.is_empty();
        let projects = if named {
            validate::project("project", &req.project)?;
            who.scope(&req.project)?;
            vec![req.project]
        } else {
            match &who {
                crate::auth::Principal::Token { project: Some(p), .. } => vec![p.clone()],
                _ => self.store.projects(None).await?.into_iter().map(|p| p.key).collect(),
            }
        };
        let mut out = Vec::with_capacity(projects.len());
        for p in projects {
            match self.store.project_stats(p.clone(), req.sessions_only).await? {
                Some(counts) => out.push(stats(p, counts)),
                None if named => return Err(Error::NotFound(format!("project: no project {p:?}")).into()),
                // A scoped token's project that has no data yet.
                None => {}
            }
        }
        Ok(Response::new(GetStatsResponse { projects: out }))
    }
}

/// A project's counts as GetStats gives them.
fn stats(project: String, c: crate::store::model::ProjectCounts) -> baton_proto::v1::ProjectStats {
    let name = |status: i32| {
        let name = baton_proto::v1::SessionStatus::try_from(status).map_or("unknown", |s| s.as_str_name());
        name.trim_start_matches("SESSION_STATUS_").to_ascii_lowercase()
    };
    baton_proto::v1::ProjectStats {
        project,
        head_revision: c.head_revision,
        sessions: c.statuses.into_iter().map(|s| (name(s.status), s.count)).collect(),
        checkpoints: c.checkpoints,
        checkpoint_bytes: c.checkpoint_bytes,
        memory_entries: c.memory_entries,
        events: c.events,
        oldest_kept_revision: c.events_from,
        chunks: c.chunks,
        chunk_bytes: c.chunk_bytes,
        item_logs: c.item_logs,
        items: c.items,
        item_bytes: c.item_bytes,
    }
}

fn token_proto(t: crate::store::TokenRow) -> AccessToken {
    let at = |us: i64| Some(crate::store::rows::ts(us));
    AccessToken {
        name: t.name,
        role: t.role,
        project: t.project.unwrap_or_default(),
        created_at: at(t.created_us),
        last_used_at: t.last_used_us.and_then(at),
        revoked_at: t.revoked_us.and_then(at),
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
