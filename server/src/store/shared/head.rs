// What the reads still in `shared/` use on both backends: a project's head revision.
// Included into `sqlite/mod.rs` and
// `postgres/mod.rs`, where `Db`, `Conn` and `Row` are the backend's own; the imports here
// are those of every file of `shared/`.

use std::collections::HashMap;

use baton_proto::v1::{Conflict, Event, SessionStatus};

use crate::error::{Error, Result};
use crate::store::rows::{decode_conflict, decode_event};

/// The project's head revision (0 for an unknown project).
async fn head_revision(conn: &mut Conn, project: &str) -> Result<i64> {
    let head: Option<(i64,)> = sqlx::query_as("SELECT head_revision FROM projects WHERE key = $1")
        .bind(project)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(head.map_or(0, |(h,)| h))
}

