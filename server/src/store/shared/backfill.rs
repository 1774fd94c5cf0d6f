// Start-up work on rows an older version wrote, after the migrations and before serving.

/// Gives every checkpoint that predates the state digest its state digest (see
/// `core::checkpoint::state_digest_of_stored`), one row at a time, so memory stays that of
/// one checkpoint however many there are. The rows are found through the partial index of
/// the migration that added the column: once all have it, this is one empty index read.
async fn backfill_state_digests(conn: &mut Conn) -> Result<u64> {
    let mut done = 0u64;
    let mut after = String::new();
    loop {
        let ids: Vec<(String,)> =
            sqlx::query_as("SELECT id FROM checkpoints WHERE state_digest IS NULL AND id > $1 ORDER BY id LIMIT 100")
                .bind(&after)
                .fetch_all(&mut *conn)
                .await?;
        let Some((last,)) = ids.last() else { break };
        after = last.clone();
        for (id,) in ids {
            let row: Option<CheckpointRow> = sqlx::query_as("SELECT * FROM checkpoints WHERE id = $1 AND state_digest IS NULL")
                .bind(&id)
                .fetch_optional(&mut *conn)
                .await?;
            let Some(row) = row else { continue };
            let state_digest = crate::core::checkpoint::state_digest_of_stored(&row.header(), &row.state, &row.payload, &row.compression, &row.digest);
            sqlx::query("UPDATE checkpoints SET state_digest = $2 WHERE id = $1 AND state_digest IS NULL")
                .bind(&id)
                .bind(&state_digest)
                .execute(&mut *conn)
                .await?;
            done += 1;
            if done.is_multiple_of(1000) {
                tracing::info!(done, "checkpoints given their state digest so far");
            }
        }
    }
    if done > 0 {
        tracing::info!(done, "every checkpoint has its state digest");
    }
    Ok(done)
}
