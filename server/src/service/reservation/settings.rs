//! SetReservationSettings: a project's time to live, enforcement and auto-reservations, a
//! write with its event. A new time to live applies from each reservation's next grant or
//! renewal.

use baton_proto::v1::{
    EventKind, ReservationEnforcement, ReservationsChange, SetReservationSettingsRequest,
    SetReservationSettingsResponse,
};

use super::{lock, settings_message};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::error::Result;
use crate::service::write::{self, event};
use crate::store::model::{Change, ReservationChange, ReservationSettingsRow};
use crate::store::reservations::ReservationTx;
use crate::store::{Store, WriteCtx};

/// SetReservationSettings (validated by the API: ttl in range, a known enforcement).
pub async fn set_settings<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: SetReservationSettingsRequest,
    max_live: usize,
) -> Result<SetReservationSettingsResponse> {
    let lock = lock(&req.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let stored = w.tx().reservation_settings().await?;
            let current = settings_message(stored.as_ref(), max_live);
            let revision = w.revision();
            let enforcement = if req.enforcement == ReservationEnforcement::Unspecified as i32 {
                current.enforcement
            } else {
                req.enforcement
            };
            let row = ReservationSettingsRow {
                ttl_seconds: i64::from(req.ttl_seconds.unwrap_or(current.ttl_seconds)),
                enforcement: i64::from(enforcement),
                auto_reserve: i64::from(req.auto_reserve.unwrap_or(current.auto_reserve)),
                revision,
            };
            w.apply(Change::Reservations(ReservationChange::Settings(row)));
            let settings = settings_message(Some(&row), max_live);
            let mut ev = event(EventKind::ReservationsChanged, "project", &req.project, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Reservations(ReservationsChange {
                reservations: Vec::new(),
                settings: Some(settings),
            }));
            w.emit(ev)?;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = SetReservationSettingsResponse { settings: Some(settings), result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
