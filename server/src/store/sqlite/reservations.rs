//! Reservations on SQLite: the statements of `model::ReservationChange`, sent with the
//! write's other changes (values bound in the order their `?` appear).

use super::write::Statements;
use crate::store::model::ReservationChange;

/// Binds: id, project, then `Row`'s columns after the id.
const PUT: &str = "INSERT INTO reservations (id, project, session_id, request, kind, target, branch, reason, status, \
     holder, created_us, created_revision, granted_us, expires_us, ended_us, ended_by, revision) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET \
     session_id = excluded.session_id, reason = excluded.reason, status = excluded.status, holder = excluded.holder, \
     granted_us = excluded.granted_us, expires_us = excluded.expires_us, ended_us = excluded.ended_us, \
     ended_by = excluded.ended_by, revision = excluded.revision";
/// Binds: project, ttl, enforcement, auto, revision.
const SETTINGS: &str = "INSERT INTO reservation_settings (project, ttl_seconds, enforcement, auto_reserve, revision) \
     VALUES (?, ?, ?, ?, ?) ON CONFLICT (project) DO UPDATE SET ttl_seconds = excluded.ttl_seconds, \
     enforcement = excluded.enforcement, auto_reserve = excluded.auto_reserve, revision = excluded.revision";

/// The statements of a reservation change.
pub(super) fn push(query: &mut Statements, project: &str, change: &ReservationChange) {
    match change {
        ReservationChange::Put(rows) => {
            for r in rows {
                query.push(PUT).bind(r.id.as_str()).bind(project).bind(r.session_id.as_str());
                query.bind(r.request.as_str()).bind(r.kind.as_str()).bind(r.target.as_str());
                query.bind(r.branch.as_str()).bind(r.reason.as_str()).bind(r.status);
                query.bind(r.holder.as_slice()).bind(r.created_us).bind(r.created_revision);
                query.bind(r.granted_us).bind(r.expires_us).bind(r.ended_us).bind(r.ended_by.as_str());
                query.bind(r.revision);
            }
        }
        ReservationChange::Settings(s) => {
            query.push(SETTINGS).bind(project).bind(s.ttl_seconds).bind(s.enforcement);
            query.bind(s.auto_reserve).bind(s.revision);
        }
    }
}
