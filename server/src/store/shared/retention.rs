// Retention's reads outside a write, and the pruning of old replies.

impl Backend {
    /// Projects with checkpoints older than the cut-off: the only ones retention can change.
    pub(crate) async fn do_projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT project FROM checkpoints WHERE created_us < $1 ORDER BY project")
            .bind(cutoff_us)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(p,)| p).collect())
    }

    /// Forgets idempotency replies older than `before_us` (clients stop retrying long before).
    pub(crate) async fn do_prune_requests(&self, before_us: i64) -> Result<u64> {
        let mut write = plain_write(self).await?;
        let removed = sqlx::query("DELETE FROM requests WHERE created_us < $1").bind(before_us).execute(&mut *write).await?.rows_affected();
        write.commit().await?;
        Ok(removed)
    }
}
