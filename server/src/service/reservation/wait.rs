//! Waiting for a reservation. The queue is rows in the database, handed on by the writes
//! that free what it waits for (a release, a session's end, a lapse ended by a write), on any
//! server instance; a waiting request follows its project's events as watchers do (the
//! watch machinery: in-process commits, Postgres NOTIFY) and reads its rows when
//! reservations change. It runs a write of its own only when something in its way runs out
//! (`settle_lapsed`, at that reservation's expiry, which no one else may write in time) and
//! when its wait ends (`give_up`), also when the caller goes away.

use std::sync::Arc;
use std::time::Duration;

use baton_proto::v1::{Event, EventKind, ReservationStatus, ReserveResponse, WriteResult};
use tokio::sync::broadcast;

use super::reserve::blocker_messages;
use super::{commit, lock, message, settled};
use crate::core::reservation::{Ask, Book, Row, Target};
use crate::core::time::now_us;
use crate::error::Result;
use crate::service::write;
use crate::store::{Store, WriteCtx};

/// Waits until the queued rows `ids` are granted (the reply has them) or the wait ends
/// (then they are ended and the reply names what is still in the way).
pub(super) async fn until_granted<S: Store>(
    store: &S,
    mut feed: broadcast::Receiver<Arc<Event>>,
    project: &str,
    session_id: &str,
    (ids, targets): (Vec<String>, Vec<Target>),
    deadline_us: i64,
    queued: WriteResult,
) -> Result<ReserveResponse> {
    let mut guard = GiveUp {
        store: Some(store.clone()),
        project: project.to_owned(),
        session_id: session_id.to_owned(),
        ids: ids.clone(),
        targets: targets.clone(),
    };
    loop {
        let rows = store.reservations_by_id(project.to_owned(), ids.clone()).await?;
        let now = now_us();
        if !rows.is_empty() && rows.iter().all(|r| r.is(ReservationStatus::Held) && r.expires_us > now) {
            guard.disarm();
            let reservations = rows.iter().map(|r| message(project, r, Some(now))).collect();
            return Ok(ReserveResponse {
                granted: true,
                reservations,
                result: Some(queued),
                ..Default::default()
            });
        }
        let still_waiting = rows.len() == ids.len() && rows.iter().all(|r| r.is(ReservationStatus::Waiting));
        if !still_waiting || now >= deadline_us {
            guard.disarm();
            return give_up(store, project, session_id, &ids, &targets).await;
        }
        let next_lapse = in_the_way(store, project, &rows, now).await?.iter().map(|r| r.expires_us).min();
        let wake_us = next_lapse.map_or(deadline_us, |l| l.min(deadline_us));
        let sleep = Duration::from_micros(u64::try_from(wake_us.saturating_sub(now)).unwrap_or(0));
        tokio::select! {
            () = tokio::time::sleep(sleep) => {
                if next_lapse.is_some_and(|l| l <= wake_us) && wake_us < deadline_us {
                    settle_lapsed(store, project).await?;
                }
            }
            () = changed(&mut feed) => {}
        }
    }
}

/// Returns once an event may have changed the project's reservations (or the feed lagged,
/// or carried a stand-in for a large event).
async fn changed(feed: &mut broadcast::Receiver<Arc<Event>>) {
    loop {
        match feed.recv().await {
            Ok(ev) if ev.kind == EventKind::ReservationsChanged as i32 || ev.kind == 0 => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            // The hub is shutting down: the caller's wait ends with the server.
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// The live rows of other sessions in the way of these waiting rows.
async fn in_the_way<S: Store>(store: &S, project: &str, mine: &[Row], now: i64) -> Result<Vec<Row>> {
    let live = store.live_reservations(project.to_owned()).await?;
    let Some(first) = mine.first() else { return Ok(Vec::new()) };
    let ask = Ask {
        session_id: first.session_id.clone(),
        request: first.request.clone(),
        targets: mine.iter().map(Row::target).collect(),
        branch: first.branch.clone(),
        reason: String::new(),
        holder: Vec::new(),
        steal: false,
        wait_us: 0,
    };
    let book = Book::new(live);
    let blockers = book.blockers(&ask, now);
    Ok(blockers
        .into_iter()
        .filter(|b| {
            let r = &book.rows[b.row];
            r.is(ReservationStatus::Held)
                || (r.created_revision, &r.request) < (first.created_revision, &first.request)
        })
        .map(|b| book.rows[b.row].clone())
        .collect())
}

/// A write that ends what ran out in a project and hands the queue on; nothing when nothing
/// ran out. The reaper runs it for every project with lapsed rows, so that watchers see
/// lapses as events.
pub(crate) async fn settle_lapsed<S: Store>(store: &S, project: &str) -> Result<bool> {
    let ctx = WriteCtx::default();
    let ran = write::run(store, lock(project, &ctx), ctx, |w, ctx| {
        Box::pin(async move {
            let (book, _, _) = settled(w, "", &[]).await?;
            let changed = commit(w, ctx, &book)?.is_some();
            if changed {
                w.finish(ctx, &ReserveResponse::default())?;
            }
            Ok(changed)
        })
    });
    ran.await?.done()
}

/// How long ended reservations are kept (so that a holder can be told how it lost one).
const KEEP_ENDED_US: i64 = 24 * 3600 * 1_000_000;

/// The reaper's pass: settles every project with lapsed reservations (their events tell
/// watchers and the web view), and removes ended rows older than a day. How many projects
/// changed.
pub(crate) async fn reap<S: Store>(store: &S) -> Result<usize> {
    let mut changed = 0;
    for project in store.projects_with_lapsed_reservations(now_us()).await? {
        if settle_lapsed(store, &project).await? {
            changed += 1;
        }
    }
    store.prune_ended_reservations(now_us().saturating_sub(KEEP_ENDED_US)).await?;
    Ok(changed)
}

/// Ends the waiting rows `ids` that still wait, and answers with what is in the way; rows
/// granted meanwhile are the answer instead.
async fn give_up<S: Store>(
    store: &S,
    project: &str,
    session_id: &str,
    ids: &[String],
    targets: &[Target],
) -> Result<ReserveResponse> {
    let ctx = WriteCtx::default();
    let (project_key, session, ids) = (project.to_owned(), session_id.to_owned(), ids.to_vec());
    let targets = targets.to_vec();
    let ran = write::run(store, lock(project, &ctx), ctx, move |w, ctx| {
        Box::pin(async move {
            // What it waited for: the rows in its way are read too, to name them.
            let (mut book, clock, _) = settled(w, &session, &targets).await?;
            let mine: Vec<usize> = (0..book.rows.len()).filter(|&i| ids.contains(&book.rows[i].id)).collect();
            if !mine.is_empty() && mine.iter().all(|&i| book.rows[i].is(ReservationStatus::Held)) {
                let reservations = mine.iter().map(|&i| message(&project_key, &book.rows[i], None)).collect();
                let committed = commit(w, ctx, &book)?;
                if committed.is_some() {
                    w.finish(ctx, &ReserveResponse::default())?;
                }
                return Ok(ReserveResponse { granted: true, reservations, ..Default::default() });
            }
            let waiting: Vec<Row> = mine.iter().map(|&i| book.rows[i].clone()).collect();
            let ask = Ask {
                session_id: session.clone(),
                request: waiting.first().map(|r| r.request.clone()).unwrap_or_default(),
                targets: waiting.iter().map(Row::target).collect(),
                branch: waiting.first().map(|r| r.branch.clone()).unwrap_or_default(),
                reason: String::new(),
                holder: Vec::new(),
                steal: false,
                wait_us: 0,
            };
            book.end_of(&session, ReservationStatus::Released, clock, |r| {
                ids.contains(&r.id) && r.is(ReservationStatus::Waiting)
            });
            book.settle(clock);
            let blockers = blocker_messages(&project_key, &book, &book.blockers(&ask, clock.now_us));
            let committed = commit(w, ctx, &book)?;
            let result =
                committed.as_ref().map(|e| WriteResult { revision: e.revision, ..Default::default() });
            if committed.is_some() {
                w.finish(ctx, &ReserveResponse::default())?;
            }
            Ok(ReserveResponse { granted: false, blockers, result, ..Default::default() })
        })
    });
    ran.await?.done()
}

/// Ends a wait whose caller went away (its request dropped) before it was answered.
struct GiveUp<S: Store> {
    store: Option<S>,
    project: String,
    session_id: String,
    ids: Vec<String>,
    targets: Vec<Target>,
}

impl<S: Store> GiveUp<S> {
    fn disarm(&mut self) {
        self.store = None;
    }
}

impl<S: Store> Drop for GiveUp<S> {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else { return };
        let (project, session_id, ids, targets) = (
            std::mem::take(&mut self.project),
            std::mem::take(&mut self.session_id),
            std::mem::take(&mut self.ids),
            std::mem::take(&mut self.targets),
        );
        tokio::spawn(async move {
            if let Err(e) = give_up(&store, &project, &session_id, &ids, &targets).await {
                tracing::warn!(%project, error = %e, "could not end a wait whose caller went away");
            }
        });
    }
}
