// `Store` for this backend: each method is the shared implementation above.

use baton_proto::v1 as pb;

use crate::store::{Expiry, SessionQuery};

impl crate::store::Store for Backend {
    type Tx = BackendTx;
    const RESUME_BRIEF_WAITS: bool = RESUME_BRIEF_WAITS;
    async fn begin(&self, lock: crate::store::model::Lock<'_>) -> Result<(BackendTx, crate::store::model::Locked)> {
        self.begin_write(lock).await
    }
    async fn touch_session(&self, id: String, tool_count: i64, status: Option<SessionStatus>, within: crate::store::Within) -> Result<Option<(i32, i64)>> {
        self.liveness(id, tool_count, status, within).await
    }
    async fn expired_sessions(&self, expiry: Expiry) -> Result<Vec<(String, String, i32, i64)>> {
        self.expired(expiry).await
    }
    async fn session(&self, id: String) -> Result<Option<crate::store::model::Session>> {
        self.session_by_id(id).await
    }
    async fn sessions(&self, query: SessionQuery) -> Result<Vec<crate::store::model::Session>> {
        self.session_list(query).await
    }
    async fn checkpoint(&self, id: String, payload: bool) -> Result<Option<crate::store::model::Checkpoint>> {
        self.checkpoint_by_id(id, payload).await
    }
    async fn checkpoint_nodes(&self, session_id: String) -> Result<Vec<crate::store::model::Node>> {
        self.nodes(session_id).await
    }
    async fn checkpoints(&self, ids: Vec<String>) -> Result<Vec<crate::store::model::Checkpoint>> {
        self.checkpoints_by_id(ids).await
    }
    async fn list_memory(&self, req: pb::ListMemoryRequest, page_size: i64, after: Option<crate::store::MemoryPosition>) -> Result<pb::ListMemoryResponse> {
        self.do_list_memory(req, page_size, after).await
    }
    async fn brief_data(&self, q: crate::store::BriefFor) -> Result<BriefData> {
        self.do_brief_data(q).await
    }
    async fn list_events(&self, project: String, after: i64, limit: i64, kinds: Vec<i32>) -> Result<pb::ListEventsResponse> {
        self.do_list_events(project, after, limit, kinds).await
    }
    async fn events_after(&self, project: String, after: i64, limit: i64, budget: usize) -> Result<(Vec<Event>, bool)> {
        self.do_events_after(project, after, limit, budget).await
    }
    async fn list_conflicts(&self, project: String, after: i64, limit: i64) -> Result<pb::ListConflictsResponse> {
        self.do_list_conflicts(project, after, limit).await
    }
    async fn present_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<String>> {
        self.present_chunks(project, &digests).await
    }
    async fn put_chunks(&self, project: String, chunks: Vec<(String, Vec<u8>, i64)>) -> Result<i32> {
        let now = crate::core::time::now_us();
        Ok(i32::try_from(self.store_chunks(project, chunks, now).await?).unwrap_or(i32::MAX))
    }
    async fn get_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<(String, Vec<u8>, i64)>> {
        self.chunk_data(project, digests).await
    }
    async fn insert_token(&self, token: crate::store::TokenRow, secret_hash: String) -> Result<()> {
        self.insert_token(&token, &secret_hash).await
    }
    async fn token_named(&self, name: String) -> Result<Option<crate::store::TokenRow>> {
        self.token_named(name).await
    }
    async fn list_tokens(&self) -> Result<Vec<crate::store::TokenRow>> {
        self.tokens().await
    }
    async fn revoke_token(&self, name: String) -> Result<bool> {
        self.revoke(name, crate::core::time::now_us()).await
    }
    async fn token_by_hash(&self, secret_hash: String) -> Result<Option<crate::store::TokenRow>> {
        self.token_hashed(secret_hash).await
    }
    async fn any_tokens(&self) -> Result<bool> {
        self.any_token().await
    }
    async fn touch_token(&self, id: String, now_us: i64) -> Result<()> {
        self.token_used(id, now_us).await
    }
    async fn project_of(&self, kind: crate::store::Entity, id: String) -> Result<Option<String>> {
        self.project_of_id(kind, id).await
    }
    async fn existing_projects(&self, keys: Vec<String>) -> Result<Vec<String>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.existing(keys).await
    }
    async fn head_revision(&self, project: String) -> Result<i64> {
        self.head(project).await
    }
    async fn projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        self.with_old_checkpoints(cutoff_us).await
    }
    async fn prune_requests(&self, before_us: i64) -> Result<u64> {
        self.forget_requests(before_us).await
    }
    async fn list_projects(&self) -> Result<Vec<(String, String)>> {
        self.projects().await
    }
    async fn export_page(&self, project: String, table: crate::store::transfer::Table, after: crate::store::transfer::Cursor, limit: i64) -> Result<(Vec<crate::store::transfer::Line>, Option<crate::store::transfer::Cursor>)> {
        self.do_export_page(project, table, after, limit).await
    }
    async fn import_unrevisioned(&self, project: String, memory_caps: Option<String>, chunks: Vec<crate::store::transfer::ChunkLine>) -> Result<crate::store::transfer::ImportCounts> {
        let (imported, skipped) = self.import_chunks(project, memory_caps, chunks).await?;
        Ok(crate::store::transfer::ImportCounts { imported, skipped })
    }
    async fn project_stats(&self, project: String) -> Result<Option<crate::store::model::ProjectCounts>> {
        self.counts(project).await
    }
    async fn session_counts(&self) -> Result<Vec<(i32, i64)>> {
        self.statuses().await
    }
    fn pool_stats(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }
    async fn close(&self) {
        // The writer's lanes hold their connections; the pool's close waits for them.
        self.writer.close().await;
        self.pool.close().await;
    }
}
