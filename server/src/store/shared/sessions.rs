// Sessions: start, update (last-write-wins record), liveness, status, end, resume.

use baton_proto::v1::{GetSessionResponse, ListSessionsResponse};

use crate::store::rows::{CheckpointRow, SessionRow};
use crate::store::{Expiry, SessionQuery};

/// A session status as an SQL literal, for queries whose plans depend on it. Bound, it
/// is a parameter, and once Postgres plans a prepared statement generically it estimates
/// any status as common as the most common one: at 10,000 active sessions the brief's
/// search for a completed one walked every session of the project by id (1.5 ms) instead
/// of the empty (project, status) index range.
fn status_literal(status: SessionStatus) -> String {
    (status as i32).to_string()
}

async fn session_row(conn: &mut Conn, id: &str) -> Result<Option<SessionRow>> {
    Ok(sqlx::query_as("SELECT * FROM sessions WHERE id = $1").bind(id).fetch_optional(&mut *conn).await?)
}

async fn must_session(conn: &mut Conn, id: &str) -> Result<SessionRow> {
    session_row(conn, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("session_id: no session {id}; start one with StartSession")))
}

impl Backend {

    pub(crate) async fn do_get_session(&self, id: uuid::Uuid, within: crate::store::Within) -> Result<GetSessionResponse> {
        let mut conn = self.pool.acquire().await?;
        let id = id.to_string();
        let project: Option<(String,)> =
            sqlx::query_as("SELECT project FROM sessions WHERE id = $1").bind(&id).fetch_optional(&mut *conn).await?;
        let Some((project,)) = project.filter(|(p,)| crate::store::is_within(p, &within)) else {
            return Err(Error::NotFound(format!("session_id: no session {id}")));
        };
        // Head first: the data read after it is at least that new.
        let as_of_revision = head_revision(&mut conn, &project).await?;
        let row = must_session(&mut conn, &id).await?;
        Ok(GetSessionResponse { session: Some(row.to_proto()), as_of_revision })
    }

    pub(crate) async fn do_list_sessions(&self, q: SessionQuery) -> Result<ListSessionsResponse> {
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &q.project).await?;
        let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT * FROM sessions WHERE project = ");
        sql.push_bind(q.project.clone());
        if !q.statuses.is_empty() {
            sql.push(" AND status IN (");
            let mut list = sql.separated(", ");
            for s in &q.statuses {
                list.push_bind(*s as i32);
            }
            sql.push(")");
        }
        if let Some(agent) = q.agent {
            sql.push(" AND agent = ").push_bind(agent);
        }
        if let Some(host) = &q.host {
            sql.push(" AND host = ").push_bind(host.clone());
        }
        if let Some(since) = q.since_us {
            sql.push(" AND updated_us >= ").push_bind(since);
        }
        if let Some(before) = &q.before_id {
            sql.push(" AND id < ").push_bind(before.clone());
        }
        sql.push(" ORDER BY id DESC LIMIT ").push_bind(q.limit + 1);
        // Row by row until the page is full, by count or by bytes.
        let mut page = crate::core::page::Budget::new(q.limit);
        let mut sessions = Vec::new();
        let mut more = false;
        {
            use futures::TryStreamExt as _;
            let mut rows = sql.build_query_as::<SessionRow>().fetch(&mut *conn);
            while let Some(row) = rows.try_next().await? {
                let session = row.to_proto();
                if !page.take(prost::Message::encoded_len(&session)) {
                    more = true;
                    break;
                }
                sessions.push(session);
            }
        }
        let next_page_token = match sessions.last() {
            Some(last) if more => last.id.clone(),
            _ => String::new(),
        };
        Ok(ListSessionsResponse { sessions, next_page_token, as_of_revision })
    }
}
