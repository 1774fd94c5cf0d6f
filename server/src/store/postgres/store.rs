//! `Store` for Postgres: each method one of this folder's statements (`reads.rs`, `admin.rs`,
//! `liveness.rs`, `write.rs`), each a span at debug (off at the default
//! level).

use baton_proto::v1::SessionStatus;

use super::{PgStore, PgTx};
use crate::error::Result;
use crate::store::writer::OnCommit;
use crate::store::{
    Entity, Expiry, SessionQuery, Store, TokenRow, Within, WriteBody, apply, brief, model, transfer,
};

impl Store for PgStore {
    type Tx = PgTx;
    #[tracing::instrument(level = "debug", skip_all)]
    async fn write<R: Send + 'static>(&self, lock: model::Lock, body: WriteBody<PgTx, R>) -> Result<R> {
        let (notifier, project) = (self.notifier.clone(), lock.project.clone());
        // Other instances are told of the newest revision (NOTIFY).
        let announce = move |log: &model::Log| {
            let newest = log.events.iter().map(|e| e.revision).max()?;
            Some(Box::new(move || notifier.announce(&project, newest)) as OnCommit)
        };
        apply::write(&self.writer, &self.commits, lock, body, announce).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn touch_session(
        &self,
        id: String,
        tool_count: i64,
        status: Option<SessionStatus>,
        within: Within,
    ) -> Result<Option<(i32, i64)>> {
        self.liveness(id, tool_count, status, within).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn expired_sessions(&self, expiry: Expiry) -> Result<Vec<(String, String, i32, i64)>> {
        self.expired(expiry).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn session(&self, id: String) -> Result<Option<model::Session>> {
        self.session_by_id(id).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn sessions(&self, query: SessionQuery) -> Result<Vec<model::Session>> {
        self.session_list(query).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoint(&self, id: String, payload: bool) -> Result<Option<model::Checkpoint>> {
        self.checkpoint_by_id(id, payload).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoint_nodes(&self, session_id: String) -> Result<Vec<model::Node>> {
        self.nodes(session_id).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoints(&self, project: String, ids: Vec<String>) -> Result<Vec<model::Checkpoint>> {
        self.checkpoints_by_id(project, ids).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn memory_caps(&self, project: String) -> Result<Option<String>> {
        self.caps(project).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn record_revision(&self, project: String, record: String) -> Result<Option<i64>> {
        self.record_version(project, record).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn memory(&self, query: model::MemoryQuery) -> Result<Vec<model::EntryRow>> {
        self.memory_list(query).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn brief_rows(&self, keys: brief::BriefKeys) -> Result<brief::BriefRows> {
        self.brief(keys).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn newest_memory(
        &self,
        project: String,
        branch: String,
        limit: i64,
    ) -> Result<Vec<model::EntryRow>> {
        self.memory_newest(project, branch, limit).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn search(&self, query: model::SearchQuery) -> Result<model::SearchPage> {
        self.search_candidates(query).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn search_rows(&self, ids: Vec<i64>) -> Result<Vec<model::SearchRow>> {
        self.search_docs_by_id(ids).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn search_backfill(&self) -> Result<Vec<String>> {
        self.search_backfill_projects().await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn log_sizes(
        &self,
        table: model::LogTable,
        project: String,
        after: i64,
        limit: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<(i64, i64)>> {
        self.sizes(table, project, after, limit, kinds).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn log_rows(
        &self,
        table: model::LogTable,
        project: String,
        after: i64,
        through: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<(i64, Vec<u8>)>> {
        self.rows(table, project, after, through, kinds).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn events_from(&self, project: String) -> Result<Option<i64>> {
        self.kept_from(project).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn missing_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<String>> {
        if digests.is_empty() {
            return Ok(Vec::new());
        }
        self.missing(project, &digests).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_chunks(&self, project: String, chunks: Vec<(String, Vec<u8>, i64)>) -> Result<i32> {
        let now = crate::core::time::now_us();
        Ok(i32::try_from(self.store_chunks(project, chunks, now).await?).unwrap_or(i32::MAX))
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_chunks(&self, project: String, digests: Vec<String>) -> Result<Vec<(String, Vec<u8>, i64)>> {
        self.chunk_data(project, digests).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_token(&self, token: TokenRow, secret_hash: String) -> Result<()> {
        self.insert_token(&token, &secret_hash).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn token_named(&self, name: String) -> Result<Option<TokenRow>> {
        self.token_named(name).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_tokens(&self) -> Result<Vec<TokenRow>> {
        self.tokens().await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn revoke_token(&self, name: String) -> Result<bool> {
        self.revoke(name, crate::core::time::now_us()).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn token_by_hash(&self, secret_hash: String) -> Result<Option<TokenRow>> {
        self.token_hashed(secret_hash).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn any_tokens(&self) -> Result<bool> {
        self.any_token().await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn touch_token(&self, id: String, now_us: i64) -> Result<()> {
        self.token_used(id, now_us).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn project_of(&self, kind: Entity, id: String) -> Result<Option<String>> {
        self.project_of_id(kind, id).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn existing_projects(&self, keys: Vec<String>) -> Result<Vec<String>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.existing(keys).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn head_revision(&self, project: String) -> Result<i64> {
        self.head(project).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        self.with_old_checkpoints(cutoff_us).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_requests(&self, before_us: i64) -> Result<u64> {
        self.forget_requests(before_us).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_projects(&self) -> Result<Vec<(String, String)>> {
        self.projects().await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoint_sizes(&self, project: String, after: i64, limit: i64) -> Result<Vec<i64>> {
        crate::store::export::sizes(&self.pool, project, after, limit).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn export_rows(
        &self,
        project: String,
        table: transfer::Table,
        after: transfer::Cursor,
        limit: i64,
    ) -> Result<Vec<(transfer::Cursor, transfer::Line)>> {
        crate::store::export::rows(&self.pool, project, table, after, limit).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn import_unrevisioned(
        &self,
        project: String,
        memory_caps: Option<String>,
        chunks: Vec<transfer::ChunkLine>,
    ) -> Result<transfer::ImportCounts> {
        let (imported, skipped) = self.import_chunks(project, memory_caps, chunks).await?;
        Ok(transfer::ImportCounts { imported, skipped })
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn project_stats(&self, project: String) -> Result<Option<model::ProjectCounts>> {
        self.counts(project).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn session_counts(&self) -> Result<Vec<(i32, i64)>> {
        self.statuses().await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn unstamped_checkpoints(&self, after: String) -> Result<Vec<String>> {
        self.unstamped(after).await
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn stamp_state_digest(&self, id: String, digest: String) -> Result<()> {
        self.stamp(id, digest).await
    }
    fn pool_stats(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }
    #[tracing::instrument(level = "debug", skip_all)]
    async fn close(&self) {
        // The writer's lanes hold their connections; the pool's close waits for them.
        self.writer.close().await;
        self.pool.close().await;
        self.search_pool.close().await;
    }
}
