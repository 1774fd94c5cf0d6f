//! ReservationService: who is working on what. Every change is a write of the project
//! (`write::run`): it reads the project's live reservations under the lock, lets
//! `core::reservation` settle what ran out and hand the queue on, decides, and emits one
//! EVENT_KIND_RESERVATIONS_CHANGED event with every reservation it changed. Sessions that
//! end take theirs with them (`end_with_session`, `hand_over`); renewals are liveness
//! (`renew`), not writes.

mod list;
mod release;
mod renew;
mod reserve;
mod settings;
mod wait;

pub use list::{Listing, list};
pub use release::{Release, release};
pub use renew::renew;
pub use reserve::{Feed, ReserveAsk, reserve};
pub use settings::set_settings;
pub(crate) use wait::reap;

use baton_proto::v1::{
    Event, EventKind, Reservation, ReservationEnforcement, ReservationSettings, ReservationStatus,
    ReservationsChange,
};

use super::write::{Write, event};
use crate::core::reservation::{Book, Clock, DEFAULT_TTL_SECONDS, Row, Target};
use crate::core::time::ts;
use crate::error::Result;
use crate::store::model::{Change, Lock, ReservationChange, ReservationSettingsRow};
use crate::store::reservations::{Focus, ReservationTx};
use crate::store::rows::decode_actor;
use crate::store::{WriteCtx, WriteTx};

/// The holder a session's reservations name: its agent, host and user, the writer's token.
fn holder(ctx: &WriteCtx, agent: i32, host: &str, user: &str, session_id: &str) -> baton_proto::v1::Actor {
    baton_proto::v1::Actor {
        token: ctx.actor.token.clone(),
        agent,
        host: host.to_owned(),
        user: user.to_owned(),
        session_id: session_id.to_owned(),
    }
}

/// The lock of a reservation write: the project's, nothing read first.
fn lock(project: &str, ctx: &WriteCtx) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: None,
        rewrites_log: false,
    }
}

/// A project's settings as replies show them (the defaults when it has no row).
pub(crate) fn settings_message(row: Option<&ReservationSettingsRow>, max_live: usize) -> ReservationSettings {
    let max_live = u32::try_from(max_live).unwrap_or(u32::MAX);
    match row {
        Some(r) => ReservationSettings {
            ttl_seconds: u32::try_from(r.ttl_seconds).unwrap_or(DEFAULT_TTL_SECONDS),
            enforcement: i32::try_from(r.enforcement).unwrap_or(ReservationEnforcement::Warn as i32),
            auto_reserve: r.auto_reserve != 0,
            max_live,
        },
        None => ReservationSettings {
            ttl_seconds: DEFAULT_TTL_SECONDS,
            enforcement: ReservationEnforcement::Warn as i32,
            auto_reserve: false,
            max_live,
        },
    }
}

/// A project's time to live (µs).
fn ttl_us(row: Option<&ReservationSettingsRow>) -> i64 {
    row.map_or(i64::from(DEFAULT_TTL_SECONDS), |r| r.ttl_seconds).saturating_mul(1_000_000)
}

/// A reservation as replies and events show it. A row whose time ran out before a write
/// ended it is shown as it will end (`now_us`: the reader's clock; `None`: as stored).
pub(crate) fn message(project: &str, row: &Row, now_us: Option<i64>) -> Reservation {
    let lapsed = now_us.is_some_and(|now| row.expires_us <= now);
    let status = match ReservationStatus::try_from(i32::try_from(row.status).unwrap_or_default()) {
        Ok(ReservationStatus::Held) if lapsed => ReservationStatus::Expired,
        Ok(ReservationStatus::Waiting) if lapsed => ReservationStatus::WaitEnded,
        Ok(s) => s,
        Err(_) => ReservationStatus::Unspecified,
    };
    let target = row.target();
    let (path, task) = match target {
        crate::core::reservation::Target::Path(p) => (p, String::new()),
        crate::core::reservation::Target::Task(t) => (String::new(), t),
    };
    let at = |us: i64| (us > 0).then(|| ts(us));
    Reservation {
        id: row.id.clone(),
        project: project.to_owned(),
        session_id: row.session_id.clone(),
        path,
        task,
        branch: row.branch.clone(),
        reason: row.reason.clone(),
        status: status as i32,
        holder: Some(decode_actor(&row.holder)),
        created_at: at(row.created_us),
        granted_at: at(row.granted_us),
        expires_at: at(row.expires_us),
        ended_at: at(row.ended_us),
        ended_by_session_id: row.ended_by.clone(),
        revision: row.revision,
    }
}

/// The rows a write needs (`ReservationTx::relevant_reservations`: those of `session`, those
/// overlapping `targets`, those that ran out, all while anyone waits) and the settings, read
/// under the write's lock, with what ran out ended and the queue handed on (`Book::settle`).
async fn settled<T: WriteTx + ReservationTx>(
    w: &mut Write<T>,
    session: &str,
    targets: &[Target],
) -> Result<(Book, Clock, Option<ReservationSettingsRow>)> {
    let settings = w.tx().reservation_settings().await?;
    let (paths, tasks) = crate::core::reservation::split(targets);
    let focus = Focus { now_us: w.now_us, session_id: session.to_owned(), paths, tasks };
    let relevant = w.tx().relevant_reservations(&focus).await?;
    // The revision is taken only when something changes (`commit`).
    let clock = Clock { now_us: w.now_us, revision: w.next_revision(), ttl_us: ttl_us(settings.as_ref()) };
    let mut book = Book::with_unread(relevant.rows, relevant.unread_live);
    book.settle(clock);
    Ok((book, clock, settings))
}

/// Gives the rows a write changed its revision, and applies them with their event. Nothing
/// when the write changed none.
fn commit<T: WriteTx>(w: &mut Write<T>, ctx: &WriteCtx, book: &Book) -> Result<Option<Event>> {
    if !book.is_changed() {
        return Ok(None);
    }
    let revision = w.revision();
    if book.changed().iter().any(|r| r.revision != revision) {
        return Err(crate::error::Error::internal(
            "reservations decided with another revision than their write's",
        ));
    }
    let rows: Vec<Row> = book.changed().into_iter().cloned().collect();
    let change = ReservationsChange {
        reservations: rows.iter().map(|r| message(&w.project, r, None)).collect(),
        settings: None,
    };
    w.apply(Change::Reservations(ReservationChange::Put(rows)));
    let mut ev = event(EventKind::ReservationsChanged, "project", &w.project.clone(), &ctx.actor);
    ev.value = Some(baton_proto::v1::event::Value::Reservations(change));
    Ok(Some(w.emit(ev)?))
}

/// Ends a session's reservations in a write that ends the session (completed or crashed),
/// with their own event; its waits end too, and the queue behind them moves on.
pub(crate) async fn end_with_session<T: WriteTx + ReservationTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    session_id: &str,
) -> Result<()> {
    let (mut book, clock, _) = settled(w, session_id, &[]).await?;
    book.end_of(session_id, ReservationStatus::SessionEnded, clock, |_| true);
    book.settle(clock);
    commit(w, ctx, &book)?;
    Ok(())
}

/// Moves a resumed session's held reservations to its successor, renewed, in the resume's
/// write, with their own event (the successor's brief shows them).
pub(crate) async fn hand_over<T: WriteTx + ReservationTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    from: &str,
    to: &baton_proto::v1::Session,
) -> Result<()> {
    let (mut book, clock, _) = settled(w, from, &[]).await?;
    let holder = holder(ctx, to.agent, &to.host, &to.user, &to.id);
    book.hand_over(from, &to.id, &crate::store::rows::encode_actor(&holder), clock);
    book.settle(clock);
    commit(w, ctx, &book)?;
    Ok(())
}
