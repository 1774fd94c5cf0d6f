//! Export (`baton-server export`): a project's rows a page at a time, each table in a
//! keyset order that an import can replay (a parent checkpoint before its children).

use crate::core::page::Budget;
use crate::error::Result;
use crate::store::Store;
use crate::store::transfer::{Cursor, Line, Table};

/// Checkpoints and items may be megabytes each: a page of them ends within this many bytes of stored
/// content (sizes read first), however many rows that is.
const EXPORT_BYTES: usize = 64 * 1024 * 1024;

/// Up to `limit` rows of a table after `after`, and the cursor past them (`None` at the end).
pub async fn page<S: Store>(
    store: &S,
    project: String,
    table: Table,
    after: Cursor,
    limit: i64,
) -> Result<(Vec<Line>, Option<Cursor>)> {
    let (count, cut_short) = match table {
        Table::Checkpoints | Table::Items => {
            let sizes = store.export_sizes(project.clone(), table, after.clone(), limit).await?;
            let mut page = Budget::with_bytes(limit, EXPORT_BYTES);
            let taken =
                sizes.iter().take_while(|n| page.take(usize::try_from(**n).unwrap_or(usize::MAX))).count();
            (i64::try_from(taken).unwrap_or(limit), taken < sizes.len())
        }
        _ => (limit, false),
    };
    let rows = store.export_rows(project, table, after, count).await?;
    let next = rows.last().map(|(cursor, _)| cursor.clone());
    let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit;
    let lines = rows.into_iter().map(|(_, line)| line).collect();
    Ok((lines, if full || cut_short { next } else { None }))
}
