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
use crate::auth::{Auth, Caller, Principal, WATCH_RECHECK};
use crate::core::access::Need;
use crate::core::page;
use crate::core::validate;
use crate::error::Error;
use crate::events::{Delivery, Watch, watch};
use crate::store::Store;

/// Kinds to filter by: known values, each once. A list longer than there are kinds is a
/// mistake (or an attempt to go past the database's parameter limit).
fn check_kinds(kinds: &[i32]) -> Result<(), Error> {
    validate::count("kinds", kinds.len(), MAX_FILTER_VALUES)?;
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

/// Values one filter field may list.
const MAX_FILTER_VALUES: usize = 64;

#[tonic::async_trait]
impl<S: Store> EventService for Api<S> {
    async fn list_events(
        &self,
        request: Request<ListEventsRequest>,
    ) -> Result<Response<ListEventsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let after = after_of(req.after_revision, &req.page_token)?;
        check_kinds(&req.kinds)?;
        let mut kinds = req.kinds;
        kinds.sort_unstable();
        kinds.dedup();
        let limit = validate::page_size("limit", req.limit, 1000, 10_000)?;
        Ok(Response::new(
            crate::service::log::list_events(&self.store, req.project, after, limit, kinds).await?,
        ))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<Event, Status>> + Send + 'static>>;

    async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let who = self.auth.principal(&request).await?;
        let caller = Caller::of(&request);
        let (key, label) = super::slot_key(&who, &request);
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
            let stream = ReceiverStream::new(rx).map(move |delivery| {
                let _held = &slot;
                unshare(delivery)
            });
            return Ok(Response::new(Box::pin(until_refused(
                self.auth.clone(),
                caller,
                who.clone(),
                stream,
            ))));
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
        let rx = watch(&self.store, &self.hub, &request, &self.shutdown, 256);
        // The slot lives as long as the stream: dropped when the client goes away.
        let stream = ReceiverStream::new(rx).map(move |delivery| {
            let _held = &slot;
            unshare(delivery)
        });
        Ok(Response::new(Box::pin(until_refused(self.auth.clone(), caller, who.clone(), stream))))
    }

    async fn list_conflicts(
        &self,
        request: Request<ListConflictsRequest>,
    ) -> Result<Response<ListConflictsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let after = after_of(req.after_revision, &req.page_token)?;
        let limit = validate::page_size("limit", req.limit, 1000, 10_000)?;
        Ok(Response::new(crate::service::log::list_conflicts(&self.store, req.project, after, limit).await?))
    }
}

/// Where a log's page starts: after the page token's revision, else after `after_revision`.
fn after_of(after_revision: i64, page_token: &str) -> Result<i64, Error> {
    if page_token.is_empty() {
        check_cursor("after_revision", after_revision)?;
        return Ok(after_revision);
    }
    let after = page::position("page_token", page_token)?;
    check_cursor("page_token", after)?;
    Ok(after)
}

/// A watch stream that ends with the caller's authentication error once the caller would be
/// refused a new request (its token revoked, or the hub closed by a first token): checked
/// every `WATCH_RECHECK` against the same cache as every request, so a stream stops within
/// the window a unary call does. Other errors (the database unreachable for a moment) do not
/// end it.
fn until_refused<S: Store>(
    auth: Auth<S>,
    caller: Caller,
    started: Principal,
    events: impl Stream<Item = Result<Event, Status>> + Send + 'static,
) -> impl Stream<Item = Result<Event, Status>> + Send + 'static {
    let mut every = tokio::time::interval(WATCH_RECHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let events = Box::pin(events);
    futures::stream::unfold(Some((events, every, auth, caller, started)), |state| async move {
        let (mut events, mut every, auth, caller, started) = state?;
        loop {
            tokio::select! {
                event = events.next() => return event.map(|e| (e, Some((events, every, auth, caller, started)))),
                _ = every.tick() => match auth.identify(&caller, false).await {
                    Err(e @ Error::Unauthenticated(_)) => return Some((Err(Status::from(e)), None)),
                    Err(e) => tracing::debug!(error = %e, "watch: could not check the caller again"),
                    // Still the caller the stream was opened for (an anonymous stream of an
                    // open hub does not become a token's).
                    Ok((now, _)) if !now.same_as(&started) => {
                        let e = Error::Unauthenticated(
                            "this hub's access changed since the stream was opened; open it again with a token".into(),
                        );
                        return Some((Err(Status::from(e)), None));
                    }
                    Ok(_) => {}
                },
            }
        }
    })
}

/// This stream's own copy of a delivered event (the encoder takes it by value), made as it is
/// encoded: a clone while other watchers still hold the event, a move for the last one.
fn unshare(delivery: Delivery) -> Result<Event, Status> {
    delivery.map(|queued| Arc::unwrap_or_clone(queued.event)).map_err(|status| *status)
}
