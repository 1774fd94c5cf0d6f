//! The schema's history. Each backend's migrations start from one baseline
//! (`migrations/<backend>/20261128000001_baseline.sql`). A database made before it, by a
//! development build, records the migrations the baseline replaced (kept in
//! `tests/fixtures/migrations/`, where a test makes such a database). One whose history is
//! complete is adopted in place, in one transaction: what the baseline no longer has is
//! dropped, the baseline is recorded as applied instead of that history, and every row stays
//! where it is. Any other history is refused, saying what to do.

use anyhow::bail;
use sqlx::migrate::Migrator;
use sqlx::{Connection as _, PgConnection, SqliteConnection};

/// The versions of a complete history before the baseline, on Postgres.
const POSTGRES_BEFORE: &[i64] = &[
    20_261_122_000_001,
    20_261_122_000_002,
    20_261_122_000_003,
    20_261_122_000_004,
    20_261_122_000_005,
    20_261_122_000_006,
    20_261_122_000_007,
    20_261_123_000_008,
    20_261_123_000_009,
    20_261_125_000_010,
    20_261_125_000_011,
    20_261_125_000_012,
    20_261_126_000_013,
    20_261_126_000_014,
    20_261_126_000_015,
    20_261_126_000_016,
    20_261_126_000_017,
    20_261_127_000_018,
    20_261_127_000_019,
];

/// The versions of a complete history before the baseline, on SQLite.
const SQLITE_BEFORE: &[i64] = &[
    20_261_122_000_001,
    20_261_122_000_002,
    20_261_122_000_003,
    20_261_122_000_004,
    20_261_122_000_005,
    20_261_122_000_006,
    20_261_123_000_008,
    20_261_125_000_010,
    20_261_126_000_013,
    20_261_126_000_015,
    20_261_126_000_016,
    20_261_127_000_019,
];

/// The functions of the Postgres schema before the baseline that no server calls (the
/// write function is installed at start-up, `postgres/apply.rs`), every overload of each.
const DROP_POSTGRES_FUNCTIONS: &str = "DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.proname IN ('baton_lock', 'baton_begin', 'baton_apply', 'baton_apply_lock')
          AND p.pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE 'DROP FUNCTION ' || f::text;
    END LOOP;
END
$$";

/// Servers started together on one Postgres adopt its database once: each waits for this
/// lock, then reads the history again.
const ADOPTION_LOCK: i64 = 0x6261_746f_6e5f_6164;

/// What a database's recorded migrations say about it.
#[derive(Debug, PartialEq, Eq)]
enum History {
    /// Nothing recorded: the migrator makes the schema from the baseline.
    New,
    /// The baseline (and maybe later migrations) recorded: the migrator goes on from there.
    Baselined,
    /// Made before the baseline, complete: adopted.
    Adoptable,
}

/// Reads `applied` (version, success), oldest first.
fn history(applied: &[(i64, bool)], before: &[i64], migrator: &Migrator) -> anyhow::Result<History> {
    let baseline = baseline(migrator)?.version;
    let versions: Vec<i64> = applied.iter().map(|(version, _)| *version).collect();
    if versions.is_empty() {
        return Ok(History::New);
    }
    if versions[0] >= baseline {
        return Ok(History::Baselined);
    }
    if versions == before && applied.iter().all(|(_, success)| *success) {
        return Ok(History::Adoptable);
    }
    let last = versions.last().copied().unwrap_or_default();
    let complete = before.last().copied().unwrap_or_default();
    bail!(
        "this database was made by a development build of Baton from before its schema baseline, \
         and its history of migrations ({} recorded, the last {last}{}) is not one this server can \
         adopt in place (a complete one ends at {complete}). Start a Baton server built from \
         commit ebbec06 on it once, which completes that history, then start this one again; \
         or export its projects with that server (`baton-server export --output FILE`) and \
         import them into a new database with this one (`baton-server import --input FILE`)",
        versions.len(),
        if applied.iter().all(|(_, success)| *success) { "" } else { ", one of them failed" },
    )
}

/// The baseline's row in sqlx's table of applied migrations, in place of the history.
fn baseline(migrator: &Migrator) -> anyhow::Result<&sqlx::migrate::Migration> {
    migrator.iter().next().ok_or_else(|| anyhow::anyhow!("this server carries no migrations"))
}

/// The applied migrations recorded in place of the history: the baseline's row alone.
async fn record_baseline<DB>(conn: &mut DB::Connection, migrator: &Migrator) -> anyhow::Result<()>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let baseline = baseline(migrator)?;
    sqlx::query("DELETE FROM _sqlx_migrations").execute(&mut *conn).await?;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, $2, TRUE, $3, 0)",
    )
    .bind(baseline.version)
    .bind(&*baseline.description)
    .bind(&*baseline.checksum)
    .execute(&mut *conn)
    .await?;
    tracing::info!(version = baseline.version, "adopted a database made before the schema baseline");
    Ok(())
}

/// The recorded migrations (version, success), oldest first, if sqlx's table exists.
async fn applied<DB>(conn: &mut DB::Connection, recorded: bool) -> anyhow::Result<Vec<(i64, bool)>>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'r> (i64, bool): sqlx::FromRow<'r, DB::Row>,
{
    if !recorded {
        return Ok(Vec::new());
    }
    let query = sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version");
    Ok(query.fetch_all(&mut *conn).await?)
}

/// Adopts a Postgres database made before the baseline, if it is one, then migrates it.
pub(crate) async fn migrate_postgres(conn: &mut PgConnection, migrator: &Migrator) -> anyhow::Result<()> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ADOPTION_LOCK).execute(&mut *tx).await?;
    let recorded: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(&mut *tx).await?;
    let applied = applied::<sqlx::Postgres>(&mut tx, recorded).await?;
    if history(&applied, POSTGRES_BEFORE, migrator)? == History::Adoptable {
        sqlx::raw_sql(DROP_POSTGRES_FUNCTIONS).execute(&mut *tx).await?;
        record_baseline::<sqlx::Postgres>(&mut tx, migrator).await?;
    }
    tx.commit().await?;
    migrator.run(conn).await?;
    Ok(())
}

/// Adopts an SQLite database made before the baseline, if it is one, then migrates it.
pub(crate) async fn migrate_sqlite(conn: &mut SqliteConnection, migrator: &Migrator) -> anyhow::Result<()> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let recorded: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')",
    )
    .fetch_one(&mut *tx)
    .await?;
    let applied = applied::<sqlx::Sqlite>(&mut tx, recorded).await?;
    if history(&applied, SQLITE_BEFORE, migrator)? == History::Adoptable {
        record_baseline::<sqlx::Sqlite>(&mut tx, migrator).await?;
    }
    tx.commit().await?;
    migrator.run(conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

    fn complete() -> Vec<(i64, bool)> {
        SQLITE_BEFORE.iter().map(|v| (*v, true)).collect()
    }

    #[test]
    fn histories_are_read_as_new_baselined_adoptable_or_refused() {
        let baseline = MIGRATOR.iter().next().unwrap().version;
        assert!(SQLITE_BEFORE.iter().chain(POSTGRES_BEFORE).all(|v| *v < baseline));
        assert_eq!(history(&[], SQLITE_BEFORE, &MIGRATOR).unwrap(), History::New);
        let baselined = [(baseline, true), (baseline + 1, true)];
        assert_eq!(history(&baselined, SQLITE_BEFORE, &MIGRATOR).unwrap(), History::Baselined);
        assert_eq!(history(&complete(), SQLITE_BEFORE, &MIGRATOR).unwrap(), History::Adoptable);
        let mut failed = complete();
        failed.last_mut().unwrap().1 = false;
        let short = &complete()[..complete().len() - 1];
        let mut extra = complete();
        extra.insert(3, (20_261_122_000_099, true));
        for (applied, says) in [
            (failed.as_slice(), "one of them failed"),
            (short, "the last 20261126000016"),
            (extra.as_slice(), "13 recorded"),
        ] {
            let refused = history(applied, SQLITE_BEFORE, &MIGRATOR).unwrap_err().to_string();
            assert!(refused.contains(says) && refused.contains("ebbec06"), "{refused}");
        }
    }
}
