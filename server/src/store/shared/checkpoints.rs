// Checkpoints: immutable, a tree per session; creating one moves the session's head.

use baton_proto::v1::{Checkpoint, GetCheckpointResponse, ListCheckpointsResponse};


impl Backend {
    pub(crate) async fn do_get_checkpoint(&self, id: uuid::Uuid, include_payload: bool, within: crate::store::Within) -> Result<GetCheckpointResponse> {
        let id = id.to_string();
        let mut conn = self.pool.acquire().await?;
        let project: Option<(String,)> =
            sqlx::query_as("SELECT project FROM checkpoints WHERE id = $1").bind(&id).fetch_optional(&mut *conn).await?;
        let Some((project,)) = project.filter(|(p,)| crate::store::is_within(p, &within)) else {
            return Err(Error::NotFound(format!("checkpoint_id: no checkpoint {id}")));
        };
        let as_of_revision = head_revision(&mut conn, &project).await?;
        // Without its payload, a checkpoint is read and verified as lists read it.
        let columns = if include_payload { "*" } else { crate::store::rows::CHECKPOINT_LIGHT };
        let row: CheckpointRow = sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {columns} FROM checkpoints WHERE id = $1")))
            .bind(&id)
            .fetch_one(&mut *conn)
            .await?;
        let checkpoint = if include_payload { row.verified(true)? } else { row.verified_state()? };
        Ok(GetCheckpointResponse { checkpoint: Some(checkpoint), as_of_revision })
    }

    /// One page of a session's checkpoints in tree order (see `tree_order`), after the
    /// checkpoint `after` when given. Payloads are never read; states are read a batch at a
    /// time, each batch's stored bytes within the reply budget, so memory is that of a page.
    pub(crate) async fn do_list_checkpoints(&self, session_id: uuid::Uuid, include_state: bool, page_size: i64, after: Option<String>, within: crate::store::Within) -> Result<ListCheckpointsResponse> {
        use crate::core::page::{Budget, REPLY_BUDGET};
        const BATCH: usize = 64;
        let session_id = session_id.to_string();
        let mut conn = self.pool.acquire().await?;
        let project: Option<(String,)> = sqlx::query_as("SELECT project FROM sessions WHERE id = $1")
            .bind(&session_id)
            .fetch_optional(&mut *conn)
            .await?;
        let Some((project,)) = project.filter(|(p,)| crate::store::is_within(p, &within)) else {
            return Err(Error::NotFound(format!("session_id: no session {session_id}")));
        };
        // Head revision first, then the data: what is read is at least as new as as_of.
        let as_of_revision = head_revision(&mut conn, &project).await?;
        let head: (Option<String>,) =
            sqlx::query_as("SELECT head_checkpoint_id FROM sessions WHERE id = $1").bind(&session_id).fetch_one(&mut *conn).await?;
        // The tree's shape, and each state's stored size (neither database reads a value to
        // give its length).
        let nodes: Vec<(String, Option<String>, i64)> =
            sqlx::query_as("SELECT id, parent_id, CAST(length(state) AS BIGINT) FROM checkpoints WHERE session_id = $1 ORDER BY revision")
                .bind(&session_id)
                .fetch_all(&mut *conn)
                .await?;
        let order = tree_order(&nodes);
        let mut next = match &after {
            None => 0,
            Some(id) => match order.iter().position(|(i, _)| &nodes[*i].0 == id) {
                Some(at) => at + 1,
                None => {
                    return Err(Error::FailedPrecondition(format!(
                        "page_token: checkpoint {id} is no longer in this session's list (retention pruned it since the \
                         previous page, or the token is another list's); list again from the first page"
                    )));
                }
            },
        };
        let mut page = Budget::new(page_size);
        let mut checkpoints = Vec::new();
        'page: while next < order.len() {
            let mut stored = 0usize;
            let batch: Vec<&(usize, i32)> = order[next..]
                .iter()
                .take(BATCH)
                .enumerate()
                .take_while(|(n, (i, _))| {
                    stored = stored.saturating_add(usize::try_from(nodes[*i].2).unwrap_or(usize::MAX));
                    *n == 0 || stored <= REPLY_BUDGET
                })
                .map(|(_, node)| node)
                .collect();
            let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT ");
            sql.push(crate::store::rows::CHECKPOINT_LIGHT).push(" FROM checkpoints WHERE id IN (");
            let mut list = sql.separated(", ");
            for (i, _) in &batch {
                list.push_bind(nodes[*i].0.clone());
            }
            sql.push(")");
            let rows: Vec<CheckpointRow> = sql.build_query_as().fetch_all(&mut *conn).await?;
            let mut rows: HashMap<String, CheckpointRow> = rows.into_iter().map(|r| (r.id.clone(), r)).collect();
            for (i, depth) in batch {
                // Gone since the shape was read (retention): not listed.
                if let Some(row) = rows.remove(&nodes[*i].0) {
                    let mut cp = match row.verified_state() {
                        Ok(cp) => cp,
                        Err(_) => Checkpoint { corrupt: true, ..row.to_meta() },
                    };
                    if !include_state {
                        cp.state = None;
                    }
                    cp.depth = *depth;
                    if !page.take(prost::Message::encoded_len(&cp)) {
                        break 'page;
                    }
                    checkpoints.push(cp);
                }
                next += 1;
            }
        }
        let next_page_token = match checkpoints.last() {
            Some(last) if next < order.len() => crate::core::page::token(&last.id),
            _ => String::new(),
        };
        Ok(ListCheckpointsResponse { checkpoints, head_checkpoint_id: head.0.unwrap_or_default(), as_of_revision, next_page_token })
    }
}

/// The digests among `digests` that the project has no chunk for.
async fn missing_chunks(conn: &mut Conn, project: &str, digests: &[String]) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    // In slices, to stay far below any bound-parameter limit.
    for slice in digests.chunks(500) {
        let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT digest FROM chunks WHERE project = ");
        sql.push_bind(project.to_owned()).push(" AND digest IN (");
        let mut list = sql.separated(", ");
        for d in slice {
            list.push_bind(d.clone());
        }
        sql.push(")");
        let present: Vec<(String,)> = sql.build_query_as().fetch_all(&mut *conn).await?;
        let present: HashSet<String> = present.into_iter().map(|(d,)| d).collect();
        missing.extend(slice.iter().filter(|d| !present.contains(*d)).cloned());
    }
    Ok(missing)
}

impl Backend {
    pub(crate) async fn do_put_chunks(&self, project: String, chunks: Vec<(String, Vec<u8>, i64)>) -> Result<i32> {
        let mut stored = 0;
        let now = crate::store::rows::us(&prost_types::Timestamp::from(std::time::SystemTime::now()));
        let mut write = plain_write(self).await?;
        for (digest, data, size) in chunks {
            let done = sqlx::query(
                "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (project, digest) DO NOTHING",
            )
            .bind(&project)
            .bind(&digest)
            .bind(data)
            .bind(size)
            .bind(now)
            .execute(&mut *write)
            .await?;
            stored += i32::try_from(done.rows_affected()).unwrap_or(0);
        }
        write.commit().await?;
        Ok(stored)
    }

    pub(crate) async fn do_get_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<(String, Vec<u8>, i64)>> {
        let mut out = Vec::with_capacity(digests.len());
        let mut conn = self.pool.acquire().await?;
        for digest in digests {
            let row: Option<(Vec<u8>, i64)> = sqlx::query_as("SELECT data, size_bytes FROM chunks WHERE project = $1 AND digest = $2")
                .bind(&project)
                .bind(&digest)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some((data, size)) = row {
                out.push((digest, data, size));
            }
        }
        Ok(out)
    }
}

/// Depth-first from the roots, children oldest first, of (id, parent, …) nodes in
/// creation order: their indices, each with its depth.
fn tree_order<T>(nodes: &[(String, Option<String>, T)]) -> Vec<(usize, i32)> {
    let ids: HashSet<&str> = nodes.iter().map(|(id, ..)| id.as_str()).collect();
    let mut children: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    for (i, (_, parent, _)) in nodes.iter().enumerate() {
        // A parent outside this list (pruned) makes the node a root.
        let parent = parent.as_deref().filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(i);
    }
    let mut out = Vec::with_capacity(nodes.len());
    let mut stack: Vec<(usize, i32)> = children.get(&None).map(|roots| roots.iter().rev().map(|r| (*r, 0)).collect()).unwrap_or_default();
    while let Some((i, depth)) = stack.pop() {
        out.push((i, depth));
        if let Some(kids) = children.get(&Some(nodes[i].0.as_str())) {
            stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
        }
    }
    out
}
