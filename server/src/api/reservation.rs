//! `ReservationService`: requests checked (project, session id, paths and tasks canonical,
//! sizes) before anything is read, then `service::reservation`.

use baton_proto::v1::reservation_service_server::ReservationService;
use baton_proto::v1::{
    ListReservationsRequest, ListReservationsResponse, ReleaseRequest, ReleaseResponse,
    RenewReservationsRequest, RenewReservationsResponse, ReservationEnforcement, ReserveRequest,
    ReserveResponse, SetReservationSettingsRequest, SetReservationSettingsResponse,
};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::auth::Principal;
use crate::core::access::{Need, Role};
use crate::core::page;
use crate::core::reservation::{
    self as rules, MAX_REASON, MAX_TARGETS, MAX_TTL_SECONDS, MAX_WAIT_SECONDS, MIN_TTL_SECONDS,
};
use crate::core::validate::{self, invalid, limits};
use crate::error::Error;
use crate::service::reservation::{self, Listing, Release, ReserveAsk};
use crate::store::Store;

/// Ids the caller names (reservations, known ids), at most.
const MAX_IDS: usize = 1000;

fn ids(field: &str, raw: &[String]) -> Result<Vec<String>, Error> {
    validate::count(field, raw.len(), MAX_IDS)?;
    raw.iter()
        .enumerate()
        .map(|(i, id)| Ok(validate::uuid(&format!("{field}[{i}]"), id)?.to_string()))
        .collect()
}

fn branch(value: &str) -> Result<(), Error> {
    Ok(validate::single_line("branch", value, limits::SHORT)?)
}

#[tonic::async_trait]
impl<S: Store> ReservationService for Api<S> {
    async fn reserve(&self, request: Request<ReserveRequest>) -> Result<Response<ReserveResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let session_id = validate::uuid("session_id", &req.session_id)?;
        let targets = rules::targets(&req.paths, &req.tasks)?;
        if targets.is_empty() {
            return Err(Error::from(invalid(
                "paths",
                format!("and tasks are empty: name 1..={MAX_TARGETS} paths or task keys to reserve"),
            ))
            .into());
        }
        branch(&req.branch)?;
        validate::optional("reason", &req.reason, MAX_REASON)?;
        if req.wait_seconds > MAX_WAIT_SECONDS {
            return Err(Error::from(invalid(
                "wait_seconds",
                format!("{} is over {MAX_WAIT_SECONDS}: wait again after a wait runs out", req.wait_seconds),
            ))
            .into());
        }
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let (reason, redacted) = crate::core::redact::redact(&req.reason);
        let reason = reason.into_owned();
        let ctx = write_ctx("Reserve", &hash_view, req.write.as_ref(), redacted, &who)?;
        let ask = ReserveAsk {
            project: req.project,
            session_id,
            targets,
            branch: req.branch,
            reason,
            steal: req.steal,
            wait_seconds: req.wait_seconds,
            admin: is_admin(&who),
            max_live: self.limits.max_reservations,
        };
        // A request that may wait follows the project's events from before its write.
        let feed = if ask.wait_seconds > 0 { Some(self.hub.subscribe(&ask.project).await) } else { None };
        Ok(Response::new(reservation::reserve(&self.store, feed, ctx, ask).await?))
    }

    async fn release(&self, request: Request<ReleaseRequest>) -> Result<Response<ReleaseResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let session_id = validate::uuid("session_id", &req.session_id)?;
        let ids = ids("ids", &req.ids)?;
        let targets = rules::targets(&req.paths, &req.tasks)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("Release", &hash_view, req.write.as_ref(), 0, &who)?;
        let release = Release { project: req.project, session_id, ids, targets };
        Ok(Response::new(reservation::release(&self.store, ctx, release).await?))
    }

    async fn renew_reservations(
        &self,
        request: Request<RenewReservationsRequest>,
    ) -> Result<Response<RenewReservationsResponse>, Status> {
        self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let session_id = validate::uuid("session_id", &req.session_id)?.to_string();
        let known = ids("known_ids", &req.known_ids)?;
        let max_live = self.limits.max_reservations;
        Ok(Response::new(reservation::renew(&self.store, req.project, session_id, known, max_live).await?))
    }

    async fn list_reservations(
        &self,
        request: Request<ListReservationsRequest>,
    ) -> Result<Response<ListReservationsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let targets = rules::targets(&req.paths, &req.tasks)?;
        branch(&req.branch)?;
        let session_id = if req.session_id.is_empty() {
            None
        } else {
            Some(validate::uuid("session_id", &req.session_id)?.to_string())
        };
        let page_size = validate::page_size("page_size", req.page_size, 200, 1000)?;
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(page::position("page_token", &req.page_token)?)
        };
        let listing = Listing {
            project: req.project,
            targets,
            branch: req.branch,
            session_id,
            page_size,
            after,
            max_live: self.limits.max_reservations,
        };
        Ok(Response::new(reservation::list(&self.store, listing).await?))
    }

    async fn set_reservation_settings(
        &self,
        request: Request<SetReservationSettingsRequest>,
    ) -> Result<Response<SetReservationSettingsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        if let Some(ttl) = req.ttl_seconds
            && !(MIN_TTL_SECONDS..=MAX_TTL_SECONDS).contains(&ttl)
        {
            return Err(Error::from(invalid(
                "ttl_seconds",
                format!("{ttl} is outside {MIN_TTL_SECONDS}..={MAX_TTL_SECONDS} (seconds)"),
            ))
            .into());
        }
        validate::enum_value::<ReservationEnforcement>("enforcement", req.enforcement, true)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let ctx = write_ctx("SetReservationSettings", &hash_view, req.write.as_ref(), 0, &who)?;
        let max_live = self.limits.max_reservations;
        Ok(Response::new(reservation::set_settings(&self.store, ctx, req, max_live).await?))
    }
}

/// Whether a caller may take over anyone's reservation: an admin token, or anyone on an open
/// hub (no tokens to tell callers apart).
fn is_admin(who: &Principal) -> bool {
    match who {
        Principal::Open => true,
        Principal::Token { role, .. } => *role == Role::Admin,
    }
}
