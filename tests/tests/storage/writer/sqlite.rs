//! The writer's cases on SQLite.

pub type Db = sqlx::Sqlite;
pub const BEGIN: &str = "BEGIN IMMEDIATE";

/// A new database in a folder of its own (kept while the first value lives).
pub async fn fresh() -> (tempfile::TempDir, sqlx::SqlitePool) {
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.path().join("w.db").display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await.unwrap();
    sqlx::raw_sql("CREATE TABLE t (v TEXT PRIMARY KEY)").execute(&pool).await.unwrap();
    (dir, pool)
}

// The same cases for each backend: the file holds the cases, its parent the backend.
#[allow(clippy::duplicate_mod)]
#[path = "cases.rs"]
mod cases;
