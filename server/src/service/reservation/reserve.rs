//! Reserve: one write decides (`Book::ask`): granted, queued, or refused with the blockers
//! named. A queued request then waits (`wait::until_granted`) for the writes that hand the
//! queue on.

use baton_proto::v1::{Actor, Blocker, ReserveResponse, SessionStatus};
use uuid::Uuid;

use super::{commit, lock, message, settled, wait};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::reservation::{Ask, Book, Outcome, Target};
use crate::error::{Error, Result};
use crate::service::write::{self, Write};
use crate::store::rows::{decode_actor, encode_actor};
use crate::store::{Store, WriteCtx, WriteTx};

/// A Reserve request, validated.
#[derive(Debug, Clone)]
pub struct ReserveAsk {
    pub project: String,
    pub session_id: Uuid,
    pub targets: Vec<Target>,
    pub branch: String,
    pub reason: String,
    pub steal: bool,
    pub wait_seconds: u32,
    /// The caller's token is an admin's (or the hub is open): it may take over anyone's.
    pub admin: bool,
    /// Live reservations the project may have.
    pub max_live: usize,
}

/// A project's live events (`events::Hub::subscribe`).
pub type Feed = tokio::sync::broadcast::Receiver<std::sync::Arc<baton_proto::v1::Event>>;

/// What the write decided.
enum Decided {
    Done(ReserveResponse),
    Queued { ids: Vec<String>, targets: Vec<Target>, deadline_us: i64, result: baton_proto::v1::WriteResult },
}

/// Reserve.
#[tracing::instrument(level = "debug", skip_all, fields(project = %ask.project))]
/// `feed` is the project's live events, subscribed before this write (so that no write that
/// hands the queue on after it is missed): a request that may wait needs it.
pub async fn reserve<S: Store>(
    store: &S,
    feed: Option<Feed>,
    ctx: WriteCtx,
    ask: ReserveAsk,
) -> Result<ReserveResponse> {
    let lock = lock(&ask.project, &ctx);
    let project = ask.project.clone();
    let session_id = ask.session_id.to_string();
    let ran = write::run(store, lock, ctx, move |w, ctx| Box::pin(async move { decide(w, ctx, &ask).await }));
    let decided = match ran.await? {
        write::Ran::Done(d) => d,
        write::Ran::Replay(bytes) => {
            return write::replayed::<ReserveResponse>(&bytes, |r| r.result.as_mut());
        }
    };
    match (decided, feed) {
        (Decided::Done(reply), _) => Ok(reply),
        (Decided::Queued { ids, targets, deadline_us, result }, Some(feed)) => {
            wait::until_granted(store, feed, &project, &session_id, (ids, targets), deadline_us, result).await
        }
        (Decided::Queued { .. }, None) => Err(Error::internal("a request that may not wait was queued")),
    }
}

async fn decide<T: WriteTx + crate::store::reservations::ReservationTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    ask: &ReserveAsk,
) -> Result<Decided> {
    let id = ask.session_id.to_string();
    let Some(session) = w.session(&id).await? else {
        return Err(Error::NotFound(format!(
            "session_id: no session {id} in project {:?}; reserve for a session of this project",
            ask.project
        )));
    };
    let status = session.status();
    if !matches!(status, SessionStatus::Initializing | SessionStatus::Active | SessionStatus::Idle) {
        return Err(Error::FailedPrecondition(format!(
            "session {id} is {}; reservations are held by live sessions: start or resume one",
            crate::core::status::name(status)
        )));
    }
    let (mut book, clock, _) = settled(w, &id, &ask.targets).await?;
    let holder = super::holder(ctx, session.agent, &session.host, &session.user_name, &id);
    let core_ask = Ask {
        session_id: id.clone(),
        request: Uuid::now_v7().to_string(),
        targets: ask.targets.clone(),
        branch: ask.branch.clone(),
        reason: ask.reason.clone(),
        holder: encode_actor(&holder),
        steal: ask.steal,
        wait_us: i64::from(ask.wait_seconds) * 1_000_000,
    };
    if ask.steal && !ask.admin {
        may_take_over(&book, &core_ask, &holder, clock.now_us)?;
    }
    let outcome = book.ask(&core_ask, clock, &mut || Uuid::now_v7().to_string());
    if !matches!(outcome, Outcome::Blocked(_)) && book.live(clock.now_us) > ask.max_live {
        return Err(Error::ResourceExhausted(format!(
            "project {:?} would have {} live reservations (held and waiting) with this request; this server \
             allows at most {} per project (--max-reservations): release some (baton reservations, baton \
             release) and retry",
            ask.project,
            book.live(clock.now_us),
            ask.max_live
        )));
    }
    let committed = commit(w, ctx, &book)?;
    let revision = committed.as_ref().map_or(0, |e| e.revision);
    let result = if committed.is_some() {
        conflict::result(revision, Decision::Applied, None, ctx.writer())
    } else {
        baton_proto::v1::WriteResult::default()
    };
    answer(w, ctx, &book, outcome, committed.is_some(), result, &ask.project)
}

/// The reply of a decided request, the write finished as it needs.
fn answer<T: WriteTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    book: &Book,
    outcome: Outcome,
    committed: bool,
    result: baton_proto::v1::WriteResult,
    project: &str,
) -> Result<Decided> {
    let messages = |rows: &[usize]| rows.iter().map(|&i| message(project, &book.rows[i], None)).collect();
    match outcome {
        Outcome::Granted { rows, taken_over } => {
            let reply = ReserveResponse {
                granted: true,
                reservations: messages(&rows),
                blockers: Vec::new(),
                taken_over: messages(&taken_over),
                result: Some(result),
            };
            w.finish(ctx, &reply)?;
            Ok(Decided::Done(reply))
        }
        Outcome::Blocked(blockers) => {
            let reply = ReserveResponse {
                granted: false,
                reservations: Vec::new(),
                blockers: blocker_messages(project, book, &blockers),
                taken_over: Vec::new(),
                result: Some(result),
            };
            // A refusal is not kept for the request id: a retry asks again. What the write
            // settled on the way (lapsed reservations) is kept.
            if committed {
                w.finish(&without_request(ctx), &reply)?;
            }
            Ok(Decided::Done(reply))
        }
        Outcome::Queued { rows, .. } => {
            let ids = rows.iter().map(|&i| book.rows[i].id.clone()).collect();
            let deadline_us = rows.first().map_or(0, |&i| book.rows[i].expires_us);
            let targets = rows.iter().map(|&i| book.rows[i].target()).collect();
            w.finish(&without_request(ctx), &ReserveResponse::default())?;
            Ok(Decided::Queued { ids, targets, deadline_us, result })
        }
    }
}

/// PERMISSION_DENIED unless every holder a steal takes over is the caller's own user with
/// the caller's token.
fn may_take_over(book: &Book, ask: &Ask, holder: &Actor, now_us: i64) -> Result<()> {
    for b in book.blockers(ask, now_us) {
        let r = &book.rows[b.row];
        let theirs = decode_actor(&r.holder);
        if theirs.token != holder.token || theirs.user != holder.user {
            return Err(Error::PermissionDenied(format!(
                "{} is held by session {} of user {:?} (token {:?}); only the same user with the same token, \
                 or an admin token, may take it over: ask them to release it, or wait",
                b.requested.text(),
                r.session_id,
                theirs.user,
                theirs.token
            )));
        }
    }
    Ok(())
}

/// A context whose reply is not kept for its request id.
fn without_request(ctx: &WriteCtx) -> WriteCtx {
    WriteCtx { request_id: None, ..ctx.clone() }
}

/// The blockers as replies name them.
pub(super) fn blocker_messages(
    project: &str,
    book: &Book,
    blockers: &[crate::core::reservation::Blocked],
) -> Vec<Blocker> {
    blockers
        .iter()
        .map(|b| Blocker {
            reservation: Some(message(project, &book.rows[b.row], None)),
            requested: b.requested.text().to_owned(),
        })
        .collect()
}
