//! `EventService`: the change log, live watch and conflicts.

use std::pin::Pin;
use std::sync::Arc;

use baton_proto::v1::event_service_server::EventService;
use baton_proto::v1::{
    Event, EventKind, ListConflictsRequest, ListConflictsResponse, ListEventsRequest, ListEventsResponse,
    WatchRequest,
};
use futures::{Stream, StreamExt as _};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::Api;
use crate::auth::Principal;
use crate::core::access::Need;
use crate::core::validate;
use crate::error::Error;
use crate::events::{Delivery, Watch, watch};
use crate::store::Store;

fn check_kinds(kinds: &[i32]) -> Result<(), Error> {
    for k in kinds {
        validate::enum_value::<EventKind>("kinds", *k, false)?;
    }
    Ok(())
}

fn check_cursor(field: &str, revision: i64) -> Result<(), Error> {
    if revision < 0 {
        return Err(
            validate::invalid(field, format!("{revision} is negative; 0 means from the beginning")).into()
        );
    }
    Ok(())
}

#[tonic::async_trait]
impl<S: Store> EventService for Api<S> {
    async fn list_events(
        &self,
        request: Request<ListEventsRequest>,
    ) -> Result<Response<ListEventsResponse>, Status> {
        self.auth.check(request.metadata(), Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        check_cursor("after_revision", req.after_revision)?;
        check_kinds(&req.kinds)?;
        let limit = validate::page_size("limit", req.limit, 1000, 10_000)?;
        Ok(Response::new(self.store.list_events(req.project, req.after_revision, limit, req.kinds).await?))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<Event, Status>> + Send + 'static>>;

    async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let who = self.auth.principal(request.metadata()).await?;
        let (key, label) = match &who {
            Principal::Token { name, .. } => (format!("token:{name}"), format!("token {name:?}")),
            // Open hub: no tokens to tell callers apart, so each client address gets the cap.
            Principal::Open => {
                let ip = request.remote_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                (format!("open:{ip}"), format!("client {ip}"))
            }
        };
        let req = request.into_inner();
        who.allow(Need::Read)?;
        if req.cursors.is_empty() {
            // Every project the token may read: from now on, plus projects created later.
            check_kinds(&req.kinds)?;
            let slot = self.watch_slots.acquire(&key, &label)?;
            let scope = match &who {
                Principal::Token { project, .. } => project.clone(),
                Principal::Open => None,
            };
            let rx = crate::events::watch_all(
                self.store.clone(),
                self.hub.clone(),
                scope,
                req.kinds.into_iter().collect(),
                self.shutdown.clone(),
                self.limits.max_watch_projects,
                self.hub.poll(),
            )
            .await?;
            return Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(move |delivery| {
                let _held = &slot;
                unshare(delivery)
            }))));
        }
        validate::count("cursors", req.cursors.len(), self.limits.max_watch_projects)?;
        let mut cursors = Vec::with_capacity(req.cursors.len());
        for c in &req.cursors {
            validate::project("cursors.project", &c.project)?;
            who.scope(&c.project)?;
            check_cursor("cursors.after_revision", c.after_revision)?;
            if cursors.iter().any(|(p, _): &(String, i64)| p == &c.project) {
                return Err(Error::from(validate::invalid(
                    "cursors",
                    format!("project {:?} is named twice", c.project),
                ))
                .into());
            }
            cursors.push((c.project.clone(), c.after_revision));
        }
        check_kinds(&req.kinds)?;
        let request = Watch { cursors, kinds: req.kinds.into_iter().collect() };
        let slot = self.watch_slots.acquire(&key, &label)?;
        let rx = watch(self.store.clone(), &self.hub, request, self.shutdown.clone(), 256);
        // The slot lives as long as the stream: dropped when the client goes away.
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(move |delivery| {
            let _held = &slot;
            unshare(delivery)
        }))))
    }

    async fn list_conflicts(
        &self,
        request: Request<ListConflictsRequest>,
    ) -> Result<Response<ListConflictsResponse>, Status> {
        self.auth.check(request.metadata(), Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        check_cursor("after_revision", req.after_revision)?;
        let limit = validate::page_size("limit", req.limit, 1000, 10_000)?;
        Ok(Response::new(self.store.list_conflicts(req.project, req.after_revision, limit).await?))
    }
}

/// This stream's own copy of a delivered event (the encoder takes it by value), made as it is
/// encoded: a clone while other watchers still hold the event, a move for the last one.
fn unshare(delivery: Delivery) -> Result<Event, Status> {
    delivery.map(Arc::unwrap_or_clone).map_err(|status| *status)
}
