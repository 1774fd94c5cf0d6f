//! Release: a session ends reservations it holds (or waits for), by id, by target, or all;
//! the queue behind them moves on in the same write.

use baton_proto::v1::{ReleaseResponse, ReservationStatus};
use uuid::Uuid;

use super::{commit, lock, message, settled};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::reservation::Target;
use crate::error::Result;
use crate::service::write;
use crate::store::{Store, WriteCtx};

/// A Release request, validated.
#[derive(Debug, Clone)]
pub struct Release {
    pub project: String,
    pub session_id: Uuid,
    /// None of ids and targets: every reservation and wait of the session.
    pub ids: Vec<String>,
    pub targets: Vec<Target>,
}

/// Release.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn release<S: Store>(store: &S, ctx: WriteCtx, req: Release) -> Result<ReleaseResponse> {
    let lock = lock(&req.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let session = req.session_id.to_string();
            let (mut book, clock, _) = settled(w, &session, &req.targets).await?;
            let all = req.ids.is_empty() && req.targets.is_empty();
            let released = book.end_of(&session, ReservationStatus::Released, clock, |r| {
                all || req.ids.contains(&r.id) || req.targets.contains(&r.target())
            });
            book.settle(clock);
            let granted: Vec<_> =
                book.granted_from_queue(clock).into_iter().map(|r| message(&req.project, r, None)).collect();
            let Some(event) = commit(w, ctx, &book)? else {
                return Ok(ReleaseResponse::default());
            };
            let reply = ReleaseResponse {
                released: released.iter().map(|&i| message(&req.project, &book.rows[i], None)).collect(),
                granted,
                result: Some(conflict::result(event.revision, Decision::Applied, None, ctx.writer())),
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
