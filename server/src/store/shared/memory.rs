// Project memory reads: a page of ListMemory. (Writes are `service::memory`'s.)

// MemoryEntry and MemoryOp are also used by reads.rs and transfer.rs, included beside this file.
use baton_proto::v1::{ListMemoryRequest, ListMemoryResponse, MemoryEntry};

use crate::core::memory as rules;
use crate::store::parse_caps;
use crate::store::rows::MemoryRow;

const MEMORY_SELECT: &str = "SELECT m.*, r.revision AS record_revision FROM memory m \
     LEFT JOIN records r ON r.project = m.project AND r.record = m.record";

impl Backend {
    /// One page of a project's memory in the list's order, after `after` (the position a
    /// page token holds), read row by row until the page is full.
    pub(crate) async fn do_list_memory(&self, req: ListMemoryRequest, page_size: i64, after: Option<crate::store::MemoryPosition>) -> Result<ListMemoryResponse> {
        use futures::TryStreamExt as _;
        let mut conn = self.pool.acquire().await?;
        let as_of_revision = head_revision(&mut conn, &req.project).await?;
        let caps_json: Option<(String,)> =
            sqlx::query_as("SELECT memory_caps FROM projects WHERE key = $1").bind(&req.project).fetch_optional(&mut *conn).await?;
        let caps = rules::effective_caps(&caps_json.map(|(j,)| parse_caps(&j)).unwrap_or_default()).into_iter().collect();
        let mut record_revisions = HashMap::new();
        // The set the request names, even when it is empty: a client replacing it needs its
        // revision.
        if let (false, Some(branch)) = (req.category.is_empty() || req.category == rules::NOTE, &req.branch) {
            let record = rules::record_name(&req.category, branch, "");
            let found: Option<(i64,)> = sqlx::query_as("SELECT revision FROM records WHERE project = $1 AND record = $2")
                .bind(&req.project)
                .bind(&record)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some((revision,)) = found {
                record_revisions.insert(record, revision);
            }
        }
        let mut sql = sqlx::QueryBuilder::<Db>::new(MEMORY_SELECT);
        sql.push(" WHERE m.project = ").push_bind(req.project.clone());
        if !req.category.is_empty() {
            sql.push(" AND m.category = ").push_bind(req.category.clone());
        }
        if let Some(branch) = &req.branch {
            sql.push(" AND m.branch = ").push_bind(branch.clone());
        }
        if !req.include_evicted {
            sql.push(" AND m.evicted = FALSE");
        }
        if let Some(p) = after {
            sql.push(" AND (m.category, m.branch, m.key, m.revision, m.seq) > (")
                .push_bind(p.category)
                .push(", ")
                .push_bind(p.branch)
                .push(", ")
                .push_bind(p.key)
                .push(", ")
                .push_bind(p.revision)
                .push(", ")
                .push_bind(p.seq)
                .push(")");
        }
        sql.push(" ORDER BY m.category, m.branch, m.key, m.revision, m.seq LIMIT ").push_bind(page_size.saturating_add(1));
        let mut page = crate::core::page::Budget::new(page_size);
        let mut entries = Vec::new();
        let mut last = None;
        let mut more = false;
        {
            let mut rows = sql.build_query_as::<MemoryRow>().fetch(&mut *conn);
            while let Some(row) = rows.try_next().await? {
                let entry = row.to_proto();
                if !page.take(prost::Message::encoded_len(&entry)) {
                    more = true;
                    break;
                }
                if let Some(revision) = row.record_revision {
                    record_revisions.insert(row.record.clone(), revision);
                }
                last = Some(crate::store::MemoryPosition {
                    category: row.category,
                    branch: row.branch,
                    key: row.key,
                    revision: row.revision,
                    seq: row.seq,
                });
                entries.push(entry);
            }
        }
        let next_page_token = match last {
            Some(position) if more => crate::core::page::token(&position),
            _ => String::new(),
        };
        Ok(ListMemoryResponse { entries, caps, as_of_revision, record_revisions, next_page_token })
    }
}
