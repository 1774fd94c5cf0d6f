// Export and import: pages of rows out; batches of lines in, each one write under the
// project lock with one event per imported record (revisions renumbered, ids kept).

use crate::store::transfer::{ChunkLine, CheckpointLine, Cursor, ImportCounts, Line, MemoryLine, RecordLine, SessionLine, Table};

const SESSION_COLUMNS: &str = "id, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms, last_seen_us, \
     head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, resumed_by, metadata, created_us, updated_us, \
     written_us, author, head_written_us, head_author";
const CHECKPOINT_COLUMNS: &str = "id, session_id, parent_id, kind, reason, state, payload, payload_content_type, compression, \
     size_bytes, digest, created_us, author, blobs";

impl Backend {
    /// Every project: (key, memory caps).
    pub(crate) async fn do_list_projects(&self) -> Result<Vec<(String, String)>> {
        Ok(sqlx::query_as("SELECT key, memory_caps FROM projects ORDER BY key").fetch_all(&self.pool).await?)
    }

    /// Up to `limit` rows of a table after `after`, and the cursor past them (None at the end).
    pub(crate) async fn do_export_page(&self, project: String, table: Table, after: Cursor, limit: i64) -> Result<(Vec<Line>, Option<Cursor>)> {
        let mut conn = self.pool.acquire().await?;
        // A page that ended on its bytes rather than its count.
        let mut cut_short = false;
        let (lines, next): (Vec<Line>, Option<Cursor>) = match table {
            Table::Chunks => {
                let rows: Vec<ChunkLine> = sqlx::query_as("SELECT digest, data, size_bytes, created_us FROM chunks WHERE project = $1 AND digest > $2 ORDER BY digest LIMIT $3")
                    .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.digest.clone(), ..Cursor::default() });
                (rows.into_iter().map(Line::Chunk).collect(), next)
            }
            Table::Sessions => {
                let rows: Vec<SessionLine> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
                )))
                .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.id.clone(), ..Cursor::default() });
                (rows.into_iter().map(|r| Line::Session(Box::new(r))).collect(), next)
            }
            Table::Checkpoints => {
                // Checkpoints may be megabytes each: a page ends within EXPORT_BYTES of stored
                // content (sizes read first), however many rows that is.
                const EXPORT_BYTES: usize = 64 * 1024 * 1024;
                let sizes: Vec<(i64, i64)> = sqlx::query_as(
                    "SELECT revision, CAST(length(state) + length(payload) AS BIGINT) FROM checkpoints \
                     WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3",
                )
                .bind(&project).bind(after.n).bind(limit).fetch_all(&mut *conn).await?;
                let mut page = crate::core::page::Budget::with_bytes(limit, EXPORT_BYTES);
                let taken = sizes.iter().take_while(|(_, n)| page.take(usize::try_from(*n).unwrap_or(usize::MAX))).count();
                let count = i64::try_from(taken).unwrap_or(limit);
                cut_short = taken < sizes.len();
                // By revision: a parent is always older than its children.
                let rows: Vec<(i64, CheckpointLine)> = sqlx::query_as::<_, CheckpointWithRevision>(sqlx::AssertSqlSafe(format!(
                    "SELECT revision, {CHECKPOINT_COLUMNS} FROM checkpoints WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3"
                )))
                .bind(&project).bind(after.n).bind(count).fetch_all(&mut *conn).await?
                .into_iter().map(|r| (r.revision, r.line)).collect();
                let next = rows.last().map(|(revision, _)| Cursor { n: *revision, ..Cursor::default() });
                (rows.into_iter().map(|(_, r)| Line::Checkpoint(Box::new(r))).collect(), next)
            }
            Table::Memory => {
                let rows: Vec<MemoryWithPosition> = sqlx::query_as(
                    "SELECT revision, id, category, branch, key, record, content, rationale, author, seq, created_us, evicted FROM memory \
                     WHERE project = $1 AND (revision > $2 OR (revision = $2 AND seq > $3)) ORDER BY revision, seq LIMIT $4",
                )
                .bind(&project).bind(after.n).bind(after.m).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { n: r.revision, m: r.line.seq, ..Cursor::default() });
                (rows.into_iter().map(|r| Line::Memory(r.line)).collect(), next)
            }
            Table::Records => {
                let rows: Vec<RecordLine> = sqlx::query_as("SELECT record, written_us, author FROM records WHERE project = $1 AND record > $2 ORDER BY record LIMIT $3")
                    .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.record.clone(), ..Cursor::default() });
                (rows.into_iter().map(Line::Record).collect(), next)
            }
        };
        let next = if (lines.len() as i64) < limit && !cut_short { None } else { next };
        Ok((lines, next))
    }

    /// Imports one batch of a project's lines. Rows whose id the target already has are
    /// skipped, so an interrupted import can simply be run again.
    pub(crate) async fn do_import_batch(&self, project: String, memory_caps: Option<String>, lines: Vec<Line>) -> Result<ImportCounts> {
        let mut counts = ImportCounts::default();
        // Chunks and settings carry no revision: their own transaction.
        let mut plain = self.writer.lease(&project, false, false).await?;
        if let Some(caps) = &memory_caps {
            sqlx::query("UPDATE projects SET memory_caps = $2 WHERE key = $1 AND memory_caps = '{}'").bind(&project).bind(caps).execute(&mut *plain).await?;
        }
        for line in &lines {
            if let Line::Chunk(c) = line {
                // An archive is not trusted more than a client: what it stores must unpack to
                // its declared size and digest.
                if let Err(e) = crate::core::chunk::unpack(&c.digest, &c.data, c.size_bytes) {
                    return Err(Error::InvalidArgument(format!("archive: chunk {} of project {project:?}: {e}", c.digest)));
                }
                let done = sqlx::query(
                    "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, digest) DO NOTHING",
                )
                .bind(&project).bind(&c.digest).bind(&c.data).bind(c.size_bytes).bind(c.created_us)
                .execute(&mut *plain).await?;
                if done.rows_affected() == 1 { counts.imported += 1 } else { counts.skipped += 1 }
            }
        }
        plain.commit().await?;

        let ctx = WriteCtx { actor: Actor { token: "baton-server import".into(), ..Actor::default() }, ..WriteCtx::default() };
        let mut w = match self.begin_memory(&project, &ctx).await? {
            Begun::Fresh(w) => w,
            Begun::Replay => return Err(Error::internal("import write without request_id replayed")),
        };
        let mut events = 0;
        for line in lines {
            let imported = match line {
                Line::Header { .. } | Line::Project { .. } | Line::Chunk(_) => continue,
                Line::Session(s) => import_session(&mut w, &project, *s).await?,
                Line::Checkpoint(c) => import_checkpoint(&mut w, &project, *c).await?,
                Line::Memory(m) => import_memory(&mut w, &project, m).await?,
                Line::Record(r) => {
                    // Its revision: that of the latest imported entry of the record.
                    let exists: Option<(i64,)> = sqlx::query_as("SELECT revision FROM records WHERE project = $1 AND record = $2").bind(&project).bind(&r.record).fetch_optional(&mut *w.tx).await?;
                    let latest: (Option<i64>,) = sqlx::query_as("SELECT MAX(revision) FROM memory WHERE project = $1 AND record = $2").bind(&project).bind(&r.record).fetch_one(&mut *w.tx).await?;
                    match (exists, latest.0) {
                        (None, Some(revision)) => {
                            sqlx::query("INSERT INTO records (project, record, revision, written_us, author) VALUES ($1, $2, $3, $4, $5)")
                                .bind(&project).bind(&r.record).bind(revision).bind(r.written_us).bind(&r.author)
                                .execute(&mut *w.tx).await?;
                            counts.imported += 1;
                        }
                        _ => counts.skipped += 1,
                    }
                    continue;
                }
            };
            if imported { counts.imported += 1; events += 1 } else { counts.skipped += 1 }
        }
        if events == 0 {
            return Ok(counts); // nothing revisioned: rolled back, no revision used
        }
        w.finish(self, &ctx, &baton_proto::v1::ListEventsResponse::default()).await?;
        Ok(counts)
    }
}

#[derive(sqlx::FromRow)]
struct CheckpointWithRevision {
    revision: i64,
    #[sqlx(flatten)]
    line: CheckpointLine,
}

#[derive(sqlx::FromRow)]
struct MemoryWithPosition {
    revision: i64,
    #[sqlx(flatten)]
    line: MemoryLine,
}

async fn exists(tx: &mut Tx, table: &str, id: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT id FROM {table} WHERE id = $1"))).bind(id).fetch_optional(&mut **tx).await?;
    Ok(row.is_some())
}

async fn import_session(w: &mut Write, project: &str, s: SessionLine) -> Result<bool> {
    if exists(&mut w.tx, "sessions", &s.id).await? {
        return Ok(false);
    }
    let revision = w.revision();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO sessions ({SESSION_COLUMNS}, project, start_revision, revision, head_revision) VALUES \
         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $27, $27)"
    )))
    .bind(&s.id).bind(s.agent).bind(&s.agent_session_id).bind(&s.host).bind(&s.user_name).bind(&s.cwd).bind(&s.branch).bind(&s.goal)
    .bind(s.status).bind(s.lease_ttl_ms).bind(s.last_seen_us).bind(&s.head_checkpoint_id).bind(&s.git_base).bind(&s.git_head)
    .bind(&s.summary).bind(s.tool_count).bind(&s.resumed_from).bind(&s.resumed_by).bind(&s.metadata).bind(s.created_us)
    .bind(s.updated_us).bind(s.written_us).bind(&s.author).bind(s.head_written_us).bind(&s.head_author).bind(project).bind(revision)
    .execute(&mut *w.tx).await?;
    let row: SessionRow = sqlx::query_as("SELECT * FROM sessions WHERE id = $1").bind(&s.id).fetch_one(&mut *w.tx).await?;
    w.emit(Event {
        kind: EventKind::SessionStarted as i32,
        entity: "session".into(),
        entity_id: s.id.clone(),
        actor: Some(decode_actor(&s.author)),
        value: Some(baton_proto::v1::event::Value::Session(row.to_proto())),
        ..Default::default()
    })
    .await?;
    Ok(true)
}

async fn import_checkpoint(w: &mut Write, project: &str, c: CheckpointLine) -> Result<bool> {
    if exists(&mut w.tx, "checkpoints", &c.id).await? {
        return Ok(false);
    }
    let session: Option<(Option<String>,)> = sqlx::query_as("SELECT head_checkpoint_id FROM sessions WHERE id = $1 AND project = $2")
        .bind(&c.session_id).bind(project).fetch_optional(&mut *w.tx).await?;
    let Some((head,)) = session else {
        return Err(Error::InvalidArgument(format!(
            "checkpoint {} belongs to session {}, which is neither in the export nor in project {project:?}", c.id, c.session_id
        )));
    };
    let revision = w.revision();
    // Not carried by the archive: computed from what it carries, and only if that verifies.
    let header = crate::core::checkpoint::Header {
        session_id: &c.session_id,
        kind: c.kind,
        reason: &c.reason,
        payload_content_type: &c.payload_content_type,
        blobs: &c.blobs,
    };
    let state_digest = crate::core::checkpoint::state_digest_of_stored(&header, &c.state, &c.payload, &c.compression, &c.digest);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO checkpoints ({CHECKPOINT_COLUMNS}, project, revision, state_digest) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
    )))
    .bind(&c.id).bind(&c.session_id).bind(&c.parent_id).bind(c.kind).bind(&c.reason).bind(&c.state).bind(&c.payload)
    .bind(&c.payload_content_type).bind(&c.compression).bind(c.size_bytes).bind(&c.digest).bind(c.created_us).bind(&c.author)
    .bind(&c.blobs).bind(project).bind(revision).bind(&state_digest)
    .execute(&mut *w.tx).await?;
    w.emit(Event {
        kind: EventKind::CheckpointCreated as i32,
        entity: "checkpoint".into(),
        entity_id: c.id.clone(),
        actor: Some(decode_actor(&c.author)),
        value: Some(baton_proto::v1::event::Value::Checkpoint(CheckpointRef {
            id: c.id.clone(),
            session_id: c.session_id.clone(),
            parent_id: c.parent_id.clone().unwrap_or_default(),
            digest: c.digest.clone(),
            kind: c.kind,
            is_head: head.as_deref() == Some(c.id.as_str()),
        })),
        ..Default::default()
    })
    .await?;
    Ok(true)
}

async fn import_memory(w: &mut Write, project: &str, m: MemoryLine) -> Result<bool> {
    if exists(&mut w.tx, "memory", &m.id).await? {
        return Ok(false);
    }
    let revision = w.revision();
    sqlx::query(
        "INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, revision, seq, created_us, evicted) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(&m.id).bind(project).bind(&m.category).bind(&m.branch).bind(&m.key).bind(&m.record).bind(&m.content).bind(&m.rationale)
    .bind(&m.author).bind(revision).bind(m.seq).bind(m.created_us).bind(m.evicted)
    .execute(&mut *w.tx).await?;
    let entry = MemoryEntry {
        id: m.id.clone(),
        project: project.to_owned(),
        category: m.category.clone(),
        branch: m.branch.clone(),
        key: m.key.clone(),
        content: m.content.clone(),
        rationale: m.rationale.clone(),
        author: Some(decode_actor(&m.author)),
        revision,
        record_revision: revision,
        created_at: Some(ts(m.created_us)),
        evicted: m.evicted,
    };
    let op = if m.category == crate::core::memory::NOTE { MemoryOp::Upsert } else { MemoryOp::Append };
    w.emit(Event {
        kind: EventKind::MemoryChanged as i32,
        entity: "memory".into(),
        entity_id: m.record.clone(),
        actor: Some(decode_actor(&m.author)),
        value: Some(baton_proto::v1::event::Value::Memory(MemoryChange {
            category: m.category,
            branch: m.branch,
            key: m.key,
            op: op as i32,
            entries: vec![entry],
            ..Default::default()
        })),
        ..Default::default()
    })
    .await?;
    Ok(true)
}
