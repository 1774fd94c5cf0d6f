//! Start-up work on rows an older version wrote, after the migrations and before serving.

use crate::error::Result;
use crate::store::Store;

/// Gives every checkpoint that predates the state digest its state digest (see
/// `core::checkpoint::state_digest_of_stored`), one row at a time, so memory stays that of
/// one checkpoint however many there are. The rows are found through the partial index of
/// the migration that added the column: once all have it, this is one empty index read.
pub async fn state_digests<S: Store>(store: &S) -> Result<u64> {
    let mut done = 0u64;
    let mut after = String::new();
    loop {
        let ids = store.unstamped_checkpoints(after.clone()).await?;
        let Some(last) = ids.last() else { break };
        after.clone_from(last);
        for id in ids {
            let Some(row) = store.checkpoint(id.clone(), true).await? else { continue };
            if row.state_digest.is_some() {
                continue;
            }
            let digest =
                crate::core::checkpoint::state_digest_of_stored(&row.header(), &row.stored(), &row.digest);
            store.stamp_state_digest(id, digest).await?;
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
