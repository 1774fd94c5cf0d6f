//! Reservations on Postgres: the statements of `model::ReservationChange`, run one by one
//! before the write function (`write.rs`).

use sqlx::{PgConnection, Postgres};

use crate::store::model::ReservationChange;

/// $1 project, $2 id, then `Row`'s columns after the id.
const PUT: &str = "INSERT INTO reservations (project, id, session_id, request, kind, target, branch, reason, status, \
     holder, created_us, created_revision, granted_us, expires_us, ended_us, ended_by, revision) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT (id) DO UPDATE \
     SET session_id = excluded.session_id, reason = excluded.reason, status = excluded.status, \
     holder = excluded.holder, granted_us = excluded.granted_us, expires_us = excluded.expires_us, \
     ended_us = excluded.ended_us, ended_by = excluded.ended_by, revision = excluded.revision";
/// $1 project, $2 ttl, $3 enforcement, $4 auto, $5 revision.
const SETTINGS: &str = "INSERT INTO reservation_settings (project, ttl_seconds, enforcement, auto_reserve, revision) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project) DO UPDATE SET ttl_seconds = excluded.ttl_seconds, \
     enforcement = excluded.enforcement, auto_reserve = excluded.auto_reserve, revision = excluded.revision";

/// Runs the statements of a reservation change.
pub(super) async fn run(
    conn: &mut PgConnection,
    project: &str,
    change: ReservationChange,
) -> Result<(), sqlx::Error> {
    let query = |sql: &'static str| sqlx::query::<Postgres>(sql).bind(project.to_owned());
    match change {
        ReservationChange::Put(rows) => {
            for r in rows {
                let q = query(PUT).bind(r.id).bind(r.session_id).bind(r.request).bind(r.kind).bind(r.target);
                let q = q.bind(r.branch).bind(r.reason).bind(r.status).bind(r.holder).bind(r.created_us);
                let q = q.bind(r.created_revision).bind(r.granted_us).bind(r.expires_us).bind(r.ended_us);
                q.bind(r.ended_by).bind(r.revision).execute(&mut *conn).await?;
            }
        }
        ReservationChange::Settings(s) => {
            let q = query(SETTINGS).bind(s.ttl_seconds).bind(s.enforcement).bind(s.auto_reserve);
            q.bind(s.revision).execute(&mut *conn).await?;
        }
    }
    Ok(())
}
