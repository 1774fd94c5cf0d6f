//! The writer's cases on a throwaway Postgres, and the ones only Postgres has.

pub type Db = sqlx::Postgres;
pub const BEGIN: &str = "BEGIN";

/// A new database in the throwaway cluster.
pub async fn fresh() -> ((), sqlx::PgPool) {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&url).await.unwrap();
    sqlx::raw_sql("CREATE TABLE t (v TEXT PRIMARY KEY)").execute(&pool).await.unwrap();
    ((), pool)
}

// The same cases for each backend: the file holds the cases, its parent the backend.
#[allow(clippy::duplicate_mod)]
#[path = "cases.rs"]
mod cases;

#[path = "begun_ahead.rs"]
mod begun_ahead;

#[allow(clippy::duplicate_mod)]
#[path = "handover.rs"]
mod handover;
