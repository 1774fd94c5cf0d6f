//! RenewReservations: a session's held reservations live another time to live. Liveness,
//! not a write (no revision, no event), as heartbeats are; it waits for a write of the
//! project in progress, so a write never ends a reservation it saw lapse while the holder
//! is told it was renewed (`ReservationReads::renew_reservations`).

use std::collections::HashSet;

use baton_proto::v1::RenewReservationsResponse;

use super::{message, settings_message, ttl_us};
use crate::core::time::now_us;
use crate::error::Result;
use crate::store::Store;

/// RenewReservations: the rows renewed, and those of `known_ids` no longer held, as they
/// ended (one whose time ran out before a write ended it shows as EXPIRED).
pub async fn renew<S: Store>(
    store: &S,
    project: String,
    session_id: String,
    known_ids: Vec<String>,
    max_live: usize,
) -> Result<RenewReservationsResponse> {
    let settings = store.reservation_settings(project.clone()).await?;
    let held = store.renew_reservations(project.clone(), session_id, ttl_us(settings.as_ref())).await?;
    let held_ids: HashSet<&str> = held.iter().map(|r| r.id.as_str()).collect();
    let gone: Vec<String> = known_ids.into_iter().filter(|id| !held_ids.contains(id.as_str())).collect();
    let lost = store.reservations_by_id(project.clone(), gone).await?;
    let now = now_us();
    Ok(RenewReservationsResponse {
        held: held.iter().map(|r| message(&project, r, None)).collect(),
        lost: lost.iter().map(|r| message(&project, r, Some(now))).collect(),
        settings: Some(settings_message(settings.as_ref(), max_live)),
    })
}
