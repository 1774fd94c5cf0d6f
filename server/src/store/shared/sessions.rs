// Sessions: start, update (last-write-wins record), liveness, status, end, resume.

use baton_proto::v1::{
    GetSessionResponse, ListSessionsResponse, ResumeSessionRequest, ResumeSessionResponse,
    SkippedCheckpoint, record_value, resume_session_request,
};

use crate::core::{lww, status};
use crate::store::rows::{CheckpointRow, SessionRow};
use crate::store::{Expiry, SessionQuery};

const INSERT_SESSION: &str = "INSERT INTO sessions (id, project, agent, agent_session_id, host, user_name, cwd, \
     branch, goal, status, lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, \
     tool_count, resumed_from, resumed_by, metadata, created_us, updated_us, start_revision, revision, \
     written_us, author, head_revision, head_written_us, head_author) VALUES ($1, $2, $3, $4, $5, $6, $7, \
     $8, $9, $10, $11, $12, NULL, $13, '', '', 0, $14, NULL, $15, $16, $16, $17, $17, $18, $19, 0, 0, $20) ON CONFLICT (id) DO NOTHING RETURNING *";

/// The session a resume takes over ($1 project; $2 its id, or $3 the id of one of its
/// checkpoints, or neither: the project's latest crashed or idle session, else its latest
/// completed one). Ids of another project are not found, like ids that do not exist. At most one row: the branches exclude each other. The latest is one
/// index range per status, not a sort of all the project's sessions. Also prepared on
/// Postgres connections, for the resume's lock to read it (`Prefetch::Resume`).
static RESUME_SESSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let completed = status_literal(SessionStatus::Completed);
    let latest = [SessionStatus::Crashed, SessionStatus::Idle, SessionStatus::Completed].map(|status| {
        format!(
            "SELECT * FROM (SELECT * FROM sessions WHERE $2 IS NULL AND $3 IS NULL AND project = $1 AND status = {} \
             ORDER BY updated_us DESC, id DESC LIMIT 1) s{}",
            status_literal(status),
            status as i32
        )
    });
    format!(
        "SELECT * FROM sessions WHERE id = $2 AND project = $1 \
         UNION ALL SELECT * FROM sessions WHERE $2 IS NULL AND id = (SELECT session_id FROM checkpoints WHERE id = $3 AND project = $1) \
         UNION ALL SELECT * FROM (SELECT * FROM ({}) latest \
         ORDER BY CASE WHEN status = {completed} THEN 1 ELSE 0 END, updated_us DESC, id DESC LIMIT 1) latest",
        latest.join(" UNION ALL ")
    )
});

/// The checkpoint a resume starts from (same parameters): the one asked for, or the head
/// of the session it takes over.
static RESUME_CHECKPOINT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT * FROM checkpoints WHERE id = COALESCE($3, (SELECT head_checkpoint_id FROM ({}) target)) AND project = $1",
        RESUME_SESSION.as_str()
    )
});

/// A session status as an SQL literal, for queries whose plans depend on it. Bound, it
/// is a parameter, and once Postgres plans a prepared statement generically it estimates
/// any status as common as the most common one: at 10,000 active sessions the brief's
/// search for a completed one walked every session of the project by id (1.5 ms) instead
/// of the empty (project, status) index range.
fn status_literal(status: SessionStatus) -> String {
    (status as i32).to_string()
}

/// The fields of a new session row.
struct NewSession<'a> {
    id: &'a str,
    project: &'a str,
    agent: i32,
    agent_session_id: &'a str,
    host: &'a str,
    user: &'a str,
    cwd: &'a str,
    branch: &'a str,
    goal: &'a str,
    status: SessionStatus,
    lease_ttl_ms: i64,
    git_base: &'a str,
    resumed_from: Option<&'a str>,
    metadata: &'a HashMap<String, String>,
}

async fn session_row(conn: &mut Conn, id: &str) -> Result<Option<SessionRow>> {
    Ok(sqlx::query_as("SELECT * FROM sessions WHERE id = $1").bind(id).fetch_optional(&mut *conn).await?)
}

async fn must_session(conn: &mut Conn, id: &str) -> Result<SessionRow> {
    session_row(conn, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("session_id: no session {id}; start one with StartSession")))
}

/// Refuses a status change the session's lifecycle does not allow.
fn check_transition(row: &SessionRow, to: SessionStatus) -> Result<()> {
    Ok(status::check_transition(&row.id, row.status(), to)?)
}

/// Refuses writes to a session that has ended or was taken over (fencing).
fn check_open(row: &SessionRow) -> Result<()> {
    Ok(status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?)
}

impl Backend {
    /// The project of a session (outside the write, to know which row to lock; a
    /// session's project never changes); a session outside `within` is not found.
    async fn project_of(&self, session_id: &str, within: &crate::store::Within) -> Result<String> {
        self.do_project_of(crate::store::Entity::Session, session_id.to_owned())
            .await?
            .filter(|p| crate::store::is_within(p, within))
            .ok_or_else(|| Error::NotFound(format!("session_id: no session {session_id}; start one with StartSession")))
    }
}

impl Write {
    /// Inserts a session; `None` if a session with that id already exists.
    async fn insert_session(&mut self, s: &NewSession<'_>, ctx: &WriteCtx) -> Result<Option<SessionRow>> {
        let revision = self.revision();
        let metadata = serde_json::to_string(s.metadata).map_err(Error::internal)?;
        let author = encode_actor(&ctx.actor);
        fail::fail_point!("session.insert", |_| Err(injected("session.insert")));
        Ok(sqlx::query_as(INSERT_SESSION)
            .bind(s.id)
            .bind(s.project)
            .bind(s.agent)
            .bind(s.agent_session_id)
            .bind(s.host)
            .bind(s.user)
            .bind(s.cwd)
            .bind(s.branch)
            .bind(s.goal)
            .bind(s.status as i32)
            .bind(s.lease_ttl_ms)
            .bind(self.now_us)
            .bind(s.git_base)
            .bind(s.resumed_from)
            .bind(metadata)
            .bind(self.now_us)
            .bind(revision)
            .bind(ctx.written_us(self.now_us))
            .bind(&author)
            .bind(&author)
            .fetch_optional(&mut *self.tx)
            .await?)
    }

    /// A crashed or idle session taken over by session `by` (ResumeSession), as read in
    /// this write (`row`). Every change of a session's status holds the project lock, so
    /// the claimed row is known without reading it back, and the change goes with the
    /// write's log (`finish`). (Only the liveness fields, `last_seen_us` and `tool_count`,
    /// may move meanwhile, by a heartbeat that changes nothing else: the reply and the
    /// event carry them as read.)
    async fn claim(&mut self, row: &SessionRow, by: &str, actor: &Actor) -> Result<SessionRow> {
        check_transition(row, SessionStatus::Resumed)?;
        self.revision();
        let mut claimed = row.clone();
        claimed.status = SessionStatus::Resumed as i32;
        claimed.updated_us = self.now_us;
        claimed.resumed_by = Some(by.to_owned());
        self.deferred
            .statement()
            .push("UPDATE sessions SET status = ")
            .push_bind(claimed.status)
            .push(", updated_us = ")
            .push_bind(claimed.updated_us)
            .push(", resumed_by = ")
            .push_bind(by.to_owned())
            .push(" WHERE id = ")
            .push_bind(row.id.clone());
        self.emit_status(&claimed, actor).await?;
        Ok(claimed)
    }

    /// A status change: its own revision and event.
    /// `activity` says whether the change is the session's own doing (which also counts as
    /// liveness) or the reaper's (which must not move `last_seen_at`).
    async fn set_status(&mut self, row: &SessionRow, to: SessionStatus, actor: &Actor, activity: bool) -> Result<SessionRow> {
        check_transition(row, to)?;
        self.revision();
        let sql = if activity {
            "UPDATE sessions SET status = $2, updated_us = $3, last_seen_us = $3 WHERE id = $1 RETURNING *"
        } else {
            "UPDATE sessions SET status = $2, updated_us = $3 WHERE id = $1 RETURNING *"
        };
        let row: SessionRow = sqlx::query_as(sql)
            .bind(&row.id)
            .bind(to as i32)
            .bind(self.now_us)
            .fetch_optional(&mut *self.tx)
            .await?
            .ok_or_else(|| Error::NotFound(format!("session_id: no session {}", row.id)))?;
        self.emit_status(&row, actor).await?;
        Ok(row)
    }

    /// The event of a status change (the pending revision's).
    async fn emit_status(&mut self, row: &SessionRow, actor: &Actor) -> Result<()> {
        let mut ev = event(EventKind::SessionStatusChanged, "session", &row.id, actor);
        ev.value = Some(baton_proto::v1::event::Value::Session(row.to_proto()));
        self.emit(ev).await.map(drop)
    }

    /// A resume's target session and the checkpoint it starts from (`RESUME_SESSION`,
    /// `RESUME_CHECKPOINT`): as read with the lock (`Backend::begin_resume`), or read now.
    async fn resume_target(&mut self, session: Option<&str>, checkpoint: Option<&str>) -> Result<(Option<SessionRow>, Option<CheckpointRow>)> {
        if let Some(Prefetched::Resume(read)) = self.prefetched.take() {
            return Ok(*read);
        }
        let target = self.resume_read(&RESUME_SESSION, session, checkpoint).await?;
        let start = self.resume_read(&RESUME_CHECKPOINT, session, checkpoint).await?;
        Ok((target, start))
    }

    /// One of the resume target's queries, with its parameters.
    async fn resume_read<T>(&mut self, sql: &'static str, session: Option<&str>, checkpoint: Option<&str>) -> Result<Option<T>>
    where
        T: Send + Unpin + for<'r> sqlx::FromRow<'r, <Db as sqlx::Database>::Row>,
    {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&self.project)
            .bind(session)
            .bind(checkpoint)
            .fetch_optional(&mut *self.tx)
            .await?)
    }

    /// Activity on a session: idle or initializing sessions become active again.
    async fn touch(&mut self, row: SessionRow, actor: &Actor) -> Result<SessionRow> {
        if matches!(row.status(), SessionStatus::Idle | SessionStatus::Initializing) {
            return self.set_status(&row, SessionStatus::Active, actor, true).await;
        }
        sqlx::query("UPDATE sessions SET last_seen_us = $2 WHERE id = $1")
            .bind(&row.id)
            .bind(self.now_us)
            .execute(&mut *self.tx)
            .await?;
        Ok(row)
    }
}

/// The agent's own command to continue a conversation, as one shell line (the argv holds
/// only safe ids, which need no quoting).
fn resume_command(agent: i32, agent_session_id: &str) -> String {
    baton_proto::agent::resume_argv(agent, agent_session_id).map(|argv| argv.join(" ")).unwrap_or_default()
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




    pub(crate) async fn do_resume_session(
        &self,
        ctx: WriteCtx,
        req: ResumeSessionRequest,
        new_id: uuid::Uuid,
        mut settled: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Result<ResumeSessionResponse> {
        // Where the brief need not wait for the write's reads, it starts now.
        if !RESUME_BRIEF_WAITS
            && let Some(settled) = settled.take()
        {
            let _ = settled.send(());
        }
        let (session_id, checkpoint_id) = match &req.target {
            Some(resume_session_request::Target::SessionId(id)) => (Some(id.as_str()), None),
            Some(resume_session_request::Target::CheckpointId(id)) => (None, Some(id.as_str())),
            None => (None, None),
        };
        let mut w = match self.begin_resume(&req.project, &ctx, session_id, checkpoint_id).await? {
            Begun::Replay(bytes) => return replayed(&bytes, |r: &mut ResumeSessionResponse| r.result.as_mut()),
            Begun::Fresh(w) => w,
        };
        // Which session, and from which checkpoint.
        let (target, start) = w.resume_target(session_id, checkpoint_id).await?;
        if let (Some(id), None) = (checkpoint_id, &start) {
            return Err(Error::NotFound(format!("checkpoint_id: no checkpoint {id}")));
        }
        let target = target.ok_or_else(|| match (session_id, &start) {
            (Some(id), _) => Error::NotFound(format!("session_id: no session {id}; start one with StartSession")),
            (None, Some(cp)) if checkpoint_id.is_some() => {
                Error::NotFound(format!("checkpoint_id: checkpoint {}'s session {} is gone", cp.id, cp.session_id))
            }
            _ => Error::NotFound(format!(
                "project {:?} has no crashed, idle or completed session to resume; start a new session",
                req.project
            )),
        })?;
        if target.project != req.project {
            // The queries above read only this project's rows: never reached, and never
            // telling another project's name if it were.
            return Err(Error::NotFound(format!("session_id: no session {}", target.id)));
        }
        match target.status() {
            SessionStatus::Resumed => {
                return Err(Error::FailedPrecondition(format!(
                    "session {} was already resumed by session {}; resume that one instead",
                    target.id,
                    target.resumed_by.as_deref().unwrap_or("?")
                )));
            }
            SessionStatus::Active | SessionStatus::Initializing => {
                return Err(Error::FailedPrecondition(format!(
                    "session {} is still active; it can be resumed once it is idle, crashed or completed \
                     (end it with EndSession, or wait for it to go idle)",
                    target.id
                )));
            }
            _ => {}
        }
        // The nearest valid checkpoint, from the asked one (or the head) up the tree.
        let mut skipped = Vec::new();
        let mut checkpoint = None;
        let mut next = start;
        let mut seen = HashSet::new();
        while let Some(row) = next.take() {
            let id = row.id.clone();
            if !seen.insert(id.clone()) {
                break;
            }
            match row.verified(false) {
                Ok(cp) => {
                    checkpoint = Some(cp);
                    break;
                }
                Err(e) => {
                    tracing::warn!(checkpoint = %id, error = %e, "resume skips a corrupt checkpoint");
                    skipped.push(SkippedCheckpoint { checkpoint_id: id, reason: e.to_string() });
                    if let Some(parent) = &row.parent_id {
                        next = sqlx::query_as("SELECT * FROM checkpoints WHERE id = $1")
                            .bind(parent)
                            .fetch_optional(&mut *w.tx)
                            .await?;
                    }
                }
            }
        }
        // Claim the old session (crashed or idle) exactly once (the project lock is held
        // from the read above to the commit; a taken new id fails the insert below, and
        // the claim is never sent).
        let new_id = new_id.to_string();
        let resumed_from = if matches!(target.status(), SessionStatus::Crashed | SessionStatus::Idle) {
            w.claim(&target, &new_id, &ctx.actor).await?
        } else {
            target
        };
        let or = |a: &str, b: &str| if a.is_empty() { b.to_owned() } else { a.to_owned() };
        let agent = if req.agent == 0 { resumed_from.agent } else { req.agent };
        let git_base = checkpoint
            .as_ref()
            .and_then(|c| c.state.as_ref())
            .map(|s| s.git_head.clone())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| resumed_from.git_head.clone());
        let metadata = HashMap::new();
        let row = w
            .insert_session(
                &NewSession {
                    id: &new_id,
                    project: &req.project,
                    agent,
                    agent_session_id: &req.agent_session_id,
                    host: &or(&req.host, &resumed_from.host),
                    user: &or(&req.user, &resumed_from.user_name),
                    cwd: &or(&req.cwd, &resumed_from.cwd),
                    branch: &or(&req.branch, &resumed_from.branch),
                    goal: &resumed_from.goal,
                    status: SessionStatus::Active,
                    lease_ttl_ms: req.lease_ttl_ms,
                    git_base: &git_base,
                    resumed_from: Some(&resumed_from.id),
                    metadata: &metadata,
                },
                &ctx,
            )
            .await?
            .ok_or_else(|| Error::AlreadyExists(format!("new_session_id: session {new_id} already exists")))?;
        let session = row.to_proto();
        let mut ev = event(EventKind::SessionStarted, "session", &new_id, &ctx.actor);
        ev.value = Some(baton_proto::v1::event::Value::Session(session.clone()));
        let revision = w.emit(ev).await?.revision;
        let reply = ResumeSessionResponse {
            session: Some(session),
            resume_command: resume_command(resumed_from.agent, &resumed_from.agent_session_id),
            resumed_from: Some(resumed_from.to_proto()),
            checkpoint,
            skipped,
            brief: None,
            result: Some(write_result(revision, Decision::Applied, None, &ctx)),
        };
        // Only the log and the commit are left: mostly a wait for the disk.
        if let Some(settled) = settled {
            let _ = settled.send(());
        }
        w.finish(self, &ctx, &reply).await?;
        Ok(reply)
    }

}
