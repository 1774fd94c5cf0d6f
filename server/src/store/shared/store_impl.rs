// `Store` for this backend: each method is the shared implementation above.

use baton_proto::v1 as pb;

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
    async fn get_session(&self, id: uuid::Uuid, within: crate::store::Within) -> Result<pb::GetSessionResponse> {
        self.do_get_session(id, within).await
    }
    async fn list_sessions(&self, query: SessionQuery) -> Result<pb::ListSessionsResponse> {
        self.do_list_sessions(query).await
    }
    async fn get_checkpoint(&self, id: uuid::Uuid, include_payload: bool, within: crate::store::Within) -> Result<pb::GetCheckpointResponse> {
        self.do_get_checkpoint(id, include_payload, within).await
    }
    async fn list_checkpoints(&self, session_id: uuid::Uuid, include_state: bool, page_size: i64, after: Option<String>, within: crate::store::Within) -> Result<pb::ListCheckpointsResponse> {
        self.do_list_checkpoints(session_id, include_state, page_size, after, within).await
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
    async fn missing_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<String>> {
        let mut conn = self.pool.acquire().await?;
        missing_chunks(&mut conn, &project, &digests).await
    }
    async fn put_chunks(&self, project: String, chunks: Vec<(String, Vec<u8>, i64)>) -> Result<i32> {
        self.do_put_chunks(project, chunks).await
    }
    async fn get_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<(String, Vec<u8>, i64)>> {
        self.do_get_chunks(project, digests).await
    }
    async fn create_token(&self, name: String, role: String, project: Option<String>, secret_hash: String) -> Result<crate::store::TokenRow> {
        self.do_create_token(name, role, project, secret_hash).await
    }
    async fn list_tokens(&self) -> Result<Vec<crate::store::TokenRow>> {
        self.do_list_tokens().await
    }
    async fn revoke_token(&self, name: String) -> Result<bool> {
        self.do_revoke_token(name).await
    }
    async fn token_by_hash(&self, secret_hash: String) -> Result<Option<crate::store::TokenRow>> {
        self.do_token_by_hash(secret_hash).await
    }
    async fn any_tokens(&self) -> Result<bool> {
        self.do_any_tokens().await
    }
    async fn touch_token(&self, id: String, now_us: i64) -> Result<()> {
        self.do_touch_token(id, now_us).await
    }
    async fn project_of(&self, kind: crate::store::Entity, id: String) -> Result<Option<String>> {
        self.do_project_of(kind, id).await
    }
    async fn existing_projects(&self, keys: Vec<String>) -> Result<Vec<String>> {
        self.do_existing_projects(keys).await
    }
    async fn head_revision(&self, project: String) -> Result<i64> {
        head_revision(&mut *self.pool.acquire().await?, &project).await
    }
    async fn projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        self.do_projects_with_old_checkpoints(cutoff_us).await
    }
    async fn prune_requests(&self, before_us: i64) -> Result<u64> {
        self.do_prune_requests(before_us).await
    }
    async fn list_projects(&self) -> Result<Vec<(String, String)>> {
        self.do_list_projects().await
    }
    async fn export_page(&self, project: String, table: crate::store::transfer::Table, after: crate::store::transfer::Cursor, limit: i64) -> Result<(Vec<crate::store::transfer::Line>, Option<crate::store::transfer::Cursor>)> {
        self.do_export_page(project, table, after, limit).await
    }
    async fn import_unrevisioned(&self, project: String, memory_caps: Option<String>, chunks: Vec<crate::store::transfer::ChunkLine>) -> Result<crate::store::transfer::ImportCounts> {
        self.do_import_unrevisioned(project, memory_caps, chunks).await
    }
    async fn project_stats(&self, project: String) -> Result<Option<pb::ProjectStats>> {
        self.do_project_stats(project).await
    }
    async fn session_counts(&self) -> Result<Vec<(i32, i64)>> {
        Ok(sqlx::query_as("SELECT status, COUNT(*) FROM sessions GROUP BY status").fetch_all(&self.pool).await?)
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
